"""Sharded saving: every rank writes the rows it holds into one checkpoint (shards.write), which
transformers loads strictly and which holds exactly what one process saves with save_pretrained;
nothing is gathered, so a rank's memory barely moves while it saves."""

import json
import os

import pytest
import torch
import torch.multiprocessing as mp
from safetensors import safe_open
from transformers import Qwen3MoeForCausalLM

from t1train import model as M
from t1train.tests import ranks
from t1train.tests.test_fsdp import free_port
from t1train.tests.test_shards import checkpoint


def save_on(world: int, ck: str, out: str, gathered=False, shard_bytes=0) -> list[int]:
    mp.start_processes(ranks.saver, nprocs=world, start_method="spawn",
                       args=(world, free_port(), ck, out, gathered, shard_bytes))
    return [json.load(open(f"{out}.{r}.json"))["growth_kb"] for r in range(world)]


def files(d: str, names) -> dict[str, tuple[str, torch.Tensor]]:
    """Every tensor of the files names (under d): {name: (dtype in the header, tensor)}."""
    out = {}
    for n in names:
        with safe_open(os.path.join(d, n), framework="pt") as f:
            for k in f.keys():
                assert k not in out, k
                out[k] = (f.get_slice(k).get_dtype(), f.get_tensor(k))
    return out


def weight_files(d: str) -> list[str]:
    index = os.path.join(d, "model.safetensors.index.json")
    if not os.path.exists(index):
        return ["model.safetensors"]
    return sorted(set(json.load(open(index))["weight_map"].values()))


def strict(d: str) -> dict[str, torch.Tensor]:
    m, info = Qwen3MoeForCausalLM.from_pretrained(d, dtype=torch.float32, output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    return m.state_dict()


@pytest.fixture(scope="module")
def ck(tmp_path_factory):
    # 16 experts over an 8192-row vocabulary, the head tied: about 60 MB of weights, 120 MB of
    # Adam's moments, rows of every tensor on every rank of three.
    d = str(tmp_path_factory.mktemp("saving"))
    c = checkpoint(d, True, hidden=256, experts=16, d_ff=768, vocab=8192, shard_size="40MB")
    with open(os.path.join(c, "tokenizer.json"), "w") as f:
        f.write("{}")
    return c


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_save_what_one_process_saves(tmp_path, ck, world):
    one, many = str(tmp_path / "one"), str(tmp_path / "many")
    save_on(1, ck, one)
    save_on(world, ck, many, shard_bytes=16 << 20)
    names = weight_files(many)
    assert len(names) > 1 and names[0] == f"model-00001-of-{len(names):05d}.safetensors"
    a, b = files(one, weight_files(one)), files(many, names)
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k][0] == b[k][0] == "F32", k
        assert torch.equal(a[k][1], b[k][1]), k
    index = json.load(open(os.path.join(many, "model.safetensors.index.json")))
    assert index["metadata"]["total_size"] == sum(t.numel() * 4 for _, t in b.values())
    x, y = strict(one), strict(many)
    assert sorted(x) == sorted(y)
    for k in x:
        assert torch.equal(x[k], y[k]), k
    assert json.load(open(os.path.join(one, "config.json"))) == json.load(open(os.path.join(many, "config.json")))
    others = lambda d: sorted(n for n in os.listdir(d) if not n.startswith("model"))  # noqa: E731
    assert others(one) == others(many)
    oa, ob = files(one, [M.OPTIMIZER_FILE]), files(many, [M.OPTIMIZER_FILE])
    assert sorted(oa) == sorted(ob)
    for k in oa:
        assert torch.equal(oa[k][1], ob[k][1]), k
    with safe_open(os.path.join(one, M.OPTIMIZER_FILE), "pt") as f, safe_open(os.path.join(many, M.OPTIMIZER_FILE), "pt") as g:
        assert f.metadata() == g.metadata() and g.metadata()["step"] == "7"
    assert {"generation_config.json", "tokenizer.json"} <= set(others(many))


def test_no_rank_gathers_the_state(tmp_path, ck):
    # Three ranks saving the way they did (the whole state to rank 0) and the way they do: rank 0's
    # memory grew by the whole model and its moments, and now no rank's grows by more than a piece.
    gathered = save_on(3, ck, str(tmp_path / "gathered"), gathered=True)
    written = save_on(3, ck, str(tmp_path / "written"))
    total_kb = sum(os.path.getsize(os.path.join(ck, n)) for n in os.listdir(ck) if n.endswith(".safetensors")) // 1024
    print(f"memory growth over the save, each of three ranks: gathered to rank 0 {[g // 1024 for g in gathered]} MB; "
          f"each rank writing its own {written} kB; the checkpoint's tensors {total_kb // 1024} MB")
    assert gathered[0] > total_kb // 2
    assert max(written) < total_kb // 10
