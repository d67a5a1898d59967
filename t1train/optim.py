"""Adam, gradient-norm clipping and the step, exactly as t1's moe/adam.go computes them.

    norm = sqrt(sum g^2) in float64; if max_norm > 0 and norm > max_norm: g *= float32(max_norm/norm)
    matrices (dim > 1) *= float32(1 - lr*weight_decay)                     (AdamW, when above 0)
    m = b1 m + (1-b1) g;  v = b2 v + ((1-b2) g) g                          (float64, stored float32)
    w -= float32(lr (m/bc1) / (sqrt(v/bc2) + eps))                         bias-corrected, eps outside

The state is saved as t1's optimizer.safetensors: m.<name> and v.<name> under the checkpoint's tensor
names (the experts one matrix each), metadata step, lr, beta1, beta2, eps.

Under FSDP2 the parameters, their gradients and the moments are DTensors sharded alike: the norm is
each rank's float64 sum of squares over its shards, summed across ranks; the rest is elementwise and
runs on the local shards. Loading reads each rank's rows of the state (shards.py), and saving writes
them (model.save): nothing is gathered.
"""

from __future__ import annotations

import math

import torch

from torch.distributed.tensor import DTensor

from . import dist as D
from .config import Adam as AdamConfig
from .errors import Refused
from .model import hub_names


def local(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's local shard (a view: in-place updates reach the parameter), else t."""
    return t.to_local() if isinstance(t, DTensor) else t



PIECE = 1 << 24  # elements: float64 temporaries of one piece stay within a few hundred MB


def pieces(t: torch.Tensor) -> list[torch.Tensor]:
    """Views of t along its first dimension of at most about PIECE elements each (the update is
    elementwise, so it is the same computed piece by piece; only the float64 temporaries shrink)."""
    if t.dim() == 0 or t.numel() <= PIECE:
        return [t]
    rows = max(1, PIECE // max(1, t[0].numel()))
    return list(t.split(rows, dim=0))


class Adam:
    def __init__(self, model: torch.nn.Module, cfg: AdamConfig):
        self.cfg = cfg
        self.params = [(n, p) for n, p in model.named_parameters()]
        self.m = {n: torch.zeros_like(p, dtype=torch.float32) for n, p in self.params}
        self.v = {n: torch.zeros_like(p, dtype=torch.float32) for n, p in self.params}
        self.step = 0

    # -- state -----------------------------------------------------------------

    def load_state(self, reader) -> None:
        """Restores the moments and step count t1 (or this trainer) saved (reader: a shards.Reader
        of optimizer.safetensors), each rank reading only the rows of its shards."""
        from .shards import fill

        meta = reader.metadata()
        try:
            self.step = int(meta.get("step", "0"))
        except ValueError:
            raise Refused(f"optimizer.safetensors: step {meta.get('step')!r}") from None
        used = set()
        for n, _ in self.params:
            for kind, t in (("m", self.m[n]), ("v", self.v[n])):
                used |= fill(n, t, reader, key=lambda hub, kind=kind: f"{kind}.{hub}")
        extra = sorted(reader.names() - used)
        if extra:
            raise Refused(f"optimizer.safetensors: tensors of no parameter: {extra[:5]}")

    def state_tensors(self) -> tuple[dict, dict]:
        """The moments under the checkpoint's names, and the metadata, of an unsharded model (a
        sharded one is written rank by rank: model.save)."""
        out = {}
        for n, p in self.params:
            for hub, idx in hub_names(n, p):
                out[f"m.{hub}"] = self.m[n][idx].contiguous().clone()
                out[f"v.{hub}"] = self.v[n][idx].contiguous().clone()
        return out, self.meta()

    def meta(self) -> dict:
        c = self.cfg
        return {"step": str(self.step), "lr": repr(float(c.lr)), "beta1": repr(float(c.beta1)),
                "beta2": repr(float(c.beta2)), "eps": repr(float(c.eps))}

    def mark(self):
        """A function that puts the moments and step count back as they are now."""
        m = {n: local(t).clone() for n, t in self.m.items()}
        v = {n: local(t).clone() for n, t in self.v.items()}
        step = self.step

        def restore():
            for n in m:
                local(self.m[n]).copy_(m[n])
                local(self.v[n]).copy_(v[n])
            self.step = step

        return restore

    # -- the step ----------------------------------------------------------------

    def grads(self):
        """(name, parameter, gradient): the local shards under FSDP2."""
        for n, p in self.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            yield n, local(p), local(p.grad)

    def grad_norm(self) -> float:
        s = 0.0
        for _, _, g in self.grads():
            s += sum(float(x.double().square().sum()) for x in pieces(g))
        dev = self.params[0][1].device if self.params else torch.device("cpu")
        return math.sqrt(D.all_sum_f64(s, dev))

    def clip(self, max_norm: float) -> float:
        n = self.grad_norm()
        if max_norm > 0 and n > max_norm:
            scale = torch.tensor(max_norm / n, dtype=torch.float64).float()
            for _, _, g in self.grads():
                g.mul_(scale.to(g.device))
        return n

    @torch.no_grad()
    def apply(self) -> None:
        self.step += 1
        c = self.cfg
        bc1 = 1 - c.beta1 ** self.step
        bc2 = 1 - c.beta2 ** self.step
        shrink = torch.tensor(1 - c.lr * c.weight_decay, dtype=torch.float64).float()
        dims = {n: p.dim() for n, p in self.params}
        for n, p, g in self.grads():
            if c.weight_decay > 0 and dims[n] > 1:
                p.mul_(shrink.to(p.device))
            for pp, gg, mt, vt in zip(pieces(p), pieces(g), pieces(local(self.m[n])), pieces(local(self.v[n]))):
                g64 = gg.double()
                m = c.beta1 * mt.double() + (1 - c.beta1) * g64
                v = c.beta2 * vt.double() + ((1 - c.beta2) * g64) * g64
                mt.copy_(m.float())
                vt.copy_(v.float())
                pp.sub_((c.lr * (m / bc1) / ((v / bc2).sqrt() + c.eps)).float())

    def update(self, max_norm: float) -> float:
        """Clips, steps and clears the gradients; returns the norm before clipping."""
        n = self.clip(max_norm)
        if not math.isfinite(n):
            return n  # the caller refuses the update before any weight moves
        self.apply()
        self.zero_grad()
        return n

    def zero_grad(self) -> None:
        for _, p in self.params:
            p.grad = None
