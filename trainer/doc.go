// Package trainer is t1's one home for training: the update loops of the
// PPO actor, the critic and supervised fine-tuning, behind one interface
// with two backends. The batch a job trains on is package batch's (the
// stage loads it once and hands it on), the checkpoints it starts from
// and reports are package checkpoint's, and the stages that run the
// updates (stages/critic, stages/sft, stages/ppo, on the skeleton of
// package update) only read their inputs, call the Trainer, and store and
// announce what it returns; the model is package moe's and the arithmetic
// package rl's.
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
//     adopts it (checkpoint.Adopt: it must fit the batch) under Out;
//   - actor: trains on the batch's advantages (the value files must be
//     present) and reports ActorMetrics, whose LossDrift must be 0;
//   - critic: reports, for every chunk of the batch, its values after any
//     warm-up and before the update and the GAE advantages and returns
//     computed from them with the job's γ and λ (package rl's alignment);
//     the stage stores them as the values table (batch.ValueRows), which is what
//     the actor trains on, and then the critic is trained on those
//     returns;
//   - sft: trains on the loss-region tokens of the token rows, Steps
//     optimiser steps (the learning rate constant, or on a cosine from
//     adam.lr to 0 with "schedule": "cosine"; "weight_decay" in adam is
//     AdamW's, on matrices only), and saves the policy without optimiser
//     state.
//
// Errors caused by the input — tables that disagree, a checkpoint that
// does not load, an external trainer that exits non-zero or reports
// nonsense — are batch.BadInputErrors (batch.IsBad), which stages turn into failed
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
//	           steps of masked NLL over minibatches taken in turn, the
//	           learning rate constant or on a cosine to 0. Each
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
// file's kind. Every job file carries the hyperparameters of its kind
// (the training section of pipeline.yaml, defaults filled in) and
// "temperature": "per_token": log-probs divide each position's logits by
// the temperature its token was sampled at (the tokens table's
// temperature column, 0 counting as 1). These are complete examples
// (testdata/exec, which the tests hold to what Exec writes and parses);
// an actor job, whose batch the critic has valued:
//
//	{"kind": "actor", "run": "r1", "policy": "runs/r1/policy/v000002", "checkpoint": "runs/r1/policy/v000003", "version": 3,
//	 "manifest": {"format": 1, "run": "r1", "iteration": 1, "policy_version": 2,
//	              "model": {"vocab": 512, "layers": 2, "top_k": 2, "experts": 8},
//	              "routing_encoding": "packed", "routing_dtype": "<u1",
//	              "schema_versions": {"rewards": "1.0", "routing": "1.0", "tokens": "1.1", "trajectories": "1.1", "values": "1.0"},
//	              "chunks": 64, "tokens": 52311, "attempts": 64,
//	              "token_files": [{"key": "runs/r1/tokens/iter=0001/part-3d6e….parquet", "table": "tokens", "schema_version": "1.1",
//	                               "rows": 1, "bytes": 98121, "sha256": "3d6e…"}],
//	              "routing_files": [{"key": "runs/r1/routing/iter=0001/part-9661….parquet", "table": "routing", "schema_version": "1.0",
//	                                 "rows": 1, "bytes": 26912, "sha256": "9661…"}],
//	              "value_files": [{"key": "runs/r1/values/iter=0001/part-77c0….parquet", "table": "values", "schema_version": "1.0",
//	                               "rows": 64, "bytes": 41022, "sha256": "77c0…"}],
//	              "reward_files": [{"key": "runs/r1/rewards/iter=0001/part-f2d3….parquet", "table": "rewards", "schema_version": "1.0",
//	                                "rows": 64, "bytes": 3293, "sha256": "f2d3…"}],
//	              "trajectory_files": [{"key": "runs/r1/trajectories/iter=0001/part-a958….parquet", "table": "trajectories",
//	                                    "schema_version": "1.1", "rows": 64, "bytes": 3655, "sha256": "cf9e…"}]},
//	 "hyperparameters": {"actor": {"epochs": 2, "minibatches": 4, "clip": 0.2, "normalize_advantages": true, "weigh_attempts": false,
//	                               "adam": {"lr": 0.0001, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8},
//	                               "max_grad_norm": 1, "replay": true},
//	                     "temperature": "per_token"}}
//
// ("max_live_kl": a trust region on live_kl, below, appears when set: the
// step is halved until the policy as sampled moves by at most that much,
// "backtracks" in the result counting the halvings. With
// training.max_staleness above 0 a batch may have been sampled by an older
// policy than the one it trains: the manifest's "staleness" (left out when
// 0) says how many versions older, "policy" names the trained one,
// version policy_version + staleness, and "importance_cap" appears in the
// actor's hyperparameters: the decoupled objective, the ratio's
// denominator still the trainer's own log-prob before the update (the
// proximal policy) and every action's term weighted by w = min(exp(proximal
// − sampled), importance_cap), the tokens table's log-prob as the
// behaviour policy's, w data and not differentiated (rl.BehaviourWeights,
// rl.DecoupledPolicyGrad); the result then reports "behaviour_kl", the mean
// k3 estimate e^x − 1 − x of x = proximal − sampled over the actions, and
// "truncated", the fraction of actions whose weight the cap cut, each
// left out when 0, and may report "staleness", which the stage sets from
// the manifest whatever the trainer says),
//
// a critic job ("critic" absent: a fresh critic from "policy", the run's
// critic_init being policy, "policy" the batch's sampling policy,
// policy_version, whatever its staleness; with critic_init fresh, t1
// itself writes the seeded critic the reference backend would start from,
// moe.NewCritic of the model shape and seed given, with t1's tokenizer and
// no optimiser state, at runs/<run>/critic/fresh-v<version>
// (keys.FreshCritic), and names it in "critic" with "fresh": true, so that
// every trainer starts the run from the same critic and none needs Go's
// random numbers; a fresh critic either way is warmed up for at most
// warmup_steps, its optimiser new):
//
//	{"kind": "critic", "run": "r1", "critic": "runs/r1/critic/v000002", "checkpoint": "runs/r1/critic/v000003", "version": 3,
//	 "manifest": {"format": 1, "run": "r1", "iteration": 1, "policy_version": 2,
//	              "model": {"vocab": 512, "layers": 2, "top_k": 2, "experts": 8},
//	              "routing_encoding": "packed", "routing_dtype": "<u1",
//	              "schema_versions": {"rewards": "1.0", "routing": "1.0", "tokens": "1.1", "trajectories": "1.1"},
//	              "chunks": 64, "tokens": 52311, "attempts": 64,
//	              "token_files": [{"key": "runs/r1/tokens/iter=0001/part-3d6e….parquet", "table": "tokens", "schema_version": "1.1",
//	                               "rows": 1, "bytes": 98121, "sha256": "3d6e…"}],
//	              "routing_files": [{"key": "runs/r1/routing/iter=0001/part-9661….parquet", "table": "routing", "schema_version": "1.0",
//	                                 "rows": 1, "bytes": 26912, "sha256": "9661…"}],
//	              "reward_files": [{"key": "runs/r1/rewards/iter=0001/part-f2d3….parquet", "table": "rewards", "schema_version": "1.0",
//	                                "rows": 64, "bytes": 3293, "sha256": "f2d3…"}],
//	              "trajectory_files": [{"key": "runs/r1/trajectories/iter=0001/part-a958….parquet", "table": "trajectories",
//	                                    "schema_version": "1.1", "rows": 64, "bytes": 3655, "sha256": "cf9e…"}]},
//	 "gae": {"gamma": 1, "lambda": 0.95, "baseline": "group"},
//	 "hyperparameters": {"critic": {"model": {"vocab": 512, "layers": 2, "d_model": 64, "heads": 4, "kv_heads": 2, "head_dim": 16,
//	                                          "experts": 8, "top_k": 2, "d_ff": 128, "context": 2048, "seed": 1, "rope_theta": 10000,
//	                                          "rms_norm_eps": 1e-6, "norm_topk_prob": true, "tie_embeddings": false},
//	                                "adam": {"lr": 0.0001, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8},
//	                                "value_clip": 0.2, "epochs": 1, "max_grad_norm": 1, "warmup_steps": 0, "warmup_ev": 0},
//	                     "temperature": "per_token"}}
//
// and a fine-tuning:
//
//	{"kind": "sft", "run": "r1", "policy": "runs/r1/policy/v000000", "checkpoint": "runs/r1/policy/v000001", "version": 1,
//	 "data": [{"key": "runs/r1/tokens/iter=0000/part-5b1c….parquet", "table": "tokens", "schema_version": "1.1",
//	           "rows": 96, "bytes": 61200, "sha256": "5b1c…"}],
//	 "steps": 20,
//	 "hyperparameters": {"sft": {"adam": {"lr": 0.001, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8}, "max_grad_norm": 1, "batch": 16},
//	                     "temperature": "per_token"}}
//
// The command reads what the job names from the run's object store by
// itself; t1 hands the store over in its environment (StoreAccess, set
// by the pipeline from the store it runs on): T1_STORE_ENDPOINT (a URL),
// T1_STORE_BUCKET, T1_STORE_PREFIX (keys are <prefix>/<key>; absent when
// the store has none), AWS_REGION and AWS_ACCESS_KEY_ID with
// AWS_SECRET_ACCESS_KEY (inherited from t1's own environment when the
// store was configured from it) — or T1_STORE_DIR, a local directory
// whose files are the objects. t1train (the repository's PyTorch
// trainer, t1train/README.md) is such a command:
//
//	command: [".venv/bin/python", "-m", "t1train", "--job", "{job}", "--out", "{out}"]
//
// The command exits 0 after writing {out}, the result, which names the
// job's kind (an actor result may leave "kind" out) and where the new
// checkpoint is: an object-store prefix, or an absolute local directory
// the stage adopts into the store:
//
//	{"kind": "actor", "checkpoint": "/scratch/train/r1/policy-v000003",
//	 "metrics": {"steps": 8, "actions": 812, "policy_loss": -0.013, "clip_fraction": 0.04, "approx_kl": 0.002, "grad_norm": 0.61,
//	             "logprob_gap": 0, "logprob_gap_max": 0, "routing_mismatches": 0, "routing_sets": 1624, "mismatch_rate": 0,
//	             "live_kl": 0.004, "experts_switched": 0.05, "loss_drift": 0, "replay": true}}
//
//	{"kind": "critic", "checkpoint": "runs/r1/critic/v000003",
//	 "values": [{"task_id": "t-1f3a", "attempt": 0, "chunk": 0, "values": [0, 0, 0.41, 0.44], "advantages": [0, 0, 0.59, 0.56], "returns": [0, 0, 1, 1]}],
//	 "metrics": {"steps": 1, "warmup": false, "warmup_steps": 0, "explained_variance": 0.4, "value_loss": 0.02}}
//
//	{"kind": "sft", "checkpoint": "runs/r1/policy/v000001",
//	 "metrics": {"steps": 20, "sequences": 8, "first_loss": 3.1, "loss": 1.2}}
//
// The checkpoint is a Hugging Face model directory. t1's own architecture
// is Qwen3-MoE as transformers writes it (model_type qwen3_moe; a policy's
// architectures Qwen3MoeForCausalLM, a critic's
// Qwen3MoeForTokenClassification with one label; transformers' tensor
// names; package moe), and another architecture is accepted too. t1 checks
// what it relies on without reading the weights, which whatever runs them
// reads: config.json's dimensions (moe.ParseShape, under Qwen3-MoE's
// field names) must be the run's — vocab_size covering the batch's ids,
// num_hidden_layers, num_experts and num_experts_per_tok equal to the
// routing records' (a critic's: its vocabulary alone) — every layer must
// be an MoE layer, tokenizer.json must be there and read (with
// tokenizer_config.json and the files beside it) with no more ids than
// vocab_size, and the weights must be there: model.safetensors, or
// model.safetensors.index.json with every shard its weight_map names
// (moe.WeightShards); Adam's state, when there, is one
// optimizer.safetensors however the weights are sharded (m.<name> and
// v.<name> under the weights' tensor names, which t1 resumes from;
// t1train's ranks each write their rows of it). The directory must be
// flat (hidden subdirectories, a download tool's cache, are skipped).
// Its files are stored byte for byte, the weights last, and its claim
// check is model.safetensors, else the shard index. A critic result holds every
// chunk of the batch exactly once, each list as long as the chunk's
// tokens, finite, 0 at non-action tokens; float32 values survive JSON
// exactly. Decoding is strict: an unknown field, a result of another
// kind, a missing checkpoint or impossible counts fail the job (a
// batch.BadInputError), as does a non-zero exit, whose status and output tail
// the error carries.
//
// # Layout
//
//	runs/<run>/policy/v<version, 6 digits>/{config.json,tokenizer files,model.safetensors,optimizer.safetensors}
//	                                       (Hugging Face layout; a model t1 does not run, its files as they are,
//	                                       version 0 its initial directory's: checkpoint.EnsureExternalPolicy)
//	runs/<run>/critic/v<version, 6 digits>/…
//	runs/<run>/critic/fresh-v<version, 6 digits>/…   the seeded critic an exec critic job starts from (keys.FreshCritic)
//	runs/<run>/training/iter=<4 digits>/policy-v<6 digits>.json   TrainingReport of an actor update
//
// A checkpoint's claim check (checkpoint.Ref) is its prefix with the size
// and SHA-256 of model.safetensors.
package trainer
