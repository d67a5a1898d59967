// Package rl holds the arithmetic of t1's PPO update, which the reference
// trainer (package trainer) runs for the critic and the actor:
// generalised advantage estimation over an attempt's sampled tokens, the
// token-level clipped surrogate and its gradient, the clipped value loss
// and its gradient, and the health figures of an update (explained
// variance, approximate KL, clip fraction, the train-vs-sampling log-prob
// gap, routing mismatch counts). It has no I/O and imports no model: it
// takes and returns per-token slices, so the log-probs and values of any
// model fit, and a model's gradients are the caller's to back-propagate.
// Every function is deterministic.
//
// # Token alignment
//
// Every per-token slice here is aligned with a chunk's token ids: entry t
// belongs to token t. A token is an action when its loss-mask entry is
// set; its log-prob is log p(ids[t] | ids[:t]) (the model's LogProbs[t−1])
// and its value is the critic's estimate of the state it was sampled in,
// the critic's score head at position t−1. Token 0 is never an action. Entries of
// non-action tokens are 0 in every output.
//
//	ids        ⟨sys⟩ … ⟨asst⟩  a₁  a₂  a₃ ⟨end⟩ ⟨user⟩ obs … ⟨asst⟩ a₄ …
//	loss mask    0   …   0    1   1   1   1     0     0  …   0    1
//	value        ·   …   ·   V₁  V₂  V₃  V₄    ·     ·  …   ·   V₅      (head at t−1)
//	reward                                                   … R at the last action
//
// # GAE
//
// An attempt's actions, over its chunks in order, form one episode
// a₁ … a_N with values V₁ … V_N and a single reward R at a_N:
//
//	δ_i = r_i + γ·V_{i+1} − V_i      (V_{N+1} = 0, r_i = R·[i = N])
//	A_i = δ_i + γλ·A_{i+1}           (A_{N+1} = 0)
//	G_i = A_i + V_i                  (the critic's regression target)
//
// Observation and template tokens between actions are not steps: the
// environment's reply is part of the transition.
//
// # Losses (token-level means over every action of a batch)
//
//	ρ_t      = exp(logp_t − logp_old_t)
//	L_policy = −1/N Σ_t min(ρ_t A_t, clip(ρ_t, 1−ε, 1+ε) A_t)
//	L_value  = 1/N Σ_t ½ max((V_t − G_t)², (clip(V_t, V_old_t − c, V_old_t + c) − G_t)²)
//
// No KL penalty, no entropy bonus and no MoE load-balance term (its
// coefficient is 0; the reference model has no auxiliary loss): the recipe
// turns them off.
package rl
