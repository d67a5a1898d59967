"""Sharded loading: each rank reads its own rows of the checkpoint (shards.py), and the model and
Adam's state it builds are, gathered back, exactly what one process loading the whole checkpoint
with transformers has; a rank's memory grows by its share, not by the whole."""

import json
import math
import os

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import save_file
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

from t1train import model as M
from t1train.tests import ranks
from t1train.tests.test_fsdp import free_port


def checkpoint(d, tied: bool, hidden=16, experts=4, d_ff=8, vocab=64, shard_size=None) -> str:
    cfg = Qwen3MoeConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=hidden // 2, num_experts=experts, num_experts_per_tok=2, moe_intermediate_size=d_ff,
                         max_position_embeddings=64, norm_topk_prob=True, tie_word_embeddings=tied)
    torch.manual_seed(9)
    m = Qwen3MoeForCausalLM(cfg).float()
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 1 / math.sqrt(hidden))
    ck = os.path.join(d, "ck")
    m.save_pretrained(ck, **({"max_shard_size": shard_size} if shard_size else {}))
    rng = np.random.default_rng(2)
    opt = {}
    for n, p in m.named_parameters():
        for hub, idx in M.hub_names(n, p):
            shape = p[idx].shape
            opt[f"m.{hub}"] = torch.from_numpy(rng.normal(0, 1e-3, shape).astype(np.float32))
            opt[f"v.{hub}"] = torch.from_numpy(rng.uniform(0, 1e-5, shape).astype(np.float32))
    save_file(opt, os.path.join(ck, M.OPTIMIZER_FILE), metadata={"step": "7"})
    return ck


def load_on(world: int, ck: str, out: str) -> list[int]:
    mp.start_processes(ranks.loader, nprocs=world, start_method="spawn", args=(world, free_port(), ck, out))
    return [json.load(open(f"{out}.{r}"))["growth_kb"] for r in range(world)]


def test_three_ranks_load_what_one_process_loads_and_hold_a_third(tmp_path):
    # Three ranks over 24 experts and an 8192-row vocabulary, the LM head tied to the embeddings,
    # the checkpoint in several files under an index: about 100 MB of weights and 200 MB of Adam's
    # moments. Gathered back, the ranks' models and state are exactly one process's (which loads
    # with transformers' from_pretrained); one process's memory grows by all of it, each rank's by
    # about a third.
    ck = checkpoint(str(tmp_path), True, hidden=256, experts=24, d_ff=1024, vocab=8192, shard_size="40MB")
    assert os.path.exists(os.path.join(ck, "model.safetensors.index.json"))
    one_growth = load_on(1, ck, str(tmp_path / "one.pt"))[0]
    three_growth = load_on(3, ck, str(tmp_path / "three.pt"))
    one, three = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "three.pt")
    for part in ("policy", "adam", "critic"):
        a, b = one[part], three[part]
        assert sorted(a) == sorted(b), part
        for k in a:
            assert torch.equal(a[k].float(), b[k].float()), f"{part} {k} differs"
    assert all(float(v.abs().sum()) == 0 for k, v in three["critic"].items() if k.startswith("score."))
    print(f"memory growth over the load: one process {one_growth // 1024} MB; each of three ranks "
          f"{[g // 1024 for g in three_growth]} MB")
    assert max(three_growth) < 0.5 * one_growth


def unsharded(model):
    from t1train import parallel

    parallel.parallelize(model, False, torch.device("cpu"), ac=False)
    return model


@pytest.mark.parametrize("kind", ["policy", "critic"])
def test_the_meta_path_loads_what_transformers_loads(tmp_path, kind):
    # The sharded path's reading on one process (nothing sharded): every tensor equal, the
    # experts' fused matrices included, an untied head.
    ck = checkpoint(str(tmp_path), False)
    load = M.load_policy if kind == "policy" else M.critic_from_policy
    a, b = load(ck).state_dict(), load(ck, place=unsharded).state_dict()
    assert sorted(a) == sorted(b)
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_a_checkpoint_missing_a_tensor_or_with_one_more_is_refused(tmp_path):
    from safetensors import safe_open

    from t1train.errors import Refused

    ck = checkpoint(str(tmp_path), False)
    path = os.path.join(ck, "model.safetensors")
    with safe_open(path, framework="pt") as f:
        full = {k: f.get_tensor(k) for k in f.keys()}
    gone = "model.layers.1.mlp.experts.3.up_proj.weight"
    save_file({k: v for k, v in full.items() if k != gone}, path, metadata={"format": "pt"})
    with pytest.raises(Refused, match=gone):
        M.load_policy(ck, place=unsharded)
    save_file({**full, "model.layers.1.mlp.extra": full[gone].clone()}, path, metadata={"format": "pt"})
    with pytest.raises(Refused, match="unexpected_keys"):
        M.load_policy(ck, place=unsharded)
