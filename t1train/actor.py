"""The PPO actor update (Go: trainer/actor.go, Reference.update), top to bottom:

 1. every chunk of at least 2 tokens, with its advantages and, with replay on, the sampler's routing
    of its first T-1 tokens (the last token routes live; no log-prob depends on it);
 2. when some action's advantage is not 0: attempts weighed (weigh_attempts), then advantages
    standardised (normalize_advantages);
 3. the pre-update pass: the ratio's denominator (old log-probs, with the same routing as every later
    forward), the gap to the sampler's log-probs, routing mismatches against the recorded experts;
    with importance_cap, each action's behaviour weight min(exp(old - sampled), cap) (the sampler's
    policy as the behaviour one, the decoupled objective of a batch sampled by an older policy);
 4. no signal: no step, the policy saved as it was ("skipped");
 5. epochs x minibatches Adam steps, each epoch's chunk order rand.New(rand.NewPCG(version,
    0x70706f)).Perm(n) as Go draws it, the clipped token-level surrogate over the minibatch's actions,
    each term times its behaviour weight when there are weights;
 6. live_kl and experts_switched: the policy before and after, each routing on its own;
 7. max_live_kl: the step halved until live_kl is within it (at most 5 times, else not taken).

Across ranks (dist.py) every pass is split by tokens: the forward-only passes' log-probs and routing
are gathered to every rank, each minibatch's chunks are shared out, every rank's gradient is its
chunks' share of the global token-level mean, and the per-chunk statistics are gathered and summed
in the 1-rank order.
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
from .gorand import PCG
from .optim import Adam, local

MAX_BACKTRACKS = 5


@dataclass
class Prepared:
    c: Chunk
    ids: list[int]
    loss: np.ndarray
    adv: list[float]
    sampled: np.ndarray
    replay: np.ndarray | None
    old_lp: np.ndarray | None = None
    weight: np.ndarray | None = None  # behaviour importance weights (importance_cap), or None
    live_lp: np.ndarray | None = None
    live_routing: np.ndarray | None = None


def _where(c: Chunk) -> str:
    return f"task {c.task_id} attempt {c.attempt} chunk {c.chunk}"




def forward(policy, p: Prepared, replay: bool = True):
    """The action log-probs of p ([T] float32 tensor, differentiable; 0 outside the mask)."""
    lp = M.action_logprobs(policy, p.ids, p.c.temperature, p.replay if replay else None)
    return torch.cat([torch.zeros(1), lp]) * torch.from_numpy(p.loss.astype(np.float32))


def live(policy, p: Prepared):
    with torch.no_grad():
        lp = forward(policy, p, replay=False).numpy()
    return lp, M.used_routing(policy)


def pad_forward(policy) -> None:
    """A forward that only keeps the ranks' collectives in step."""
    with torch.no_grad():
        M.action_logprobs(policy, D.DUMMY, 1.0)


def pad_backward(policy) -> None:
    (M.action_logprobs(policy, D.DUMMY, 1.0) * 0).sum().backward()


def each(policy, chunks: list[Prepared], fn) -> dict:
    """fn(chunk) for every chunk, forward-only, split across ranks; every result on every rank."""
    return D.run_split([len(p.ids) for p in chunks], lambda i: fn(chunks[i]), lambda: pad_forward(policy))


def live_change(policy, chunks: list[Prepared]) -> tuple[float, float]:
    st = rl.PolicyStats()
    mis, sets = 0, 0
    res = each(policy, chunks, lambda p: live(policy, p))
    for i, p in enumerate(chunks):
        lp, routing = res[i]
        st.add_kl(p.loss, p.live_lp, lp)
        T = len(p.ids)
        a, b = M.compare_routing(p.live_routing[: T - 1], routing[: T - 1])
        mis, sets = mis + a, sets + b
    return st.approx_kl(), (mis / sets if sets else 0.0)


