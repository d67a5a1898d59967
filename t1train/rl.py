"""t1's RL arithmetic (Go package rl), per token, over plain lists: entry t of a chunk's slices is
token t; the loss mask marks the actions. float32 where t1 stores float32, float64 where it sums."""

from __future__ import annotations

import math

import numpy as np

from .errors import Refused

f32 = np.float32


def gae(chunks: list[tuple[list[bool], list[float]]], reward: float, gamma: float, lam: float):
    """Advantages and returns of one attempt's chunks (loss, values), the reward at its last action."""
    if not (0 <= gamma <= 1 and 0 <= lam <= 1):
        raise Refused(f"gae: gamma {gamma} and lambda {lam} must lie in [0, 1]")
    if not math.isfinite(reward):
        raise Refused(f"gae: reward {reward}")
    steps = [(c, t) for c, (loss, _) in enumerate(chunks) for t, l in enumerate(loss) if l]
    adv = [[0.0] * len(loss) for loss, _ in chunks]
    ret = [[0.0] * len(loss) for loss, _ in chunks]
    nxt, a = 0.0, 0.0
    for i in range(len(steps) - 1, -1, -1):
        c, t = steps[i]
        v = float(f32(chunks[c][1][t]))
        r = reward if i == len(steps) - 1 else 0.0
        delta = r + gamma * nxt - v
        a = delta + gamma * lam * a
        adv[c][t] = float(f32(a))
        ret[c][t] = float(f32(a + v))
        nxt = v
    return adv, ret


def group_baseline(rewards: list[float], groups: list[str]) -> list[float]:
    s: dict[str, float] = {}
    n: dict[str, int] = {}
    for r, g in zip(rewards, groups):
        if not math.isfinite(r):
            raise Refused(f"group baseline: reward {r}")
        s[g] = s.get(g, 0.0) + r
        n[g] = n.get(g, 0) + 1
    return [r - s[g] / n[g] for r, g in zip(rewards, groups)]


def weigh_attempts(attempt: list[int], loss: list[list[bool]], adv: list[list[float]]) -> None:
    actions: dict[int, int] = {}
    total = 0
    for i, lm in enumerate(loss):
        for l in lm:
            if l:
                actions[attempt[i]] = actions.get(attempt[i], 0) + 1
                total += 1
    if total == 0:
        return
    k = float(len(actions))
    for i, lm in enumerate(loss):
        n = actions.get(attempt[i], 0)
        if n == 0:
            continue
        w = f32(total / (k * n))
        for t, l in enumerate(lm):
            if l:
                adv[i][t] = float(f32(adv[i][t]) * w)


def whiten(loss: list[list[bool]], adv: list[list[float]]) -> bool:
    n, s, sq = 0, 0.0, 0.0
    for lm, a in zip(loss, adv):
        for t, l in enumerate(lm):
            if l:
                x = float(a[t])
                n, s, sq = n + 1, s + x, sq + x * x
    if n < 2:
        return False
    mean = s / n
    std = math.sqrt(max(sq / n - mean * mean, 0.0))
    if std < 1e-6:
        return False
    for lm, a in zip(loss, adv):
        for t, l in enumerate(lm):
            if l:
                a[t] = float(f32((float(a[t]) - mean) / std))
    return True


def k3(log_ratio: np.ndarray) -> np.ndarray:
    return np.exp(log_ratio) - 1 - log_ratio


class PolicyStats:
    def __init__(self):
        self.tokens, self.loss, self.clipped, self.kl = 0, 0.0, 0, 0.0

    def add(self, o: "PolicyStats") -> None:
        self.tokens += o.tokens
        self.loss += o.loss
        self.clipped += o.clipped
        self.kl += o.kl

    def add_kl(self, loss: np.ndarray, old: np.ndarray, new: np.ndarray) -> None:
        m = loss
        self.tokens += int(m.sum())
        self.kl += float(k3(new[m].astype(np.float64) - old[m].astype(np.float64)).sum())

    def mean_loss(self) -> float:
        return self.loss / self.tokens if self.tokens else 0.0

    def clip_fraction(self) -> float:
        return self.clipped / self.tokens if self.tokens else 0.0

    def approx_kl(self) -> float:
        return self.kl / self.tokens if self.tokens else 0.0


def policy_grad(s: PolicyStats, loss: np.ndarray, new: np.ndarray, old: np.ndarray, adv: np.ndarray, eps: float, n: int,
                w: np.ndarray | None = None) -> np.ndarray:
    """dL/dlogp of the token-level clipped surrogate L = -1/n sum w min(rho A, clip(rho) A) (rl.DecoupledPolicyGrad):
    -w rho A/n where the unclipped term is the minimum, 0 where clipping holds it; float32. w, the
    behaviour weights (behaviour_weights), is data, not differentiated; None is all 1 (rl.PolicyGrad)."""
    if w is not None and len(w) != len(loss):
        raise Refused(f"policy loss: {len(loss)} tokens, {len(w)} weights")
    g = np.zeros(len(loss), dtype=np.float32)
    m = loss
    lr = new[m].astype(np.float64) - old[m].astype(np.float64)
    rho = np.exp(lr)
    a = adv[m].astype(np.float64)
    unclipped = rho * a
    clipped = np.clip(rho, 1 - eps, 1 + eps) * a
    weight = np.ones(len(a)) if w is None else w[m].astype(np.float64)
    s.tokens += int(m.sum())
    s.loss -= float((weight * np.minimum(unclipped, clipped)).sum())
    s.kl += float(k3(lr).sum())
    s.clipped += int(((rho < 1 - eps) | (rho > 1 + eps)).sum())
    g[m] = np.where(unclipped <= clipped, -weight * unclipped / n, 0.0).astype(np.float32)
    return g


