// Package sft is the supervised initialisation stage: it consumes
// sft.requested, trains the policy on token rows (typically reference
// solutions replayed through the rollout harness by a scripted agent, so
// the tokens are exactly what the policy would see), and emits
// sft.completed.
//
//	sft.requested ─▶ sft ─▶ sft.completed  (+ runs/<run>/policy/v<V+1>/)
//
// The stage reads the request, calls the trainer (trainer.Trainer.TrainSFT;
// the reference backend's step is trainer.SFTStep), adopts the checkpoint
// it reports and announces it. The loss is the mean negative
// log-likelihood of the loss-region tokens: token t of a chunk counts when
// its loss-mask entry is set, so the instruction and observations are
// context, never targets. Each epoch is one optimiser step (the reference
// backend's on training.sft_batch demonstrations taken in turn, each pass
// in the order the request's seed draws, or in sorted order without one). The
// request's policy version V is the starting point (version 0 is created
// from the configured initial checkpoint when absent); the result is
// version V+1, saved without optimiser state so that PPO starts its own.
// sft.completed's loss is the one measured by the last epoch's forward,
// before its step.
package sft
