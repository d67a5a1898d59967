// Package ppo is the actor-update stage: it consumes critic.updated, trains
// the policy on the batch with the critic's pre-update advantages through
// a trainer backend (the in-process reference MoE or an external
// command), stores the new policy checkpoint and the iteration's metrics,
// and emits policy.updated (ARCHITECTURE.md §1.6).
//
//	critic.updated ─▶ ppo ─▶ policy.updated  (+ runs/<run>/policy/vNNNNNN/,
//	                                          a metrics-table row,
//	                                          runs/<run>/training/iter=NNNN/policy-vNNNNNN.json)
//
// The batch's policy version V is the current policy, at
// runs/<run>/policy/vV; version 0 is created from the configured initial
// checkpoint when it is not there yet. The update writes version V+1 and
// nothing else: when it fails — tokens and routing that disagree, values
// missing, a checkpoint that does not load, an external trainer that exits
// non-zero, a single loss-region token that differs between the tokens
// table and what the trainer saw — the event fails with the reason
// (critic.updated.failed) and version V stays current.
//
// The training report is written last, with PutIfAbsent, and holds the
// policy.updated payload: a redelivered critic.updated whose report exists
// announces the same update again instead of training a second time (an
// external trainer need not be deterministic, and the checkpoint an
// announced event names must not change).
//
// The metrics row holds the iteration's reward mean, resolve rate,
// explained variance and value loss (from the critic), the train-vs-
// sampling log-prob gap, clip fraction and policy loss, the TITO repair
// counts, and the routing mismatch rate in routing_flip_rate. The metrics
// table has no column yet for approximate KL, gradient norm, mismatch
// counts and loss drift; the training JSON object next to it holds every
// figure the trainer reported.
package ppo
