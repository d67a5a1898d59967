"""A PPO batch read from the store (Go: batch.Load): every object checked against the manifest
(size, SHA-256, table, schema major, rows), then tokens, routing, values and rewards joined per
chunk (task_id, attempt, chunk), attempts in (task_id, attempt) order and their chunks in order."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import routing as rt
from .errors import Missing, Refused
from .store import Store

# The tables this trainer reads, and the schema major version of each it understands.
MAJORS = {"tokens": 1, "routing": 1, "values": 1, "rewards": 1, "trajectories": 1}


@dataclass
class Chunk:
    task_id: str
    attempt: int
    chunk: int
    ids: list[int]
    loss: list[bool]
    sampled: list[float]  # the sampler's log-probs (float32 values)
    temperature: float  # as recorded, float32; 0 counts as 1
    routing: np.ndarray | None = None  # [T_r, L, K]
    values: list[float] | None = None
    advantages: list[float] | None = None
    returns: list[float] | None = None


@dataclass
class Attempt:
    task_id: str
    attempt: int
    chunks: list[Chunk] = field(default_factory=list)
    reward: float | None = None


@dataclass
class Batch:
    manifest: dict
    attempts: list[Attempt]
    actions: int

    def chunks(self) -> list[Chunk]:
        return [c for a in self.attempts for c in a.chunks]


COMPACTION_FORMAT = "t1.compaction/1"


def parquet(key: str, data: bytes) -> pa.Table:
    try:
        return pq.read_table(pa.BufferReader(data))
    except Exception as e:  # noqa: BLE001 - any unreadable object is the input's fault
        raise Refused(f"{key}: not a readable Parquet file: {e}") from None


def compacted(store: Store, ref: dict) -> pa.Table | None:
    """ref's rows from the object its table partition was compacted into, when a compaction took
    it in (its record, runs/<run>/compactions/<table>/<dir>-NNNN/record-*.json, names it with the
    same size and SHA-256); None when none did. The compacted object is checked as any FileRef is,
    and its rows [offset, offset + rows) are the source's, in order (schemas.CompactionRecord)."""
    parts = ref["key"].split("/")
    if len(parts) != 5 or parts[0] != "runs":
        return None
    prefix = f"runs/{parts[1]}/compactions/{parts[2]}/{parts[3]}"
    for name in store.list(prefix):
        if not (name.startswith("record-") and name.endswith(".json")):
            continue
        try:
            rec = json.loads(store.read(f"{prefix}/{name}"))
        except ValueError as e:
            raise Refused(f"{prefix}/{name}: not a compaction record: {e}") from None
        if rec.get("format") != COMPACTION_FORMAT:
            raise Refused(f"{prefix}/{name}: format {rec.get('format')!r}, this trainer reads {COMPACTION_FORMAT}")
        for src in rec.get("sources") or []:
            if src.get("key") != ref["key"]:
                continue
            for f in ("bytes", "sha256", "rows"):
                if str(src.get(f)) != str(ref[f]):
                    raise Refused(f"{ref['key']}: compacted with {f} {src.get(f)}, the manifest says {ref[f]}")
            obj = rec["object"]
            t = parquet(obj["key"], store.read_ref(obj))
            return t.slice(int(src["offset"]), int(src["rows"])).replace_schema_metadata(t.schema.metadata)
    return None


def read_table(store: Store, ref: dict, want: str) -> pa.Table:
    """Reads one FileRef's Parquet object after checking its bytes, table and schema major; an
    object a compaction took in (and deleted) is read from the compacted one."""
    key = ref["key"]
    try:
        t = parquet(key, store.read_ref(ref))
    except Missing:
        t = compacted(store, ref)
        if t is None:
            raise
    meta = t.schema.metadata or {}
    name = meta.get(b"t1.table", b"").decode()
    ver = meta.get(b"t1.schema_version", b"").decode()
    if name != want:
        raise Refused(f"{key}: holds table {name!r}, want {want!r}")
    for v, what in ((ver, "file"), (ref.get("schema_version", ""), "manifest")):
        try:
            major = int(v.split(".")[0])
        except ValueError:
            raise Refused(f"{key}: schema version {v!r} ({what})") from None
        if major != MAJORS[want]:
            raise Refused(f"{key}: table {want} schema version {v} ({what}), this trainer reads major {MAJORS[want]}")
    if t.num_rows != int(ref["rows"]):
        raise Refused(f"{key}: {t.num_rows} rows, the manifest says {ref['rows']}")
    return t


def read_rows(store: Store, refs: list[dict], want: str, columns: list[str]) -> list[dict]:
    rows: list[dict] = []
    for ref in refs:
        t = read_table(store, ref, want)
        missing = [c for c in columns if c not in t.column_names]
        if missing:
            raise Refused(f"{ref['key']}: no column {missing}")
        rows.extend(t.select(columns).to_pylist())
    return rows


TOKEN_COLUMNS = ["task_id", "attempt", "chunk", "token_ids", "logprobs", "loss_mask", "temperature"]


