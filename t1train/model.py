"""The model: transformers' Qwen3-MoE, loaded strictly, with rollout routing replay.

Policy: Qwen3MoeForCausalLM. Critic: Qwen3MoeForTokenClassification with one label (the backbone
plus score.weight [1, D] and score.bias [1]). On the CPU everything runs in float32 with eager
attention and eager experts, one sequence per forward, as t1's Go reference does; on a GPU the
weights stay float32 (FSDP2's master copy, parallel.py) and the forward computes in bf16 with sdpa
attention (flash_attention_2 where the flash-attn package is installed) and grouped_mm experts, the
router's softmax in float32 as transformers computes it and the action log-softmax in float32.

Routing replay (R3): every MoE layer's router (Qwen3MoeTopKRouter) gets a replacement forward
(install_replay) that, while a replay record is set for the forward (replaying), uses the recorded
experts of the first T_r tokens and routes the rest live; the gate weights are the live router's
softmax probabilities at the experts used, renormalised over them iff config.norm_topk_prob, so the
router keeps its gradient. Each forward leaves the experts each layer chose live and used on the
router (.t1_live, .t1_used), [T, K] ascending, for the routing metrics.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import types

import numpy as np
import torch
import torch.nn.functional as F
from torch.distributed.tensor import DTensor
import transformers
from safetensors.torch import save_file
from transformers import Qwen3MoeForCausalLM, Qwen3MoeForTokenClassification

from .errors import Refused

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")
OPTIMIZER_FILE = "optimizer.safetensors"
# What save_pretrained writes itself; every other file of the starting checkpoint (the tokenizer's)
# is copied beside it.
NOT_COPIED = {"config.json", "generation_config.json", OPTIMIZER_FILE, *WEIGHT_FILES}


# -----------------------------------------------------------------------------
# routing replay


def _router_forward(self, hidden_states):
    hidden_states = hidden_states.reshape(-1, self.hidden_dim)
    logits = F.linear(hidden_states, self.weight)
    probs = F.softmax(logits, dtype=torch.float, dim=-1)
    live = torch.topk(probs, self.top_k, dim=-1).indices.sort(dim=-1).values
    used = live
    replay = self.t1_replay
    if replay is not None:
        n = replay.shape[0]
        if n > live.shape[0]:
            raise Refused(f"replayed routing covers {n} tokens of a {live.shape[0]}-token forward")
        used = torch.cat([replay, live[n:]], dim=0)
    gates = probs.gather(1, used)
    if self.norm_topk_prob:
        gates = gates / gates.sum(dim=-1, keepdim=True)
    self.t1_live, self.t1_used = live.detach(), used.detach()
    return logits, gates.to(logits.dtype), used


def routers(model) -> list:
    base = model.model
    return [layer.mlp.gate for layer in base.layers]


def install_replay(model) -> None:
    """Gives every MoE layer's router the replay-aware forward (idempotent)."""
    for r in routers(model):
        if not hasattr(r, "top_k"):
            raise Refused(f"layer router {type(r).__name__} is not a Qwen3-MoE top-k router (a dense layer?)")
        r.forward = types.MethodType(_router_forward, r)
        r.t1_replay, r.t1_live, r.t1_used = None, None, None


@contextlib.contextmanager
def replaying(model, record: np.ndarray | None):
    """Within it, forwards replay record ([T_r, L, K] expert ids; None: route live)."""
    rs = routers(model)
    if record is not None:
        if record.ndim != 3 or record.shape[1] != len(rs) or record.shape[2] != rs[0].top_k:
            raise Refused(f"routing record of shape {list(record.shape)} for a model of {len(rs)} layers, top-{rs[0].top_k}")
        E = rs[0].num_experts
        if record.size and (record.min() < 0 or record.max() >= E):
            raise Refused(f"routing record names an expert outside [0, {E})")
        s = np.sort(record, axis=-1)
        if record.shape[2] > 1 and not (np.diff(s, axis=-1) > 0).all():
            raise Refused("routing record selects an expert twice in one set")
        t = torch.from_numpy(np.ascontiguousarray(s)).long().to(device_of(model))
    for i, r in enumerate(rs):
        r.t1_replay = None if record is None else t[:, i, :]
    try:
        yield
    finally:
        for r in rs:
            r.t1_replay = None


