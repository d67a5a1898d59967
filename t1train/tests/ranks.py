"""The worker of test_fsdp: one rank of a gloo process group on the CPU, running jobs as torchrun
would run `python -m t1train` (the same environment variables), rank 0 writing the results."""

from __future__ import annotations

import json
import os


def worker(rank: int, world: int, port: int, jobs: dict, workdir: str, env: dict, out: str) -> None:
    os.environ.update(env)
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    import torch

    torch.set_num_threads(1)
    from t1train.dist import teardown
    from t1train.train import run

    results = {kind: run(path, os.path.join(workdir, kind)) for kind, path in jobs.items()}
    if rank == 0:
        with open(out, "w") as f:
            json.dump(results, f)
    teardown()


def loader(rank: int, world: int, port: int, ck: str, out: str) -> None:
    """One rank loading ck as a job does (sharded when world > 1): the policy and Adam's state,
    then a critic from the policy. It records its memory growth over the policy's and Adam's load
    (anonymous memory, before anything is gathered) in out.<rank>, then gathers each model and the state
    whole; rank 0 saves them to out."""
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "T1TRAIN_DEVICE": "cpu",
                       "T1TRAIN_ACTIVATION_CHECKPOINTING": "off", "TRANSFORMERS_VERBOSITY": "error"})
    import torch
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    torch.set_num_threads(1)
    from t1train import dist as D
    from t1train import model as M
    from t1train import optim
    from t1train.config import Adam as AdamConfig
    from t1train.train import load

    D.setup()
    import transformers.models.qwen3_moe.modeling_qwen3_moe  # noqa: F401  (its import is not the load's)

    def anon_kb() -> int:
        # Anonymous memory alone: the checkpoint's pages that safetensors maps are the page cache's,
        # shared by every rank of a node, not the process's own.
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("RssAnon:"))

    before = anon_kb()
    policy = load(M.load_policy, ck)
    opt = optim.Adam(policy, AdamConfig())
    opt.load_state(M.load_optimizer_state(ck))
    with open(f"{out}.{rank}", "w") as f:
        json.dump({"growth_kb": anon_kb() - before}, f)
    full = StateDictOptions(full_state_dict=True, cpu_offload=True)
    got = {"policy": get_model_state_dict(policy, options=full) if world > 1 else dict(policy.state_dict())}
    got["adam"] = full_moments(opt)
    critic = load(M.critic_from_policy, ck)
    got["critic"] = get_model_state_dict(critic, options=full) if world > 1 else dict(critic.state_dict())
    if rank == 0:
        torch.save(got, out)
    D.teardown()


def fetcher(rank: int, world: int, port: int, root: str, prefixes: list, out: str) -> None:
    """One rank of a node fetching each checkpoint prefix as a job does; it records in out.<rank>
    the downloads it ran, the directory it was handed and its files' bytes, or the error it raised,
    and whether the node's scratch directory is gone after the job."""
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "T1TRAIN_DEVICE": "cpu"})
    from pyarrow import fs as pafs

    from t1train import dist as D
    from t1train import train
    from t1train.store import Store

    D.setup(force=True)
    downloads: list[str] = []

    class Counting(Store):
        def download(self, prefix: str, dest: str) -> str:
            downloads.append(prefix)
            return super().download(prefix, dest)

    st = Counting(pafs.LocalFileSystem(), root)
    scratch = D.node_dir("t1train-in-")
    got: dict = {}
    for p in prefixes:
        try:
            d = train.fetch(st, p, scratch, p.replace("/", "-"))
            got[p] = {"dir": d, "files": {n: open(os.path.join(d, n), "rb").read().hex() for n in sorted(os.listdir(d))}}
        except Exception as e:  # noqa: BLE001 (recorded for the test)
            got[p] = {"error": f"{type(e).__name__}: {e}"}
    D.remove_node_dir(scratch, True)
    with open(f"{out}.{rank}", "w") as f:
        json.dump({"downloads": downloads, "got": got, "scratch_left": os.path.exists(scratch)}, f)
    D.teardown()


def full_moments(opt) -> dict:
    """Adam's moments under the checkpoint's names, each gathered whole to every rank."""
    from torch.distributed.tensor import DTensor

    from t1train.model import hub_names

    out = {}
    for n, p in opt.params:
        for kind, state in (("m", opt.m), ("v", opt.v)):
            t = state[n].full_tensor() if isinstance(state[n], DTensor) else state[n]
            for hub, idx in hub_names(n, p):
                out[f"{kind}.{hub}"] = t[idx].contiguous().clone()
    return out


def saver(rank: int, world: int, port: int, ck: str, out: str, gathered: bool, shard_bytes: int) -> None:
    """One rank loading ck's policy and Adam state (sharded when world > 1) and saving them to out
    as a job does (gathered: the way it did before, everything to rank 0, to compare with). It
    records in out.<rank>.json how far its resident memory rose above where it stood before the save
    (the peak, VmHWM after clearing it)."""
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "T1TRAIN_DEVICE": "cpu",
                       "T1TRAIN_ACTIVATION_CHECKPOINTING": "off", "TRANSFORMERS_VERBOSITY": "error"})
    import gc

    import torch

    torch.set_num_threads(1)
    from t1train import dist as D
    from t1train import model as M
    from t1train import optim
    from t1train.config import Adam as AdamConfig
    from t1train.train import load

    D.setup()
    policy = load(M.load_policy, ck)
    opt = optim.Adam(policy, AdamConfig())
    opt.load_state(M.load_optimizer_state(ck))
    gc.collect()

    def status(field: str) -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM back to the resident size now
    before = status("VmRSS")
    if gathered:
        save_gathered(policy, out, ck, opt)
    else:
        M.save(policy, out, ck, opt, shard_bytes=shard_bytes)
    peak = status("VmHWM")
    with open(f"{out}.{rank}.json", "w") as f:
        json.dump({"growth_kb": peak - before}, f)
    D.teardown()


def save_gathered(model, out: str, tokenizer_from: str, optimizer) -> None:
    """The save that gathers: the whole state to rank 0, which writes it with save_pretrained."""
    import shutil

    from safetensors.torch import save_file
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    from t1train import dist as D
    from t1train import model as M

    sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    opt = {}
    from torch.distributed.tensor import DTensor

    from t1train.model import hub_names

    for n, p in optimizer.params:
        for kind, state in (("m", optimizer.m), ("v", optimizer.v)):
            t = state[n].full_tensor() if isinstance(state[n], DTensor) else state[n]
            if D.is_rank0():
                for hub, idx in hub_names(n, p):
                    opt[f"{kind}.{hub}"] = t[idx].contiguous().clone()
            del t
    if not D.is_rank0():
        return
    model.save_pretrained(out, state_dict={k: v.float() for k, v in sd.items()})
    save_file(opt, os.path.join(out, M.OPTIMIZER_FILE), metadata=optimizer.meta())
    shutil.copyfile(os.path.join(tokenizer_from, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
