"""FSDP2 on the CPU: two gloo ranks train as one process does.

The same actor, critic and SFT jobs (fixture.py) run once in this process (unsharded, activation
checkpointing off) and once as two spawned ranks (FSDP2-sharded, activation checkpointing on, the
batch split by tokens); the metrics, the critic's values and every tensor of the checkpoints and of
Adam's state agree within float32 summation-order noise."""

import json
import math
import os
import random
import socket

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from safetensors import safe_open

from t1train import dist as D
from t1train import model as M
from t1train import parallel
from t1train.tests import fixture, ranks

RTOL = 1e-5


def free_port() -> int:
    """A free port for a process group's store, drawn below the kernel's ephemeral range: the
    port is closed again before rank 0 binds it, and one from that range (bind to port 0) could
    meanwhile go to any listener the other tests on the machine start, which rank 1 would then
    reach instead."""
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    rng = random.Random()  # unseeded: two test processes must not draw the same ports
    for _ in range(100):
        port = rng.randrange(max(1024, lo - 12000), lo)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range after 100 draws")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("fsdp")
    store = d / "store"
    jobs = fixture.build(str(store))
    env = {"T1_STORE_DIR": str(store), "T1TRAIN_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    with pytest.MonkeyPatch.context() as mpatch:
        for k, v in {**env, "T1TRAIN_ACTIVATION_CHECKPOINTING": "off"}.items():
            mpatch.setenv(k, v)
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            mpatch.delenv(k, raising=False)
        from t1train.train import run

        one = {kind: run(path, str(d / "one" / kind)) for kind, path in jobs.items()}
    out = d / "two.json"
    mp.start_processes(ranks.worker, nprocs=2, start_method="spawn", args=(
        2, free_port(), jobs, str(d / "two"), {**env, "T1TRAIN_ACTIVATION_CHECKPOINTING": "on"}, str(out)))
    two = json.loads(out.read_text())
    return one, two


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), 1e-12)


def tensors(path):
    with safe_open(path, framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def compare_files(a_dir, b_dir, name) -> float:
    a, ma = tensors(os.path.join(a_dir, name))
    b, mb = tensors(os.path.join(b_dir, name))
    assert sorted(a) == sorted(b), name
    if name == M.OPTIMIZER_FILE:
        assert ma == mb
    worst = 0.0
    for k in a:
        assert a[k].shape == b[k].shape and a[k].dtype == b[k].dtype == torch.float32, k
        scale = float(a[k].abs().max()) or 1.0
        d = float((a[k] - b[k]).abs().max()) / scale
        assert d <= RTOL, f"{name} {k}: differs by {d:.3g} of its largest entry"
        worst = max(worst, d)
    return worst


@pytest.mark.parametrize("kind", ["actor", "critic", "sft"])
def test_two_ranks_train_as_one(runs, kind):
    one, two = runs[0][kind], runs[1][kind]
    worst = {}
    for k, a in one["metrics"].items():
        b = two["metrics"][k]
        if isinstance(a, float):
            worst[k] = rel(a, b)
            assert worst[k] <= RTOL or abs(a - b) <= 1e-9, f"{kind} {k}: {a} vs {b}"
        else:
            assert a == b, f"{kind} {k}: {a} vs {b}"
    assert set(one["metrics"]) == set(two["metrics"])
    if kind == "critic":
        assert len(one["values"]) == len(two["values"])
        d = 0.0
        for x, y in zip(one["values"], two["values"]):
            for f in ("values", "advantages", "returns"):
                d = max(d, float(np.max(np.abs(np.array(x[f]) - np.array(y[f])), initial=0)))
        assert d <= 1e-5
        worst["values (abs)"] = d
    files = ["model.safetensors"] + ([M.OPTIMIZER_FILE] if kind != "sft" else [])
    for name in files:
        worst[name] = compare_files(one["checkpoint"], two["checkpoint"], name)
    print(f"{kind} 1-rank vs 2-rank relative differences: " + ", ".join(f"{k} {v:.2g}" for k, v in worst.items()))


def test_activation_checkpointing_keeps_the_replayed_gradients():
    """Checkpointed layers recompute under the replay record their forward saw: the same
    gradients, bit for bit, as without checkpointing, and not those of routing live."""
    torch.manual_seed(3)
    from transformers import Qwen3MoeForCausalLM

    cfg = fixture.config()
    cfg._attn_implementation, cfg._experts_implementation = "eager", "eager"
    base = Qwen3MoeForCausalLM(cfg).float()
    with torch.no_grad():
        for r in M.routers(base):
            r.weight.normal_(0, 2 / math.sqrt(16))
    ids = [5, 17, 3, 42, 8, 8, 61, 0, 33, 12]
    rec = np.sort(np.random.default_rng(4).random((len(ids) - 1, fixture.L, fixture.E)).argsort(-1)[..., :fixture.K], -1)

    def grads(checkpointed, replay):
        m = Qwen3MoeForCausalLM(cfg).float()
        m.load_state_dict(base.state_dict())
        M.install_replay(m)
        m.eval()
        if checkpointed:
            parallel.checkpoint_layers(m)
        M.action_logprobs(m, ids, 0.8, replay).sum().backward()
        if replay is not None:
            assert (M.used_routing(m)[: len(ids) - 1] == rec).all()
        return {n: p.grad.clone() for n, p in m.named_parameters()}

    plain, ckpt, live = grads(False, rec), grads(True, rec), grads(True, None)
    assert all(torch.equal(plain[n], ckpt[n]) for n in plain)
    assert any(not torch.equal(plain[n], live[n]) for n in plain)


def test_the_split_balances_tokens_deterministically():
    costs = [9, 6, 13, 5, 11, 4, 8, 14, 7, 3]
    parts = D.split(costs, 2)
    assert parts == D.split(list(costs), 2)
    assert sorted(i for p in parts for i in p) == list(range(len(costs)))
    loads = [sum(costs[i] for i in p) for p in parts]
    assert abs(loads[0] - loads[1]) <= max(costs) and all(p == sorted(p) for p in parts)
    assert D.split([5], 3) == [[0], [], []]
    assert D.split(costs, 1) == [list(range(len(costs)))]


def test_the_gpu_check_runs_tiny_on_the_cpu(capsys):
    """bench/gpu-trainer.sh's script, --device cpu --tiny: replay under bf16 and the step benchmark
    print their lines and pass; without a GPU the default refuses with status 2."""
    from t1train import gpucheck

    if not torch.cuda.is_available():
        assert gpucheck.main([]) == 2
    with pytest.MonkeyPatch.context() as mpatch:
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "T1TRAIN_DEVICE"):
            mpatch.delenv(k, raising=False)
        mpatch.setenv("MASTER_PORT", str(free_port()))
        assert gpucheck.main(["--device", "cpu", "--tiny", "--steps", "1"]) == 0
    out = capsys.readouterr().out
    assert "BenchmarkReplayBF16/" in out and "\t0 mismatches-replayed" in out and "replay check PASSED" in out
    assert "BenchmarkActorStep/replay=on/" in out and "BenchmarkActorStep/replay=off/" in out
    assert not torch.distributed.is_initialized()
