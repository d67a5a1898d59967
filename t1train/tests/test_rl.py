"""The decoupled objective's arithmetic against rl/rl_test.go's numbers (TestBehaviourWeightsTruncated)."""

import math

import numpy as np
import pytest

from t1train import rl
from t1train.config import parse_job
from t1train.errors import Refused

LOSS = np.array([False, True, True, True])
BEHAVIOUR = np.array([0, -2, -1, -3], dtype=np.float32)
PROX = np.array([0, -1.5, -1.5, -1], dtype=np.float32)
WANT = [0, math.exp(0.5), math.exp(-0.5), 2]


def k3(x):
    return math.exp(x) - 1 - x


# The proximal policy gives the three actions e^0.5, e^-0.5 and e^2 times the probability the
# behaviour policy did; capped at 2, the last is truncated.
def test_behaviour_weights_truncated():
    bs = rl.BehaviourStats()
    w = rl.behaviour_weights(bs, LOSS, PROX, BEHAVIOUR, 2)
    assert w.dtype == np.float32
    np.testing.assert_allclose(w, WANT, atol=1e-6)
    assert (bs.tokens, bs.truncated) == (3, 1)
    assert bs.truncated_fraction() == pytest.approx(1 / 3, abs=1e-12)
    assert bs.kl_mean() == pytest.approx((k3(0.5) + k3(-0.5) + k3(2)) / 3, abs=1e-9)
    with pytest.raises(Refused):
        rl.behaviour_weights(bs, LOSS, PROX, BEHAVIOUR, 0)
    with pytest.raises(Refused):
        rl.behaviour_weights(bs, LOSS, PROX[:2], BEHAVIOUR, 2)


# With rho = 1 (the update's first step) and A = 1 the decoupled objective is the on-policy one
# scaled per action: each term of the loss and its gradient is -w/n.
def test_weighted_policy_grad():
    w = rl.behaviour_weights(rl.BehaviourStats(), LOSS, PROX, BEHAVIOUR, 2)
    adv = np.array([0, 1, 1, 1], dtype=np.float32)
    plain, dec = rl.PolicyStats(), rl.PolicyStats()
    g0 = rl.policy_grad(plain, LOSS, PROX, PROX, adv, 0.2, 3)
    g1 = rl.policy_grad(dec, LOSS, PROX, PROX, adv, 0.2, 3, w)
    np.testing.assert_allclose(g1, np.array(WANT) * g0, atol=1e-6)
    assert dec.mean_loss() == pytest.approx(-(WANT[1] + WANT[2] + WANT[3]) / 3, abs=1e-6)
    assert (dec.clip_fraction(), dec.approx_kl()) == (plain.clip_fraction(), plain.approx_kl())
    with pytest.raises(Refused):
        rl.policy_grad(dec, LOSS, PROX, PROX, adv, 0.2, 3, w[:2])


# Where the clip holds the term constant the weight changes nothing: the gradient stays 0.
def test_weighted_policy_grad_clipped():
    new = np.array([0, -1.0, -1.5, -1], dtype=np.float32)  # rho = e^0.5 at the first action, past 1.2
    adv = np.array([0, 1, 1, 1], dtype=np.float32)
    w = np.array([0, 1.5, 0.5, 2], dtype=np.float32)
    s = rl.PolicyStats()
    g = rl.policy_grad(s, LOSS, new, PROX, adv, 0.2, 3, w)
    assert g[1] == 0 and s.clipped == 1
    assert g[2] == pytest.approx(-0.5 / 3) and g[3] == pytest.approx(-2 / 3)
    assert s.loss == pytest.approx(-(1.5 * 1.2 + 0.5 + 2))


def test_importance_cap_is_an_actor_option():
    job = parse_job('{"kind": "actor", "run": "r", "policy": "a", "checkpoint": "b", "version": 3, '
                    '"manifest": {"policy_version": 1, "staleness": 1}, '
                    '"hyperparameters": {"actor": {"importance_cap": 2.5}, "temperature": "per_token"}}')
    assert job.actor.importance_cap == 2.5 and job.manifest["staleness"] == 1
    assert parse_job('{"kind": "actor", "run": "r", "policy": "a", "checkpoint": "b", "version": 3, "manifest": {"x": 1}, '
                     '"hyperparameters": {"temperature": "per_token"}}').actor.importance_cap == 0
