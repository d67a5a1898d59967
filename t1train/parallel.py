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


def mixed_precision(dev: torch.device):
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if dev.type == "cuda":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy(param_dtype=None, reduce_dtype=torch.float32)


def shard(model, dev: torch.device) -> None:
    """FSDP2 over every process: each decoder layer, then the root (embeddings, final norm, head)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, fully_shard

    mesh = init_device_mesh(dev.type, (D.world(),))
    mp = mixed_precision(dev)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    for m in model.modules():
        if isinstance(m, FSDPModule):
            # A sum: each rank's loss is already its share of the global token-level mean.
            m.set_gradient_divide_factor(1.0)
            m.set_force_sum_reduction_for_comms(True)  # gloo has no pre-multiplied sum


def parallelize(model, sharded: bool, dev: torch.device) -> None:
    """Activation checkpointing (when set), then FSDP2 (when sharded), then records the device
    forwards put their inputs on."""
    if activation_checkpointing(dev):
        checkpoint_layers(model)
    if sharded:
        shard(model, dev)
    elif dev.type != "cpu":
        model.to(dev)
    model.t1_device = dev
