"""The critic's iteration (Go: trainer/critic.go), top to bottom:

 1. the critic: the job's, or a fresh one (the policy's backbone with a zero score head, or seeded),
    warmed up on the batch for at most warmup_steps value steps while the rewards vary and the
    explained variance is below warmup_ev;
 2. its values at every action (action t's value is the score at position t-1), the GAE advantages
    and returns of every attempt (or, with the group baseline, each attempt's reward minus its
    task's mean reward at every action), the explained variance: these values are the result's;
 3. epochs Adam steps of the value loss clipped around those values, towards those returns.

A forward that measures the critic runs without gradients; its step runs each chunk again with them
(the same numbers: the forward is deterministic), so no batch-wide graph is held. Across ranks
(dist.py) both are split by tokens; values and per-chunk statistics are gathered to every rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from . import dist as D
from . import model as M
from . import rl
from .config import Job
from .data import Batch, Chunk
from .errors import Refused
from .optim import Adam

WARMUP_REACHED = "explained variance reached"
WARMUP_STEPS = "steps spent"
WARMUP_NO_VARIANCE = "rewards do not vary"


@dataclass
class State:
    c: Chunk
    loss: np.ndarray
    v_pre: np.ndarray  # action values of this pass, float32, 0 off the mask
    adv: np.ndarray | None = None
    ret: np.ndarray | None = None


def action_values(critic, c: Chunk, grad: bool = False):
    """Per-token action values ([T]; entry t is the score at t-1 where loss[t], else 0)."""
    loss = torch.tensor(c.loss, dtype=torch.bool)
    with torch.set_grad_enabled(grad):
        v = M.values(critic, c.ids)
    out = torch.cat([torch.zeros(1), v[:-1]])
    return torch.where(loss, out, torch.zeros(()))


def pad_forward(critic) -> None:
    with torch.no_grad():
        M.values(critic, D.DUMMY)


def pad_backward(critic) -> None:
    (M.values(critic, D.DUMMY) * 0).sum().backward()


def measure(critic, b: Batch, gae) -> tuple[list[State], float, bool]:
    """Every chunk's values, advantages and returns, the explained variance, whether rewards vary."""
    group = None
    if gae.baseline == "group":
        group = rl.group_baseline([a.reward for a in b.attempts], [a.task_id for a in b.attempts])
    states: list[State] = []
    mom = rl.Moments()
    vary = False
    todo = [c for c in b.chunks() if c.ids]
    got = D.run_split([len(c.ids) for c in todo], lambda i: action_values(critic, todo[i]).numpy().astype(np.float32),
                      lambda: pad_forward(critic))
    vals = {id(c): got[i] for i, c in enumerate(todo)}
    for ai, a in enumerate(b.attempts):
        if a.reward != b.attempts[0].reward:
            vary = True
        sts = []
        for c in a.chunks:
            loss = np.array(c.loss, dtype=bool)
            v = vals[id(c)] if c.ids else np.zeros(0, np.float32)
            sts.append(State(c, loss, v))
        adv, ret = rl.gae([(list(s.loss), list(s.v_pre)) for s in sts], a.reward, gae.gamma, gae.llambda)
        for i, s in enumerate(sts):
            s.adv, s.ret = np.array(adv[i], dtype=np.float32), np.array(ret[i], dtype=np.float32)
            if group is not None:
                s.adv[s.loss] = np.float32(group[ai])
            mom.add(s.loss, s.ret, s.v_pre)
        states.extend(sts)
    ev = mom.explained_variance()
    if math.isnan(ev):
        raise Refused("critic: explained variance is NaN")
    return states, ev, vary


def value_step(job: Job, critic, opt: Adam, b: Batch, cur: list[State], anchor: list[State]) -> float:
    """One Adam step of the clipped value loss over the chunks of at least 2 tokens."""
    o = job.critic_opts
    pairs = [(s, an) for s, an in zip(cur, anchor) if len(s.c.ids) >= 2]

    def grad(i):
        s, an = pairs[i]
        st = rl.ValueStats()
        v = action_values(critic, s.c, grad=True)
        g = rl.value_grad(st, s.loss, s.v_pre, an.v_pre, an.ret, o.value_clip, b.actions)
        (v * torch.from_numpy(g)).sum().backward()
        return st

    sts = D.run_split([len(s.c.ids) for s, _ in pairs], grad, lambda: pad_backward(critic))
    vs = rl.ValueStats()
    for i in range(len(pairs)):
        vs.tokens += sts[i].tokens
        vs.loss += sts[i].loss
    norm = opt.update(o.max_grad_norm)
    l = vs.mean_loss()
    if not (math.isfinite(l) and math.isfinite(norm)):
        raise Refused(f"trainer: divergent update: critic value loss {l}, gradient norm {norm}")
    return l


def train(job: Job, critic, opt: Adam, b: Batch, fresh: bool) -> tuple[list[dict], dict]:
    o = job.critic_opts
    if b.actions == 0:
        raise Refused(f"batch {b.manifest.get('run')} iteration {b.manifest.get('iteration')} has no loss tokens")
    met = {"steps": 0, "warmup": False, "warmup_steps": 0, "explained_variance": 0.0, "value_loss": 0.0}
    cur, ev, vary = measure(critic, b, job.gae)
    if fresh and o.warmup_steps > 0:
        met["warmup"] = True
        end = "" if vary else WARMUP_NO_VARIANCE
        step = 0
        while step < o.warmup_steps and vary:
            if ev >= o.warmup_ev:
                end = WARMUP_REACHED
                break
            value_step(job, critic, opt, b, cur, cur)
            met["warmup_steps"] += 1
            cur, ev, vary = measure(critic, b, job.gae)
            step += 1
        if end == "":
            end = WARMUP_REACHED if ev >= o.warmup_ev else WARMUP_STEPS
        met["warmup_end"] = end
    pre = cur
    met["explained_variance"] = ev
    values = [{"task_id": s.c.task_id, "attempt": s.c.attempt, "chunk": s.c.chunk, "values": [float(x) for x in s.v_pre],
               "advantages": [float(x) for x in s.adv], "returns": [float(x) for x in s.ret]} for s in pre]
    for e in range(o.epochs):
        if e > 0:
            cur, _, _ = measure(critic, b, job.gae)
        met["value_loss"] = value_step(job, critic, opt, b, cur, pre)
        met["steps"] += 1
    return values, met
