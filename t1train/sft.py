"""Supervised fine-tuning (Go: trainer/sft.go): the token rows in (task, attempt, chunk) order, those
of at least 2 tokens with a loss token kept; steps Adam steps, step k on the next `batch` rows of a
stream of passes (each pass in the order rand.New(rand.NewPCG(seed, pass)).Perm(n) draws, or sorted
with seed 0), the learning rate constant or on a cosine from adam.lr to 0; the loss the mean NLL of
the loss-region tokens, every sequence routed live at temperature 1. Across ranks (dist.py) each
step's sequences are split by tokens and their losses gathered and summed in the 1-rank order."""

from __future__ import annotations

import math

import numpy as np
import torch

from . import dist as D
from . import model as M
from .config import Job
from .data import Chunk
from .errors import Refused
from .gorand import PCG
from .optim import Adam


class PassOrder:
    def __init__(self, seed: int, n: int):
        self.seed, self.n, self.pass_, self.perm = seed, n, -1, None

    def at(self, j: int) -> int:
        if self.seed == 0:
            return j % self.n
        p = j // self.n
        if self.perm is None or p != self.pass_:
            self.pass_, self.perm = p, PCG(self.seed, p).perm(self.n)
        return self.perm[j % self.n]


def lr_at(job: Job, k: int) -> float:
    o = job.sft
    if o.schedule == "cosine":
        return o.adam.lr * 0.5 * (1 + math.cos(math.pi * k / job.steps))
    return o.adam.lr


def step(policy, opt: Adam, seqs: list[list[int]], masks: list[np.ndarray], max_norm: float) -> float:
    """One step over seqs: loss = -sum mask*logp / sum mask (trainer.SFTStep); the loss before it."""
    n = float(sum(float(m.sum()) for m in masks))
    if n == 0:
        raise Refused("sft: every mask is zero")

    def grad(i):
        s, m = seqs[i], masks[i]
        lp = M.action_logprobs(policy, s, 1.0)
        d = (-m / np.float32(n)).astype(np.float32)
        (lp * torch.from_numpy(d)).sum().backward()
        return float((m.astype(np.float64) * lp.detach().numpy().astype(np.float64)).sum()) / n

    def pad():
        (M.action_logprobs(policy, D.DUMMY, 1.0) * 0).sum().backward()

    parts = D.run_split([len(s) for s in seqs], grad, pad)
    loss = 0.0
    for i in range(len(seqs)):
        loss -= parts[i]
    norm = opt.update(max_norm)
    if not (math.isfinite(loss) and math.isfinite(norm)):
        raise Refused(f"trainer: divergent update: sft loss {loss}, gradient norm {norm}")
    return loss


def train(job: Job, policy, opt: Adam, rows: list[Chunk]) -> dict:
    if job.steps < 1:
        raise Refused(f"sft: {job.steps} steps")
    seqs, masks = [], []
    for r in rows:
        if len(r.loss) != len(r.ids):
            raise Refused(f"tokens of task {r.task_id} attempt {r.attempt} chunk {r.chunk}: {len(r.ids)} ids, {len(r.loss)} mask entries")
        if len(r.ids) < 2:
            continue
        mask = np.array(r.loss[1:], dtype=np.float32)  # entry t weighs target t+1
        if mask.any():
            seqs.append(r.ids)
            masks.append(mask)
    if not seqs:
        raise Refused(f"sft: {len(rows)} token rows, none with a loss token")
    met = {"steps": 0, "sequences": len(seqs), "first_loss": 0.0, "loss": 0.0}
    order = PassOrder(job.seed, len(seqs))
    size = job.sft.batch
    for k in range(job.steps):
        opt.cfg.lr = lr_at(job, k)
        if size <= 0 or size >= len(seqs):
            bs, bm = seqs, masks
        else:
            idx = [order.at(k * size + i) for i in range(size)]
            bs, bm = [seqs[j] for j in idx], [masks[j] for j in idx]
        met["loss"] = step(policy, opt, bs, bm, job.sft.max_grad_norm)
        if k == 0:
            met["first_loss"] = met["loss"]
        met["steps"] += 1
    return met