def used_routing(model) -> np.ndarray:
    """The experts the last forward used, [T, L, K]."""
    return np.stack([r.t1_used.cpu().numpy() for r in routers(model)], axis=1)


def live_routing(model) -> np.ndarray:
    return np.stack([r.t1_live.cpu().numpy() for r in routers(model)], axis=1)


def compare_routing(a: np.ndarray, b: np.ndarray) -> tuple[int, int]:
    """(mismatching, total) (token, layer) sets over the tokens both cover (moe.CompareRouting)."""
    n = min(a.shape[0], b.shape[0])
    if a.shape[1:] != b.shape[1:]:
        L = max(a.shape[1], b.shape[1])
        return n * L, n * L
    x, y = np.sort(a[:n], axis=-1), np.sort(b[:n], axis=-1)
    return int((x != y).any(axis=-1).sum()), n * a.shape[1]


# -----------------------------------------------------------------------------
# forwards


def device_of(model) -> torch.device:
    """Where the model's forwards take their inputs (parallel.parallelize records it)."""
    return getattr(model, "t1_device", None) or torch.device("cpu")


def action_logprobs(model, ids: list[int], temperature: float, replay: np.ndarray | None = None) -> torch.Tensor:
    """log p(ids[t+1] | ids[:t+1]) for t < T-1 ([T-1], float32 on the CPU, differentiable), the
    logits divided by the sampling temperature (0 counting as 1), the log-softmax taken in float64
    as t1 does (float32 on a GPU, where a float64 [T, vocab] would not fit)."""
    dev = device_of(model)
    x = torch.tensor([ids], dtype=torch.long, device=dev)
    with replaying(model, replay):
        logits = model(input_ids=x, use_cache=False).logits[0, :-1]
    temp = temperature if temperature > 0 else 1.0
    lp = torch.log_softmax(logits.to(torch.float64 if dev.type == "cpu" else torch.float32) / temp, dim=-1)
    return lp.gather(1, x[0, 1:, None])[:, 0].float().cpu()


def values(model, ids: list[int]) -> torch.Tensor:
    """The critic's score at every position ([T], float32 on the CPU, differentiable); it routes live."""
    x = torch.tensor([ids], dtype=torch.long, device=device_of(model))
    return model(input_ids=x, use_cache=False).logits[0, :, 0].float().cpu()


# -----------------------------------------------------------------------------
# loading and saving


def _check_files(d: str) -> None:
    if not os.path.exists(os.path.join(d, "config.json")):
        raise Refused(f"checkpoint {d}: no config.json")
    if not any(os.path.exists(os.path.join(d, f)) for f in WEIGHT_FILES):
        raise Refused(f"checkpoint {d}: no model.safetensors")


def implementations() -> tuple[str, str]:
    """(attention, experts) implementations: eager on the CPU (the Go reference's arithmetic), the
    fastest transformers has on a GPU."""
    from .dist import device

    if device().type != "cuda":
        return "eager", "eager"
    from transformers.utils import is_flash_attn_2_available

    return ("flash_attention_2" if is_flash_attn_2_available() else "sdpa"), "grouped_mm"


def _config(cls, d: str):
    _check_files(d)
    cfg = transformers.AutoConfig.from_pretrained(d)
    if cfg.model_type != "qwen3_moe":
        raise Refused(f"checkpoint {d}: model_type {cfg.model_type!r}; this trainer trains qwen3_moe")
    if cls is Qwen3MoeForTokenClassification:
        cfg.num_labels = 1
    return cfg