def load_batch(store: Store, m: dict, need_values: bool) -> Batch:
    dims = m.get("model") or {}
    L, K, E = int(dims.get("layers", 0)), int(dims.get("top_k", 0)), int(dims.get("experts", 0))
    if m.get("format") != 1:
        raise Refused(f"batch manifest: format {m.get('format')}, this trainer reads 1")
    if m.get("routing_encoding") != "packed":
        raise Refused(f"batch manifest: routing_encoding {m.get('routing_encoding')!r}, this trainer reads \"packed\"")
    if m.get("routing_dtype") != rt.dtype_for(E):
        raise Refused(f"batch manifest: routing_dtype {m.get('routing_dtype')!r}, want {rt.dtype_for(E)!r} for {E} experts")
    for table, v in (m.get("schema_versions") or {}).items():
        if table in MAJORS and not v.startswith(f"{MAJORS[table]}."):
            raise Refused(f"batch manifest: table {table} schema version {v}, this trainer reads major {MAJORS[table]}")
    toks = read_rows(store, m.get("token_files") or [], "tokens", TOKEN_COLUMNS)
    routes = read_rows(store, m.get("routing_files") or [], "routing",
                       ["task_id", "attempt", "chunk", "tokens", "layers", "top_k", "experts", "encoding", "record"])
    vals = read_rows(store, m.get("value_files") or [], "values", ["task_id", "attempt", "chunk", "values", "advantages", "returns"])
    rewards = read_rows(store, m.get("reward_files") or [], "rewards", ["task_id", "attempt", "reward"])
    if need_values and not m.get("value_files"):
        raise Refused("batch manifest: no value_files (the critic has not run)")

    chunks: dict[tuple, Chunk] = {}
    attempts: dict[tuple, Attempt] = {}
    actions = 0
    for t in toks:
        where = f"tokens of task {t['task_id']} attempt {t['attempt']} chunk {t['chunk']}"
        n = len(t["token_ids"])
        if len(t["logprobs"]) != n or len(t["loss_mask"]) != n:
            raise Refused(f"{where}: {n} ids, {len(t['logprobs'])} log-probs, {len(t['loss_mask'])} mask entries")
        if n and t["loss_mask"][0]:
            raise Refused(f"{where}: token 0 is in the loss region, but nothing predicts it")
        key = (t["task_id"], t["attempt"], t["chunk"])
        if key in chunks:
            raise Refused(f"{where}: appears twice")
        c = Chunk(t["task_id"], t["attempt"], t["chunk"], list(t["token_ids"]), list(t["loss_mask"]), list(t["logprobs"]),
                  float(t["temperature"] or 0.0))
        chunks[key] = c
        a = attempts.setdefault(key[:2], Attempt(key[0], key[1]))
        a.chunks.append(c)
        actions += sum(1 for x in c.loss if x)
    for r in routes:
        key = (r["task_id"], r["attempt"], r["chunk"])
        where = f"routing of task {key[0]} attempt {key[1]} chunk {key[2]}"
        c = chunks.get(key)
        if c is None:
            raise Refused(f"{where}: no such chunk in token_files")
        if c.routing is not None:
            raise Refused(f"{where}: appears twice")
        if r["encoding"] != "packed":
            raise Refused(f"{where}: encoding {r['encoding']!r}, this trainer reads only \"packed\"")
        ids = rt.decode_packed(r["record"], where)
        if ids.shape != (r["tokens"], r["layers"], r["top_k"]) or r["experts"] != E:
            raise Refused(f"{where}: record {list(ids.shape)} does not match its columns")
        if ids.shape[1:] != (L, K):
            raise Refused(f"{where}: {ids.shape[1]} layers, top-{ids.shape[2]}; the manifest's model has {L}, top-{K}")
        c.routing = ids
    for key, c in chunks.items():
        if c.routing is None:
            raise Refused(f"task {key[0]} attempt {key[1]} chunk {key[2]} has no routing row")
    seen = set()
    for v in vals:
        key = (v["task_id"], v["attempt"], v["chunk"])
        c = chunks.get(key)
        if c is None:
            raise Refused(f"value_files hold task {key[0]} attempt {key[1]} chunk {key[2]}, which token_files lack")
        if key in seen:
            raise Refused(f"value_files: task {key[0]} attempt {key[1]} chunk {key[2]} appears twice")
        seen.add(key)
        n = len(c.ids)
        if len(v["values"]) != n or len(v["advantages"]) != n or len(v["returns"]) != n:
            raise Refused(f"values of task {key[0]} attempt {key[1]} chunk {key[2]}: lengths do not match {n} tokens")
        c.values, c.advantages, c.returns = list(v["values"]), list(v["advantages"]), list(v["returns"])
    for r in rewards:
        a = attempts.get((r["task_id"], r["attempt"]))
        if a is None:
            raise Refused(f"reward_files hold task {r['task_id']} attempt {r['attempt']}, which token_files lack")
        a.reward = float(r["reward"])
    out = []
    for key in sorted(attempts):
        a = attempts[key]
        if a.reward is None:
            raise Refused(f"task {key[0]} attempt {key[1]} has tokens but no reward row")
        a.chunks.sort(key=lambda c: c.chunk)
        for i, c in enumerate(a.chunks):
            if c.chunk != i:
                raise Refused(f"task {key[0]} attempt {key[1]}: chunk {i} missing")
        if need_values:
            for c in a.chunks:
                if c.advantages is None:
                    raise Refused(f"task {key[0]} attempt {key[1]} chunk {c.chunk} has no values (the critic has not run)")
        out.append(a)
    return Batch(manifest=m, attempts=out, actions=actions)


def load_sft_rows(store: Store, refs: list[dict]) -> list[Chunk]:
    rows = read_rows(store, refs, "tokens", TOKEN_COLUMNS)
    rows.sort(key=lambda t: (t["task_id"], t["attempt"], t["chunk"]))
    return [Chunk(t["task_id"], t["attempt"], t["chunk"], list(t["token_ids"]), list(t["loss_mask"]), list(t["logprobs"]),
                  float(t["temperature"] or 0.0)) for t in rows]
