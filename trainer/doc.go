// Package trainer is t1's one home for training: the update loops of the
// PPO actor, the critic and supervised fine-tuning, behind one interface
// with two backends, and what the update stages share around them —
// loading a batch (tokens, routing, rewards and values joined per chunk,
// every object verified against its manifest reference), writing one, the
// object-store layout of checkpoints and training reports, and adopting
// the checkpoint a trainer reports. The stages (stages/critic,
// stages/sft, stages/ppo) only read their inputs, call the Trainer, and
// store and announce what it returns; the model is package moe's and the
// arithmetic package rl's.
//
// # The contract
//
//	Trainer.TrainActor(ctx, ActorJob{Manifest, Policy, Out, Version})          → ActorResult{Checkpoint, Metrics}
//	Trainer.TrainCritic(ctx, CriticJob{Manifest, Critic, Out, Version, GAE})   → CriticResult{Checkpoint, Values, Metrics}
//	Trainer.TrainSFT(ctx, SFTJob{Run, Data, Steps, Policy, Out, Version})      → SFTResult{Checkpoint, Metrics}
//
// Every job starts from a checkpoint (Policy, or Critic; a critic job with
// no Critic starts a fresh critic and warms it up) and asks for a new one
// at Out with version Version. A trainer:
//
//   - never writes over the checkpoint the job starts from, so a failed
//     job leaves it current;
//   - reports where the new checkpoint is: Out itself, another prefix, or
//     (from an external trainer) an absolute local directory; the stage
//     adopts it (Adopt: it must load and fit the batch) under Out;
//   - actor: trains on the batch's advantages (the value files must be
//     present) and reports ActorMetrics, whose LossDrift must be 0;
//   - critic: reports, for every chunk of the batch, its values after any
//     warm-up and before the update and the GAE advantages and returns
//     computed from them with the job's γ and λ (package rl's alignment);
//     the stage stores them as the values table (ValueRows), which is what
//     the actor trains on, and then the critic is trained on those
//     returns;
//   - sft: trains on the loss-region tokens of the token rows, Steps
//     optimiser steps, and saves the policy without optimiser state.
//
// Errors caused by the input — tables that disagree, a checkpoint that
// does not load, an external trainer that exits non-zero or reports
// nonsense — are BadInputErrors (IsBad), which stages turn into failed
// events; anything else (an unreachable store, a cancelled context) is
// worth a retry.
//
// # Backends
//
//	Reference  the in-process reference MoE (moe). Actor: Epochs Adam
//	           steps (constant learning rate) of token-level PPO over the
//	           whole batch with routing replay on or off and gradient-norm
//	           clipping. Critic: warm-up of a fresh critic, the values,
//	           then Epochs steps of the clipped value loss. SFT: Steps
//	           steps of masked NLL over minibatches taken in turn. Each
//	           saves its checkpoint, with optimiser state except for SFT,
//	           under Out. Every update is deterministic.
//	Exec       an external command (torchrun, a Slurm wrapper …) that gets
//	           the job as JSON files and reports its result in a JSON
//	           file (below).
//
// New(store, Options{Backend, Exec, Reference}) builds the one a
// configuration selects.
//
// # The exec protocol
//
// One process per job. The command's arguments may name {job} (the job
// file), {kind}, {manifest}, {out} (the result file to write), {policy},
// {critic}, {checkpoint} and {version} (Exec lists what each is for each
// kind). The command gets all three kinds of job and must act on the job
// file's kind:
//
//	{"kind": "actor",  "run": "r1", "policy": "runs/r1/policy/v000002", "checkpoint": "runs/r1/policy/v000003", "version": 3,
//	 "manifest": {…schemas.BatchManifest, with value_files…}}
//	{"kind": "critic", "run": "r1", "critic": "runs/r1/critic/v000002", "checkpoint": "runs/r1/critic/v000003", "version": 3,
//	 "manifest": {…without value_files…}, "gae": {"gamma": 1, "lambda": 0.95}}          ("critic" absent: start a fresh critic)
//	{"kind": "sft",    "run": "r1", "policy": "runs/r1/policy/v000000", "checkpoint": "runs/r1/policy/v000001", "version": 1,
//	 "data": [{…schemas.FileRef of a tokens object…}], "steps": 20}
//
// It exits 0 after writing {out}, the result, which names the job's kind
// (an actor result may leave "kind" out) and its checkpoint:
//
//	{"kind": "actor", "checkpoint": "<prefix or local directory>",
//	 "metrics": {"steps": 4, "actions": 812, "policy_loss": …, "clip_fraction": …, "approx_kl": …, "grad_norm": …,
//	             "logprob_gap": …, "logprob_gap_max": …, "routing_mismatches": 0, "routing_sets": 1624,
//	             "mismatch_rate": 0, "loss_drift": 0, "replay": true}}
//	{"kind": "critic", "checkpoint": "…",
//	 "values": [{"task_id": "t", "attempt": 0, "chunk": 0, "values": […], "advantages": […], "returns": […]}, …],
//	 "metrics": {"steps": 1, "warmup": true, "warmup_steps": 3, "explained_variance": 0.4, "value_loss": 0.02}}
//	{"kind": "sft", "checkpoint": "…",
//	 "metrics": {"steps": 20, "sequences": 8, "first_loss": 3.1, "loss": 1.2}}
//
// A critic result holds every chunk of the batch exactly once, each list
// as long as the chunk's tokens, finite, 0 at non-action tokens; float32
// values survive JSON exactly. Decoding is strict: an unknown field, a
// result of another kind, a missing checkpoint or impossible counts fail
// the job (a BadInputError), as does a non-zero exit, whose status and
// output tail the error carries.
//
// # Layout
//
//	runs/<run>/policy/v<version, 6 digits>/{config.json,tokenizer.json,model.safetensors,optimizer.safetensors}
//	runs/<run>/critic/v<version, 6 digits>/…
//	runs/<run>/training/iter=<4 digits>/policy-v<6 digits>.json   TrainingReport of an actor update
//
// A checkpoint's claim check (CheckpointRef) is its prefix with the size
// and SHA-256 of model.safetensors.
package trainer
