// Package trainer runs the PPO actor update of a batch, behind one small
// interface with two backends, and holds what both update stages share:
// loading a batch (tokens, routing, rewards and values joined per chunk,
// every object verified against its manifest reference), writing one, and
// the object-store layout of checkpoints.
//
//	Trainer.Train(ctx, Job{Manifest, Policy, Out, Version}) → Result{Checkpoint, Metrics}
//
//	Reference  the in-process reference MoE (moe): loads the policy,
//	           runs Epochs Adam steps (constant learning rate) of token-level
//	           PPO over the whole batch with routing replay on or off and
//	           gradient-norm clipping, and saves the new checkpoint, with its
//	           optimiser state, under Out.
//	Exec       an external command (torchrun, a Slurm wrapper …) that gets
//	           the manifest as a JSON file and reports the new checkpoint and
//	           its metrics in a JSON file (see Exec).
//
// Checkpoints live under
//
//	runs/<run>/policy/v<version, 6 digits>/{config.json,tokenizer.json,model.safetensors,optimizer.safetensors}
//	runs/<run>/critic/v<version, 6 digits>/…
//
// and a checkpoint's claim check (CheckpointRef) is its prefix with the
// size and SHA-256 of model.safetensors.
//
// Errors caused by the input — tables that disagree, a checkpoint that
// does not load, an external trainer that exits non-zero — are
// BadInputErrors (IsBad), which stages turn into failed events; anything
// else (an unreachable store, a cancelled context) is worth a retry.
// Training never writes over the job's current policy, so a failed update
// leaves it current.
package trainer