def _load(cls, d: str, allow_missing=(), place=None) -> torch.nn.Module:
    """The checkpoint at d as a cls, strictly: every parameter from the checkpoint (but
    allow_missing, which are zero) and nothing of the checkpoint unused (but a policy's lm_head
    under a critic). With place (a function that shards a model: parallel.parallelize), the model
    is built on the meta device, placed, and each rank reads its own rows (shards.py)."""
    if place is not None:
        return _load_sharded(cls, d, allow_missing, place)
    cfg = _config(cls, d)
    attn, experts = implementations()
    model, info = cls.from_pretrained(d, config=cfg, dtype=torch.float32, attn_implementation=attn,
                                      experts_implementation=experts, output_loading_info=True)
    problems = []
    for k, v in info.items():
        v = [n for n in v if not (k == "missing_keys" and str(n) in allow_missing)]
        if k == "unexpected_keys" and allow_missing:  # a policy's head under a fresh critic
            v = [n for n in v if not str(n).startswith("lm_head.")]
        if v:
            problems.append(f"{k}: {sorted(map(str, v))}")
    if problems:
        raise Refused(f"checkpoint {d} does not load strictly: {'; '.join(problems)}")
    install_replay(model)
    model.eval()  # no dropout; gradients still flow
    return model


def _load_sharded(cls, d: str, allow_missing, place) -> torch.nn.Module:
    from . import shards

    cfg = _config(cls, d)
    cfg._attn_implementation, cfg._experts_implementation = implementations()
    with torch.device("meta"):
        model = cls(cfg).to(torch.float32)
    install_replay(model)
    model.eval()
    place(model)
    model.to_empty(device=device_of(model))
    head = model.get_output_embeddings()
    if cfg.tie_word_embeddings and head is not None and head.weight is not model.get_input_embeddings().weight:
        raise Refused(f"checkpoint {d}: the tied LM head came apart from the embeddings when sharded")
    reader = shards.Reader(d)
    used = set()
    for name, p in model.named_parameters():
        if name in allow_missing:
            with torch.no_grad():
                (p.to_local() if isinstance(p, DTensor) else p).zero_()
            continue
        used |= shards.fill(name, p, reader)
    unexpected = sorted(n for n in reader.names() - used if not (allow_missing and n.startswith("lm_head.")))
    if unexpected:
        raise Refused(f"checkpoint {d} does not load strictly: unexpected_keys: {unexpected}")
    with torch.no_grad():
        shards.reset_buffers(model, cfg)
    return model


def check_shape(model, dims: dict, critic: bool) -> None:
    """Refuses a checkpoint of another shape than the batch's model (checkpoint.PolicyFits /
    CriticFits)."""
    c = model.config
    if critic:
        if c.vocab_size < int(dims["vocab"]):
            raise Refused(f"critic vocabulary {c.vocab_size} does not cover the policy's {dims['vocab']}")
        return
    if (c.vocab_size < int(dims["vocab"]) or c.num_hidden_layers != int(dims["layers"])
            or c.num_experts_per_tok != int(dims["top_k"]) or c.num_experts != int(dims["experts"])):
        raise Refused(f"checkpoint: vocab {c.vocab_size}, {c.num_hidden_layers} layers, top-{c.num_experts_per_tok} of "
                      f"{c.num_experts} experts; the batch was sampled from vocab {dims['vocab']}, {dims['layers']} layers, "
                      f"top-{dims['top_k']} of {dims['experts']}")


def load_policy(d: str, place=None):
    return _load(Qwen3MoeForCausalLM, d, place=place)


def load_critic(d: str, place=None):
    return _load(Qwen3MoeForTokenClassification, d, place=place)


def critic_from_policy(d: str, place=None):
    """The policy's backbone with a zero score head (moe.Model.Critic)."""
    m = _load(Qwen3MoeForTokenClassification, d, allow_missing=("score.weight", "score.bias"), place=place)
    if place is None:
        with torch.no_grad():
            m.score.weight.zero_()
            m.score.bias.zero_()
    return m


