// Package control is the only stage that decides what happens next. It
// folds the event log of each run and, after every event, emits the
// decisions the fold calls for:
//
//	run.started                         → synth.requested (round 0)
//	round r settled, pool below target  → synth.requested (round r+1, seeds: tasks accepted in r)
//	last round settled                  → pool.sealed
//	pool.sealed | policy.updated        → rollout.requested × tasks × attempts (next iteration)
//	iteration settled                   → batch.ready (the iteration's batch manifest)
//	policy.updated (every K, and last)  → eval.requested
//	last iteration and evals settled    → run.completed
//
// A round is settled when every candidate it asked for was kept and
// audited, discarded, or failed; an iteration when every attempt was
// scored or failed. An iteration proceeds with what succeeded when at
// least MinSuccess of its attempts did, and fails the run otherwise.
//
// Decisions are emitted with engine.AsDecision: the same decision reached
// while handling different events is one event. The fold itself only ever
// takes events as they come back from the log, so a handler that fails
// and is retried decides again from the same state.
//
// A branch (schemas.BranchPoint) is folded too: one that only replayed a
// stage decides nothing; a continued one first takes over its parent's
// events before the branch point (Cut, History) and then decides as any
// run, with the iterations and model shape its run.started froze.
package control
