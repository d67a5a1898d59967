"""Routing replay, routing records and the command's refusals, on tiny Qwen3-MoE models."""

import copy
import hashlib
import json
import math
import os

import numpy as np
import pytest
import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

from t1train import model as M
from t1train import routing as rt
from t1train.__main__ import main
from t1train.errors import Refused
from t1train.gorand import PCG
from t1train.tests.fixture import encode_packed

L, E, K = 3, 6, 2


def tiny(seed=0, norm_topk_prob=True):
    cfg = Qwen3MoeConfig(vocab_size=64, hidden_size=16, num_hidden_layers=L, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=8, num_experts=E, num_experts_per_tok=K, moe_intermediate_size=8, max_position_embeddings=64,
                         norm_topk_prob=norm_topk_prob, attn_implementation="eager", experts_implementation="eager")
    torch.manual_seed(seed)
    m = Qwen3MoeForCausalLM(cfg).float()
    with torch.no_grad():
        for r in M.routers(m):
            r.weight.normal_(0, 2 / math.sqrt(16))
    M.install_replay(m)
    m.eval()
    return m


IDS = [5, 17, 3, 42, 8, 8, 61, 0, 33, 12, 7, 19]


def live_record(m, ids=IDS):
    with torch.no_grad():
        M.action_logprobs(m, ids, 1.0)
    return M.used_routing(m)


@pytest.mark.parametrize("norm", [True, False])
def test_replay_uses_the_recorded_experts(norm):
    m = tiny(1, norm)
    rec = np.sort(np.random.default_rng(3).random((len(IDS) - 1, L, E)).argsort(-1)[..., :K], -1)
    with torch.no_grad():
        M.action_logprobs(m, IDS, 1.0, rec)
    used = M.used_routing(m)
    assert (used[: len(IDS) - 1] == rec).all(), "every replayed token and layer uses the recorded experts"
    assert (used[-1] == M.live_routing(m)[-1]).all(), "the last token routes live"
    # The gates are the live probabilities at the replayed experts, renormalised iff norm_topk_prob.
    r = M.routers(m)[0]
    h = torch.randn(4, 16)
    r.t1_replay = torch.tensor(rec[:4, 0])
    _, gates, idx = r(h)
    r.t1_replay = None
    p = torch.softmax(h @ r.weight.T, -1).gather(1, idx)
    want = p / p.sum(-1, keepdim=True) if norm else p
    torch.testing.assert_close(gates, want)


def test_replaying_its_own_routing_changes_nothing():
    m = tiny(2)
    with torch.no_grad():
        live = M.action_logprobs(m, IDS, 0.7)
        rec = M.used_routing(m)[:-1]
        replayed = M.action_logprobs(m, IDS, 0.7, rec)
    assert torch.equal(live, replayed)


def test_a_perturbed_policy_mismatches_without_replay_and_not_with_it():
    m = tiny(3)
    rec = live_record(m)[:-1]
    p = copy.deepcopy(m)
    M.install_replay(p)
    with torch.no_grad():
        for r in M.routers(p):
            r.weight.add_(torch.randn_like(r.weight) * 0.5)
        M.action_logprobs(p, IDS, 1.0)
        mis, sets = M.compare_routing(rec, M.used_routing(p)[:-1])
        assert sets == (len(IDS) - 1) * L and mis > 0, f"{mis} of {sets} sets differ without replay"
        M.action_logprobs(p, IDS, 1.0, rec)
        assert M.compare_routing(rec, M.used_routing(p)[:-1]) == (0, sets)


def test_the_router_gets_a_gradient_under_replay():
    m = tiny(4)
    rec = np.sort(np.random.default_rng(5).random((len(IDS) - 1, L, E)).argsort(-1)[..., :K], -1)
    M.action_logprobs(m, IDS, 1.0, rec).sum().backward()
    for r in M.routers(m):
        g = r.weight.grad
        assert g is not None and torch.isfinite(g).all() and g.abs().sum() > 0


