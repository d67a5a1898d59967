"""A tiny store for whole jobs: a Qwen3-MoE policy checkpoint (with Adam state), a PPO batch
(tokens, packed routing, values, rewards, as t1 writes them) and the actor, critic and SFT job
files that train on it."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from safetensors.torch import save_file
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

from t1train import model as M
from t1train import routing as rt

V, L, E, K = 64, 2, 4, 2
RUN = "r1"
POLICY = f"runs/{RUN}/policy/v000000"
ADAM = {"lr": 3e-3, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8}


def config() -> Qwen3MoeConfig:
    return Qwen3MoeConfig(vocab_size=V, hidden_size=16, num_hidden_layers=L, num_attention_heads=2, num_key_value_heads=1,
                          head_dim=8, num_experts=E, num_experts_per_tok=K, moe_intermediate_size=8,
                          max_position_embeddings=64, norm_topk_prob=True, tie_word_embeddings=False)


def encode_packed(ids: np.ndarray, experts: int, enc=0, version=1) -> bytes:
    """A packed routing record (schemas/routing) of ids [T, L, K]; enc and version may be made wrong."""
    def uvarint(v):
        out = bytearray()
        while v >= 0x80:
            out.append(v & 0x7F | 0x80)
            v >>= 7
        out.append(v)
        return bytes(out)

    T, Ll, Kk = ids.shape
    body = bytes([version, enc]) + b"".join(uvarint(v) for v in (T, Ll, Kk, experts)) + ids.astype(rt.dtype_for(experts)).tobytes()
    return body + int(rt.crc32c(body)).to_bytes(4, "little")


def put_table(store: str, key: str, table: str, rows: list[dict], schema: pa.Schema) -> dict:
    t = pa.Table.from_pylist(rows, schema=schema.with_metadata({"t1.table": table, "t1.schema_version": "1.0"}))
    buf = io.BytesIO()
    pq.write_table(t, buf)
    data = buf.getvalue()
    path = os.path.join(store, key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return {"key": key, "table": table, "schema_version": "1.0", "rows": len(rows), "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest()}


def build(store: str) -> dict[str, str]:
    """Writes the store under store and the job files beside it; returns {kind: job file}."""
    rng = np.random.default_rng(11)
    torch.manual_seed(5)
    m = Qwen3MoeForCausalLM(config()).float()
    with torch.no_grad():
        for r in M.routers(m):
            r.weight.normal_(0, 2 / math.sqrt(16))
    ck = os.path.join(store, POLICY)
    m.save_pretrained(ck)
    with open(os.path.join(ck, "tokenizer.json"), "w") as f:
        f.write("{}")
    # Adam's state as t1 saves it: a starting point for the actor's moments.
    opt = {}
    for n, p in m.named_parameters():
        for hub, idx in M.hub_names(n, p):
            shape = p[idx].shape
            opt[f"m.{hub}"] = torch.from_numpy(rng.normal(0, 1e-3, shape).astype(np.float32))
            opt[f"v.{hub}"] = torch.from_numpy(rng.uniform(0, 1e-5, shape).astype(np.float32))
    save_file(opt, os.path.join(ck, M.OPTIMIZER_FILE), metadata={"step": "3", **{k: repr(v) for k, v in ADAM.items()}})

    toks, routes, vals, rewards = [], [], [], []
    lengths = {("t0", 0): [9, 6], ("t0", 1): [13], ("t1", 0): [5, 11, 4], ("t1", 1): [8], ("t2", 0): [14], ("t2", 1): [7, 3]}
    for (task, att), chunks in lengths.items():
        for ci, n in enumerate(chunks):
            ids = rng.integers(0, V, n).tolist()
            loss = [bool(t > 0 and rng.random() < 0.7) for t in range(n)]
            toks.append({"task_id": task, "attempt": att, "chunk": ci, "token_ids": ids,
                         "logprobs": rng.normal(-2, 0.5, n).astype(np.float32).tolist(), "loss_mask": loss,
                         "temperature": 0.9 if task != "t2" else 0.0})
            rec = np.sort(rng.random((n, L, E)).argsort(-1)[..., :K], -1)
            routes.append({"task_id": task, "attempt": att, "chunk": ci, "tokens": n, "layers": L, "top_k": K, "experts": E,
                           "encoding": "packed", "record": encode_packed(rec, E)})
            vals.append({"task_id": task, "attempt": att, "chunk": ci, "values": rng.normal(0, 1, n).astype(np.float32).tolist(),
                         "advantages": rng.normal(0, 1, n).astype(np.float32).tolist(),
                         "returns": rng.normal(0, 1, n).astype(np.float32).tolist()})
        rewards.append({"task_id": task, "attempt": att, "reward": float(rng.integers(0, 2))})
    key = f"runs/{RUN}/iter/000001"
    i32, s = pa.int32(), pa.string()
    man = {
        "format": 1, "run": RUN, "iteration": 1, "policy_version": 0, "routing_encoding": "packed", "routing_dtype": "<u1",
        "model": {"vocab": V, "layers": L, "top_k": K, "experts": E},
        "schema_versions": {"tokens": "1.0", "routing": "1.0", "values": "1.0", "rewards": "1.0"},
        "token_files": [put_table(store, f"{key}/tokens.parquet", "tokens", toks, pa.schema([
            ("task_id", s), ("attempt", i32), ("chunk", i32), ("token_ids", pa.list_(i32)), ("logprobs", pa.list_(pa.float32())),
            ("loss_mask", pa.list_(pa.bool_())), ("temperature", pa.float32())]))],
        "routing_files": [put_table(store, f"{key}/routing.parquet", "routing", routes, pa.schema([
            ("task_id", s), ("attempt", i32), ("chunk", i32), ("tokens", i32), ("layers", i32), ("top_k", i32),
            ("experts", i32), ("encoding", s), ("record", pa.binary())]))],
        "value_files": [put_table(store, f"{key}/values.parquet", "values", vals, pa.schema([
            ("task_id", s), ("attempt", i32), ("chunk", i32), ("values", pa.list_(pa.float32())),
            ("advantages", pa.list_(pa.float32())), ("returns", pa.list_(pa.float32()))]))],
        "reward_files": [put_table(store, f"{key}/rewards.parquet", "rewards", rewards, pa.schema([
            ("task_id", s), ("attempt", i32), ("reward", pa.float64())]))],
    }
    jobs = {
        "actor": {"kind": "actor", "run": RUN, "policy": POLICY, "checkpoint": f"runs/{RUN}/policy/v000001", "version": 1,
                  "manifest": man, "hyperparameters": {"temperature": "per_token", "actor": {
                      "epochs": 2, "minibatches": 2, "clip": 0.2, "normalize_advantages": True, "weigh_attempts": True,
                      "adam": ADAM, "max_grad_norm": 0.5, "replay": True, "max_live_kl": 0}}},
        "critic": {"kind": "critic", "run": RUN, "policy": POLICY, "checkpoint": f"runs/{RUN}/critic/v000001", "version": 1,
                   "manifest": {k: v for k, v in man.items() if k != "value_files"}, "gae": {"gamma": 1.0, "lambda": 0.95},
                   "hyperparameters": {"temperature": "per_token", "critic": {
                       "adam": ADAM, "value_clip": 0.2, "epochs": 2, "max_grad_norm": 1.0, "warmup_steps": 2, "warmup_ev": 0.99}}},
        "sft": {"kind": "sft", "run": RUN, "policy": POLICY, "checkpoint": f"runs/{RUN}/policy/sft-v000001", "version": 1,
                "data": man["token_files"], "steps": 3, "seed": 7, "hyperparameters": {"temperature": "per_token", "sft": {
                    "adam": {**ADAM, "weight_decay": 0.1}, "schedule": "cosine", "max_grad_norm": 1.0, "batch": 4}}},
    }
    out = {}
    for kind, j in jobs.items():
        p = os.path.join(os.path.dirname(os.path.abspath(store)), f"{kind}.json")
        with open(p, "w") as f:
            json.dump(j, f)
        out[kind] = p
    return out