def save(model, out: str, tokenizer_from: str | None, optimizer=None, shard_bytes: int | None = None) -> str:
    """Writes model (float32, the files and tensor names save_pretrained writes), the tokenizer
    files of tokenizer_from and, when given, the optimiser's state in t1's optimizer.safetensors
    layout; returns out, absolute. A sharded model is written by every rank, each its own rows
    (shards.write), never gathered: weight files of at most shard_bytes under
    model.safetensors.index.json, and one optimizer.safetensors."""
    out = os.path.abspath(out)
    from .dist import is_rank0

    if any(isinstance(p, DTensor) for p in model.parameters()):
        _save_sharded(model, out, optimizer, shard_bytes)
    elif is_rank0():
        os.makedirs(out, exist_ok=True)
        model.to(torch.float32).save_pretrained(out)
        if optimizer is not None:
            tensors, meta = optimizer.state_tensors()
            save_file(tensors, os.path.join(out, OPTIMIZER_FILE), metadata=meta)
    if not is_rank0():
        return out
    if tokenizer_from:
        for name in sorted(os.listdir(tokenizer_from)):
            src = os.path.join(tokenizer_from, name)
            if name in NOT_COPIED or name.startswith(".") or name.startswith("model-") or not os.path.isfile(src):
                continue
            shutil.copyfile(src, os.path.join(out, name))
    if not os.path.exists(os.path.join(out, "tokenizer.json")):
        raise Refused(f"no tokenizer.json to save with the checkpoint (from {tokenizer_from})")
    return out


def _save_sharded(model, out: str, optimizer, shard_bytes: int | None) -> None:
    import json

    from . import shards
    from .dist import is_rank0

    es = shards.entries(model.named_parameters())
    files = shards.layout(es, None, shard_bytes or int(os.environ.get("T1TRAIN_SHARD_BYTES") or 0) or shards.SHARD_BYTES)
    shards.write(out, es, files, {"format": "pt"})
    if optimizer is not None:
        meta = optimizer.meta()
        oes = [e for kind, state in (("m", optimizer.m), ("v", optimizer.v))
               for e in shards.entries(((n, state[n]) for n, _ in optimizer.params), key=lambda hub, kind=kind: f"{kind}.{hub}")]
        shards.write(out, oes, shards.layout(oes, OPTIMIZER_FILE), meta)
    if not is_rank0():
        return
    # What save_pretrained records of the model beside its weights.
    model.config.dtype = "float32"
    model.config.architectures = [type(model).__name__.removeprefix("FSDP")]
    model.config.save_pretrained(out)
    if model.can_generate():
        model.generation_config.save_pretrained(out)
    if len(files) > 1:
        index = {"metadata": {"total_parameters": sum(p.numel() for p in model.parameters()),
                              "total_size": sum(e.nbytes for e in es)},
                 "weight_map": {e.name: e.file for e in es}}
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")


def load_optimizer_state(d: str):
    """A reader of the checkpoint's optimizer.safetensors (shards.Reader), or None without one."""
    if not os.path.exists(os.path.join(d, OPTIMIZER_FILE)):
        return None
    from .shards import Reader

    return Reader(d, single=OPTIMIZER_FILE)


# -----------------------------------------------------------------------------
# checkpoint names: the fused experts as save_pretrained writes them, one matrix per expert


def hub_names(name: str, p: torch.Tensor) -> list[tuple[str, tuple]]:
    """The checkpoint tensors a parameter is stored as: (name, index into p) pairs."""
    if name.endswith("mlp.experts.gate_up_proj"):
        prefix, f = name[: -len("gate_up_proj")], p.shape[1] // 2
        out = []
        for e in range(p.shape[0]):
            out.append((f"{prefix}{e}.gate_proj.weight", (e, slice(0, f))))
            out.append((f"{prefix}{e}.up_proj.weight", (e, slice(f, 2 * f))))
        return out
    if name.endswith("mlp.experts.down_proj"):
        prefix = name[: -len("down_proj")]
        return [(f"{prefix}{e}.down_proj.weight", (e,)) for e in range(p.shape[0])]
    return [(name, ())]