def train(job: Job, policy, opt: Adam, b: Batch) -> dict:
    o = job.actor
    met = {"steps": 0, "actions": b.actions, "policy_loss": 0.0, "clip_fraction": 0.0, "approx_kl": 0.0, "grad_norm": 0.0,
           "logprob_gap": 0.0, "logprob_gap_max": 0.0, "routing_mismatches": 0, "routing_sets": 0, "mismatch_rate": 0.0,
           "live_kl": 0.0, "experts_switched": 0.0, "loss_drift": 0, "replay": bool(o.replay)}
    if b.actions == 0:
        raise Refused("the batch has no loss tokens")
    chunks: list[Prepared] = []
    for c in b.chunks():
        if c.advantages is None:
            raise Refused(f"{_where(c)} has no values (the critic has not run)")
        if len(c.ids) < 2:
            continue
        if len(c.advantages) != len(c.loss):
            raise Refused(f"{_where(c)}: {len(c.advantages)} advantages for {len(c.loss)} tokens")
        replay = None
        if o.replay:
            if c.routing is None or c.routing.shape[0] < len(c.ids) - 1:
                raise Refused(f"{_where(c)}: routing of {0 if c.routing is None else c.routing.shape[0]} tokens does not cover "
                              f"its {len(c.ids) - 1} routed tokens")
            replay = c.routing[: len(c.ids) - 1]
        chunks.append(Prepared(c, c.ids, np.array(c.loss, dtype=bool), [float(x) for x in c.advantages],
                               np.array(c.sampled, dtype=np.float32), replay))
    signal = any(l and a != 0 for p in chunks for l, a in zip(p.loss, p.adv))
    if signal:
        loss, adv = [list(p.loss) for p in chunks], [p.adv for p in chunks]
        if o.weigh_attempts:
            ids: dict[tuple, int] = {}
            attempt = [ids.setdefault((p.c.task_id, p.c.attempt), len(ids)) for p in chunks]
            rl.weigh_attempts(attempt, loss, adv)
        if o.normalize_advantages:
            rl.whiten(loss, adv)
    for p in chunks:
        p.adv = np.array(p.adv, dtype=np.float32)

    # The ratio's denominator: the policy before any step, with the routing every later forward uses.
    gap, mis, sets = rl.GapStats(), 0, 0

    def old(p):
        with torch.no_grad():
            return forward(policy, p).numpy(), M.used_routing(policy)

    res = each(policy, chunks, old)
    for i, p in enumerate(chunks):
        p.old_lp, used = res[i]
        gap.add(p.loss, p.old_lp, p.sampled)
        p.live_lp, p.live_routing = p.old_lp, used  # live unless replayed (below)
        T = len(p.ids)
        a, s = M.compare_routing(p.c.routing[: T - 1], used[: T - 1])
        mis, sets = mis + a, sets + s
        met["loss_drift"] += int(sum(1 for t, l in enumerate(p.c.loss) if l and p.ids[t] != p.c.ids[t]))
    met["logprob_gap"], met["logprob_gap_max"] = gap.mean(), gap.max
    met["routing_mismatches"], met["routing_sets"], met["mismatch_rate"] = mis, sets, (mis / sets if sets else 0.0)
    # The stage sets staleness from the manifest whatever a trainer says; reported as the reference
    # reports it, so that the two results compare field by field.
    if int(b.manifest.get("staleness") or 0):
        met["staleness"] = int(b.manifest["staleness"])
    # Measured before the skip, as the gap is: how far the sampler's policy is from this one is worth
    # knowing even when there is nothing to learn.
    if o.importance_cap > 0:
        bs = rl.BehaviourStats()
        for p in chunks:
            p.weight = rl.behaviour_weights(bs, p.loss, p.old_lp, p.sampled, o.importance_cap)
        # Go's omitzero: a zero field is left out, which t1's strict parser reads as 0.
        for k, v in (("behaviour_kl", bs.kl_mean()), ("truncated", bs.truncated_fraction())):
            if v:
                met[k] = v
    if not signal:
        met["skipped"] = "every advantage is 0"
        return met
    replayed = [p for p in chunks if p.replay is not None]
    res = each(policy, replayed, lambda p: live(policy, p))
    for i, p in enumerate(replayed):
        p.live_lp, p.live_routing = res[i]
    before = restore_opt = None
    if o.max_live_kl > 0:
        before = [local(t).detach().clone() for _, t in opt.params]
        restore_opt = opt.mark()

    rng = PCG(job.version, 0x70706F)  # "ppo"
    total = rl.PolicyStats()
    loss_sum = norm_sum = 0.0
    for epoch in range(o.epochs):
        order = rng.perm(len(chunks))
        for mb in rl.minibatches(order, o.minibatches):
            n = int(sum(chunks[i].loss.sum() for i in mb))
            if n == 0:
                continue

            def grad(j):
                p = chunks[mb[j]]
                st = rl.PolicyStats()
                lp = forward(policy, p)
                g = rl.policy_grad(st, p.loss, lp.detach().numpy(), p.old_lp, p.adv, o.clip, n, p.weight)
                (lp * torch.from_numpy(g)).sum().backward()
                return st

            sts = D.run_split([len(chunks[i].ids) for i in mb], grad, lambda: pad_backward(policy))
            step = rl.PolicyStats()
            for j in range(len(mb)):
                step.add(sts[j])
            norm = opt.update(o.max_grad_norm)
            l = step.mean_loss()
            if not (math.isfinite(l) and math.isfinite(norm)):
                raise Refused(f"trainer: divergent update: epoch {epoch} step {met['steps']}: loss {l}, gradient norm {norm}")
            loss_sum += l
            norm_sum += norm
            total.add(step)
            met["steps"] += 1
    if met["steps"] == 0:
        raise Refused("no minibatch has a loss token")
    met["live_kl"], met["experts_switched"] = live_change(policy, chunks)
    if o.max_live_kl > 0 and met["live_kl"] > o.max_live_kl:
        backtrack(policy, opt, before, restore_opt, chunks, o.max_live_kl, met)
    met["policy_loss"] = loss_sum / met["steps"]
    met["grad_norm"] = norm_sum / met["steps"]
    met["clip_fraction"] = total.clip_fraction()
    met["approx_kl"] = total.approx_kl()
    return met


@torch.no_grad()
def backtrack(policy, opt: Adam, before, restore_opt, chunks, bound: float, met: dict) -> None:
    after = [local(t).detach().clone() for _, t in opt.params]
    scale = torch.tensor(1.0, dtype=torch.float32)
    met["backtracks"] = 0
    while met["backtracks"] < MAX_BACKTRACKS:
        scale = scale / 2
        met["backtracks"] += 1
        for (_, t), b0, a in zip(opt.params, before, after):
            local(t).copy_(b0 + scale.to(b0.device) * (a - b0))
        met["live_kl"], met["experts_switched"] = live_change(policy, chunks)
        if met["live_kl"] <= bound:
            return
    for (_, t), b0 in zip(opt.params, before):
        local(t).copy_(b0)
    restore_opt()
    met["skipped"] = (f"the step scaled to 1/{1 << MAX_BACKTRACKS} still moved the policy as sampled by KL "
                      f"{met['live_kl']:.3g}, above training.max_live_kl {bound:g}")
    met["live_kl"], met["experts_switched"] = 0.0, 0.0
