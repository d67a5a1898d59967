// Package critic is the critic stage: it consumes batch.ready, hands the
// actor update its pre-update values, advantages and returns, trains the
// critic on those returns, and emits critic.updated (DESIGN.md §1.5).
//
//	batch.ready ─▶ critic ─▶ critic.updated  (+ a values-table object, the
//	                                          manifest with value_files, a
//	                                          critic checkpoint)
//
// One iteration, in order:
//
//  1. Load the critic: the newest checkpoint runs/<run>/critic/vNNNNNN
//     with a version ≤ the batch's iteration, or a fresh one of the
//     configured shape when there is none.
//  2. Warm-up, only for a critic that has never been trained (version 0):
//     value-loss steps on this batch's returns until the explained
//     variance reaches warmup_ev or warmup_steps steps have run. The
//     actor is not updated before the critic is warm.
//  3. Pre-update values for every chunk; GAE advantages and returns over
//     each attempt's actions, in chunk order, with the attempt's reward at
//     its last action (package rl). These values, and the explained
//     variance of them against the returns, are what critic.updated
//     reports: the actor's advantages and the critic's value clipping are
//     anchored on one fixed function.
//  4. Write the values table and the manifest with value_files added.
//  5. Train: epochs Adam steps of the clipped value loss, clipped around
//     the pre-update values; save the critic as version iteration+1.
//
// A values row has one entry per token of its chunk, aligned as package rl
// describes: entry t of an action token is the critic's value of the state
// it was sampled in (the value head at position t−1) and its advantage and
// return; other tokens hold 0.
//
// Every step is deterministic, so a redelivered batch.ready writes the
// same objects and emits the same event.
package critic