@pytest.mark.parametrize("bad", ["expert out of range", "expert twice", "layers", "too many tokens"])
def test_a_malformed_routing_record_is_refused(bad):
    m = tiny(5)
    rec = live_record(m)[:-1].copy()
    if bad == "expert out of range":
        rec[2, 1, 1] = E
    elif bad == "expert twice":
        rec[2, 1, 1] = rec[2, 1, 0]
    elif bad == "layers":
        rec = rec[:, :-1]
    else:
        rec = np.concatenate([rec, rec[:2]], 0)
    with pytest.raises(Refused):
        M.action_logprobs(m, IDS, 1.0, rec)


def test_packed_records_decode_and_damage_is_refused():
    ids = np.sort(np.random.default_rng(1).random((5, L, E)).argsort(-1)[..., :K], -1)
    assert rt.crc32c(b"123456789") == 0xE3069283  # CRC-32C's check value
    assert (rt.decode_packed(encode_packed(ids, E), "x") == ids).all()
    big = np.sort(np.random.default_rng(2).random((3, 2, 300)).argsort(-1)[..., :4], -1)
    assert (rt.decode_packed(encode_packed(big, 300), "x") == big).all()
    good = encode_packed(ids, E)
    for damaged in (good[:-1] + bytes([good[-1] ^ 1]), encode_packed(ids, E, enc=2), encode_packed(ids, E, version=2),
                    encode_packed(ids[:, :, ::-1], E), encode_packed(np.full_like(ids, E), E + 1)[:-4] + b"\0\0\0\0"):
        with pytest.raises(Refused):
            rt.decode_packed(damaged, "x")


def test_go_permutations():
    # rand.New(rand.NewPCG(1, 0x70706f)).Perm(4) and (3, …).Perm(10), as Go draws them.
    assert PCG(1, 0x70706F).perm(4) == [3, 2, 0, 1]
    assert PCG(3, 0x70706F).perm(10) == [9, 4, 2, 5, 0, 8, 3, 1, 6, 7]


def test_a_checksum_mismatch_exits_non_zero_with_one_line_and_no_checkpoint(tmp_path, monkeypatch, capsys):
    storedir, work = tmp_path / "store", tmp_path / "work"
    (storedir / "runs/r1/tokens").mkdir(parents=True)
    work.mkdir()
    data = b"not what the manifest hashed"
    (storedir / "runs/r1/tokens/part-1.parquet").write_bytes(data)
    ref = {"key": "runs/r1/tokens/part-1.parquet", "table": "tokens", "schema_version": "1.1", "rows": 1, "bytes": len(data),
           "sha256": hashlib.sha256(b"something else").hexdigest()}
    job = {"kind": "sft", "run": "r1", "policy": "runs/r1/policy/v000000", "checkpoint": "runs/r1/policy/v000001", "version": 1,
           "data": [ref], "steps": 1, "hyperparameters": {"sft": {"adam": {"lr": 1e-3, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8},
                                                                  "max_grad_norm": 1, "batch": 1}, "temperature": "per_token"}}
    jp, out = tmp_path / "job.json", tmp_path / "result.json"
    jp.write_text(json.dumps(job))
    monkeypatch.setenv("T1_STORE_DIR", str(storedir))
    assert main(["--job", str(jp), "--out", str(out), "--workdir", str(work)]) != 0
    err = capsys.readouterr().err.strip()
    assert "SHA-256" in err and "\n" not in err, err
    assert not out.exists() and not os.listdir(work)


def test_an_unknown_hyperparameter_is_refused(tmp_path, capsys):
    jp = tmp_path / "job.json"
    jp.write_text(json.dumps({"kind": "sft", "run": "r1", "policy": "a", "checkpoint": "b", "version": 1,
                              "hyperparameters": {"sft": {"lr_warmup": 3}, "temperature": "per_token"}}))
    assert main(["--job", str(jp), "--out", str(tmp_path / "r.json")]) != 0
    assert "lr_warmup" in capsys.readouterr().err
