"""Loading a checkpoint into a sharded model, each rank reading only its own rows.

transformers' from_pretrained materialises the whole model in every process: under torchrun with
eight ranks a node would hold eight float32 copies of the model (and of Adam's two moments) in host
memory before FSDP2 throws seven eighths of each away, 960 GB for Qwen3-30B-A3B's weights alone. A
sharded job instead builds the model on the meta device, shards it (parallel.py), allocates only
each rank's shard (to_empty), and fills it from the safetensors files, reading the rows of dim 0
that the rank holds (safetensors' get_slice reads just those bytes):

    checkpoint tensor (hub name)                    parameter (transformers 5)      rank r holds
    model.layers.i.mlp.experts.e.gate_proj.weight   ...mlp.experts.gate_up_proj     experts [a, b)
    model.layers.i.mlp.experts.e.up_proj.weight       [E, 2F, D]: e, :F | F:          of dim 0
    model.layers.i.mlp.experts.e.down_proj.weight   ...mlp.experts.down_proj [E, D, F]
    anything else                                   the same name                   rows [a, b)

FSDP2 shards dim 0 as torch.chunk does: ceil(N / world) rows per rank, the last ranks fewer or
none. Buffers that are not in a checkpoint (RoPE's inverse frequencies) are computed again after
to_empty, on the CPU as transformers computes them.
"""

from __future__ import annotations

import json
import os

import torch
from safetensors import safe_open
from torch.distributed.tensor import DTensor, Shard

from .errors import Refused


class Reader:
    """The tensors of one checkpoint file set: model.safetensors, or the shards an index names, or
    one other file (optimizer.safetensors)."""

    def __init__(self, d: str, single: str | None = None):
        self.dir = d
        index = os.path.join(d, "model.safetensors.index.json")
        if single is None and os.path.exists(index):
            with open(index) as f:
                weight_map = json.load(f).get("weight_map") or {}
            files = sorted(set(weight_map.values()))
        else:
            files = [single or "model.safetensors"]
        self._files = {}
        self._where: dict[str, str] = {}
        self._meta: dict[str, str] = {}
        for name in files:
            if os.path.basename(name) != name:
                raise Refused(f"checkpoint {d}: shard name {name!r} is not a file of the directory")
            path = os.path.join(d, name)
            if not os.path.exists(path):
                raise Refused(f"checkpoint {d}: {name} missing")
            f = safe_open(path, framework="pt")
            self._files[name] = f
            self._meta.update(f.metadata() or {})
            for k in f.keys():
                if k in self._where:
                    raise Refused(f"checkpoint {d}: tensor {k} in both {self._where[k]} and {name}")
                self._where[k] = name

    def names(self) -> set[str]:
        return set(self._where)

    def metadata(self) -> dict[str, str]:
        return self._meta

    def shape(self, name: str) -> list[int]:
        return list(self._slice(name).get_shape())

    def rows(self, name: str, start: int | None = None, stop: int | None = None) -> torch.Tensor:
        """Rows [start, stop) of dim 0 (all of them by default), as float32."""
        s = self._slice(name)
        t = s[start:stop] if start is not None else s[:]
        return t.float()

    def _slice(self, name: str):
        f = self._where.get(name)
        if f is None:
            raise Refused(f"checkpoint {self.dir}: tensor {name} missing")
        return self._files[f].get_slice(name)


def local_range(p: torch.Tensor) -> tuple[int, int]:
    """The rows of dim 0 this rank holds of p: all of them unless p is FSDP2-sharded on dim 0."""
    if not isinstance(p, DTensor):
        return 0, p.shape[0] if p.dim() else 0
    if len(p.placements) != 1 or p.placements[0] != Shard(0):
        raise Refused(f"a parameter placed {p.placements}; the loader reads FSDP2's Shard(0) only")
    n, world, r = p.shape[0], p.device_mesh.size(), p.device_mesh.get_local_rank()
    per = -(-n // world)
    a, b = min(r * per, n), min((r + 1) * per, n)
    if p.to_local().shape[0] != b - a:
        raise Refused(f"a shard of {p.to_local().shape[0]} rows where rows [{a}, {b}) were expected")
    return a, b


def fill(name: str, p: torch.Tensor, reader: Reader, key=lambda hub: hub) -> set[str]:
    """Copies p's rows this rank holds from reader (tensor key(hub) for each checkpoint tensor p
    is stored as, model.hub_names); returns the keys read. Shapes are checked against p's."""
    from .model import hub_names

    a, b = local_range(p)
    dst = p.to_local() if isinstance(p, DTensor) else p
    used = set()
    with torch.no_grad():
        for hub, idx in hub_names(name, p):
            k = key(hub)
            used.add(k)
            # The shape of p[idx], computed on the meta device: indexing a DTensor itself would
            # gather the whole parameter to every rank.
            want = list(torch.empty(p.shape, device="meta")[idx].shape) if idx else list(p.shape)
            if reader.shape(k) != want:
                raise Refused(f"checkpoint {reader.dir}: tensor {k} of shape {reader.shape(k)}, want {want}")
            if not idx:  # stored as it is: this rank's rows of it
                if b > a:
                    dst.copy_(reader.rows(k, a, b).to(dst.device))
                continue
            e = idx[0]  # one expert's matrix: only the rank holding expert e reads it
            if a <= e < b:
                dst[(e - a,) + tuple(idx[1:])].copy_(reader.rows(k).to(dst.device))
    return used


def reset_buffers(model, config) -> None:
    """Recomputes the non-persistent buffers to_empty left uninitialised (RoPE's inverse
    frequencies), as a freshly built model on the CPU has them."""
    rope = model.model.rotary_emb
    fresh = type(rope)(config=config)
    for n, buf in fresh.named_buffers():
        target = rope.get_buffer(n)
        target.copy_(buf.to(target.device, target.dtype))
