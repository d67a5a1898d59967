"""The job file (trainer.JobFile in Go) as dataclasses. Field names are the JSON's; unknown
hyperparameters are refused so that a setting t1 adds is never silently ignored."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from .errors import Refused


@dataclass
class Adam:
    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.0  # AdamW's, on matrices only


@dataclass
class ModelShape:
    """moe.Config: the shape of a fresh, seeded critic (t1 makes it; the job only carries it)."""

    vocab: int = 0
    layers: int = 0
    d_model: int = 0
    heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    experts: int = 0
    top_k: int = 0
    d_ff: int = 0
    context: int = 0
    seed: int = 0
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    norm_topk_prob: bool = True
    tie_embeddings: bool = False


@dataclass
class Actor:
    epochs: int = 1
    minibatches: int = 1
    clip: float = 0.2
    normalize_advantages: bool = False
    weigh_attempts: bool = False
    adam: Adam = field(default_factory=Adam)
    max_grad_norm: float = 0.0
    replay: bool = False
    max_live_kl: float = 0.0
    importance_cap: float = 0.0  # above 0: the decoupled objective of a stale batch (actor.py)


@dataclass
class Critic:
    model: ModelShape = field(default_factory=ModelShape)
    adam: Adam = field(default_factory=Adam)
    value_clip: float = 0.0
    epochs: int = 1
    max_grad_norm: float = 0.0
    warmup_steps: int = 0
    warmup_ev: float = 0.0


@dataclass
class SFT:
    adam: Adam = field(default_factory=Adam)
    schedule: str = "constant"
    max_grad_norm: float = 0.0
    batch: int = 0


@dataclass
class GAE:
    gamma: float = 1.0
    llambda: float = 1.0  # "lambda" in JSON
    baseline: str = "critic"


@dataclass
class Job:
    kind: str
    run: str
    checkpoint: str
    version: int
    policy: str = ""
    critic: str = ""
    fresh: bool = False  # critic is a fresh, seeded one t1 wrote for this job: warm it up
    manifest: dict | None = None
    gae: GAE | None = None
    data: list[dict] = field(default_factory=list)
    steps: int = 0
    seed: int = 0
    actor: Actor | None = None
    critic_opts: Critic | None = None
    sft: SFT | None = None


def _build(cls, obj: Any, where: str):
    if not isinstance(obj, dict):
        raise Refused(f"job file: {where} is not an object")
    names = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for k, v in obj.items():
        name = "llambda" if k == "lambda" else k
        f = names.get(name)
        if f is None:
            raise Refused(f"job file: unknown field {where}.{k}")
        sub = {"adam": Adam, "model": ModelShape}.get(name)
        kwargs[name] = _build(sub, v, f"{where}.{k}") if sub else v
    return cls(**kwargs)


def parse_job(text: str) -> Job:
    try:
        j = json.loads(text)
    except json.JSONDecodeError as e:
        raise Refused(f"job file: {e}") from None
    known = {"kind", "run", "policy", "critic", "checkpoint", "version", "manifest", "gae", "data", "steps", "seed",
             "fresh", "hyperparameters"}
    extra = set(j) - known
    if extra:
        raise Refused(f"job file: unknown fields {sorted(extra)}")
    kind = j.get("kind")
    if kind not in ("actor", "critic", "sft"):
        raise Refused(f"job file: kind {kind!r}, want actor, critic or sft")
    hp = j.get("hyperparameters") or {}
    if hp.get("temperature") != "per_token":
        raise Refused(f"job file: temperature {hp.get('temperature')!r}, want \"per_token\"")
    extra = set(hp) - {"actor", "critic", "sft", "temperature"}
    if extra:
        raise Refused(f"job file: unknown hyperparameters {sorted(extra)}")
    job = Job(kind=kind, run=j.get("run", ""), checkpoint=j.get("checkpoint", ""), version=int(j.get("version", 0)),
              policy=j.get("policy", "") or "", critic=j.get("critic", "") or "", manifest=j.get("manifest"),
              data=j.get("data") or [], steps=int(j.get("steps", 0)), seed=int(j.get("seed", 0)),
              fresh=bool(j.get("fresh", False)))
    if j.get("gae") is not None:
        job.gae = _build(GAE, j["gae"], "gae")
    if kind == "actor":
        job.actor = _build(Actor, hp.get("actor") or {}, "hyperparameters.actor")
    elif kind == "critic":
        job.critic_opts = _build(Critic, hp.get("critic") or {}, "hyperparameters.critic")
        if job.gae is None:
            raise Refused("job file: a critic job without gae")
    else:
        job.sft = _build(SFT, hp.get("sft") or {}, "hyperparameters.sft")
    if kind in ("actor", "critic") and not job.manifest:
        raise Refused(f"job file: an {kind} job without a manifest")
    return job