class BehaviourStats:
    """How far the behaviour policy that sampled a batch is from the proximal one that trains it."""

    def __init__(self):
        self.tokens, self.kl, self.truncated = 0, 0.0, 0

    def kl_mean(self) -> float:
        return self.kl / self.tokens if self.tokens else 0.0

    def truncated_fraction(self) -> float:
        return self.truncated / self.tokens if self.tokens else 0.0


def behaviour_weights(s: BehaviourStats, loss: np.ndarray, prox: np.ndarray, behaviour: np.ndarray, cap: float) -> np.ndarray:
    """Per token, min(pi_prox/pi_behaviour, cap) at the actions, 0 elsewhere (rl.BehaviourWeights); float32.
    The cap keeps a stale action the sampler found unlikely from dominating the step."""
    if len(prox) != len(loss) or len(behaviour) != len(loss):
        raise Refused(f"behaviour weights: {len(loss)} tokens, {len(prox)} proximal log-probs, {len(behaviour)} behaviour")
    if not cap > 0:
        raise Refused(f"behaviour weights: cap {cap} is not positive")
    w = np.zeros(len(loss), dtype=np.float32)
    m = loss
    lr = prox[m].astype(np.float64) - behaviour[m].astype(np.float64)
    r = np.exp(lr)
    s.tokens += int(m.sum())
    s.kl += float(k3(lr).sum())
    s.truncated += int((r > cap).sum())
    w[m] = np.minimum(r, cap).astype(np.float32)
    return w


class ValueStats:
    def __init__(self):
        self.tokens, self.loss = 0, 0.0

    def mean_loss(self) -> float:
        return self.loss / self.tokens if self.tokens else 0.0


def value_grad(s: ValueStats, loss: np.ndarray, v: np.ndarray, v_old: np.ndarray, ret: np.ndarray, c: float, n: int) -> np.ndarray:
    """dL/dV of L = 1/n sum 1/2 max((V-G)^2, (clip(V, V_old-c, V_old+c)-G)^2) (rl.ValueGrad)."""
    g = np.zeros(len(loss), dtype=np.float32)
    m = loss
    x, g0 = v[m].astype(np.float64), ret[m].astype(np.float64)
    lu = 0.5 * (x - g0) ** 2
    s.tokens += int(m.sum())
    if c <= 0:
        s.loss += float(lu.sum())
        g[m] = ((x - g0) / n).astype(np.float32)
        return g
    old = v_old[m].astype(np.float64)
    xc = np.maximum(old - c, np.minimum(old + c, x))
    lc = 0.5 * (xc - g0) ** 2
    use = lu >= lc
    s.loss += float(np.where(use, lu, lc).sum())
    g[m] = np.where(use, (x - g0) / n, 0.0).astype(np.float32)
    return g


class Moments:
    def __init__(self):
        self.n, self.sy, self.sy2, self.sr, self.sr2 = 0, 0.0, 0.0, 0.0, 0.0

    def add(self, loss: np.ndarray, y: np.ndarray, p: np.ndarray) -> None:
        yy, pp = y[loss].astype(np.float64), p[loss].astype(np.float64)
        r = yy - pp
        self.n += len(yy)
        self.sy += float(yy.sum())
        self.sy2 += float((yy * yy).sum())
        self.sr += float(r.sum())
        self.sr2 += float((r * r).sum())

    def explained_variance(self) -> float:
        if self.n == 0:
            return 0.0
        n = float(self.n)
        vy = self.sy2 / n - (self.sy / n) ** 2
        vr = self.sr2 / n - (self.sr / n) ** 2
        if vy <= 1e-12:
            return 0.0
        return 1 - vr / vy


class GapStats:
    def __init__(self):
        self.tokens, self.sum, self.max = 0, 0.0, 0.0

    def add(self, loss: np.ndarray, train: np.ndarray, sampled: np.ndarray) -> None:
        d = np.abs(train[loss].astype(np.float64) - sampled[loss].astype(np.float64))
        self.tokens += len(d)
        self.sum += float(d.sum())
        if len(d):
            self.max = max(self.max, float(d.max()))

    def mean(self) -> float:
        return self.sum / self.tokens if self.tokens else 0.0


def minibatches(order: list[int], k: int) -> list[list[int]]:
    k = max(1, min(k, len(order)))
    return [order[i * len(order) // k:(i + 1) * len(order) // k] for i in range(k)]
