"""Parallelism applied from outside the plain transformers model, as torchtitan does it:

 * activation checkpointing per decoder layer (checkpoint_layers): each layer's forward runs under
   torch.utils.checkpoint (non-reentrant); its recomputation in the backward replays the same
   recorded experts as its forward did (the router's replay record is captured when the layer runs
   and put back for the recomputation), so replay and checkpointing compose;
 * FSDP2 (shard): fully_shard on every decoder layer, then on the root, over a 1-D mesh of every
   process; on a GPU with MixedPrecisionPolicy(bf16 parameters for compute, float32 gradient
   reduction) over float32 master weights, on the CPU float32 throughout. Gradients are summed
   across ranks, not averaged: every rank's loss already divides by the global token count.
"""

from __future__ import annotations

import contextlib
import functools
import os

import torch
from torch.utils.checkpoint import checkpoint

from . import dist as D


def activation_checkpointing(dev: torch.device) -> bool:
    """T1TRAIN_ACTIVATION_CHECKPOINTING: on, off, or auto (default: on on a GPU, off on the CPU)."""
    v = os.environ.get("T1TRAIN_ACTIVATION_CHECKPOINTING", "auto").lower()
    if v in ("1", "on", "true", "yes"):
        return True
    if v in ("0", "off", "false", "no"):
        return False
    return dev.type == "cuda"


@contextlib.contextmanager
def _restored(router, record):
    saved = router.t1_replay
    router.t1_replay = record
    try:
        yield
    finally:
        router.t1_replay = saved


def _replay_context(router):
    """checkpoint's context_fn: nothing in the forward; the recomputation sees the replay record
    the forward saw."""
    if router is None:
        return contextlib.nullcontext(), contextlib.nullcontext()
    return contextlib.nullcontext(), _restored(router, router.t1_replay)


def _checkpointed(inner, router, *args, **kwargs):
    if not torch.is_grad_enabled():
        return inner(*args, **kwargs)
    return checkpoint(inner, *args, use_reentrant=False, context_fn=functools.partial(_replay_context, router), **kwargs)


def checkpoint_layers(model) -> None:
    """Activation checkpointing on every decoder layer (parameter names unchanged)."""
    for layer in model.model.layers:
        if getattr(layer, "t1_checkpointed", False):
            continue
        router = getattr(layer.mlp, "gate", None)
        layer.forward = functools.partial(_checkpointed, layer.forward, router)
        layer.t1_checkpointed = True


def compute_dtype(dev: torch.device) -> torch.dtype:
    """bf16 on a GPU, float32 on the CPU (where the trainer is the Go reference's peer)."""
    return torch.bfloat16 if dev.type == "cuda" else torch.float32


def shard(model, dev: torch.device, dtype: torch.dtype | None = None) -> None:
    """FSDP2 over every process: each decoder layer, then the root (embeddings, final norm, head)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, fully_shard

    from torch.distributed.fsdp import MixedPrecisionPolicy

    mesh = init_device_mesh(dev.type, (D.world(),))
    dtype = dtype or compute_dtype(dev)
    mp = MixedPrecisionPolicy(param_dtype=None if dtype == torch.float32 else dtype, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    for m in model.modules():
        if isinstance(m, FSDPModule):
            # A sum: each rank's loss is already its share of the global token-level mean.
            m.set_gradient_divide_factor(1.0)
            m.set_force_sum_reduction_for_comms(True)  # gloo has no pre-multiplied sum


def parallelize(model, sharded: bool, dev: torch.device, ac: bool | None = None, dtype: torch.dtype | None = None) -> None:
    """Activation checkpointing (ac; by default its setting), then FSDP2 (when sharded; computing in
    dtype, by default compute_dtype), then records the device forwards put their inputs on."""
    if activation_checkpointing(dev) if ac is None else ac:
        checkpoint_layers(model)
    if sharded:
        shard(model, dev, dtype)
    elif dev.type != "cpu":
        model.to(dev)
    model.t1_device = dev
