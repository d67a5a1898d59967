// Package critic is the critic stage: it consumes batch.ready, has the
// trainer compute the critic's pre-update values, advantages and returns
// and train the critic on those returns, hands the actor update the
// values, and emits critic.updated (ARCHITECTURE.md §1.5).
//
//	batch.ready ─▶ critic ─▶ critic.updated  (+ a values-table object, the
//	                                          manifest with value_files, a
//	                                          critic checkpoint)
//
// The batch is read from the store once (update.Read, batch.Load) and
// handed to the trainer; the values are checked against that batch, not
// against a second read of the manifest that lists them.
//
// One iteration, in order:
//
//  1. Find the critic: the newest checkpoint runs/<run>/critic/vNNNNNN
//     with a version ≤ the batch's iteration, or none (a fresh critic).
//  2. Train (trainer.Trainer.TrainCritic, whose contract trainer/doc.go
//     states): a fresh critic is first warmed up on this batch's returns,
//     so the actor is never updated against a cold critic; then its
//     values for every chunk and GAE advantages and returns over each
//     attempt's actions, in chunk order, with the attempt's reward at its
//     last action (package rl); then the value update, clipped around
//     those values, saved as critic version iteration+1. The values, and
//     their explained variance against the returns, are what
//     critic.updated reports: the actor's advantages and the critic's
//     value clipping are anchored on one fixed function.
//  3. Store the values table and the manifest with value_files added,
//     adopt the trainer's checkpoint as version iteration+1, emit.
//
// A values row has one entry per token of its chunk, aligned as package rl
// describes: entry t of an action token is the critic's value of the state
// it was sampled in (the score head at position t−1) and its advantage and
// return; other tokens hold 0.
//
// With the reference trainer every step is deterministic, so a
// redelivered batch.ready writes the same objects and emits the same
// event.
package critic
