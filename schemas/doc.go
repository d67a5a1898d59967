// Package schemas defines what t1 stores and what its events say: the
// versioned Parquet tables, the typed event payloads with their
// claim-check references, the writers and checked readers of table
// objects, and the batch manifest the GPU update stage reads. The routing
// record codec lives in schemas/routing.
//
// # Objects
//
// Every table object is one Parquet file at a content-addressed key
// (keys.TableObject; package keys draws the whole layout of a run's
// objects):
//
//	runs/<run>/<table>/<dir>-NNNN/part-<sha256[:32]>.parquet
//
// <dir>-NNNN is iter-NNNN (round-NNNN for tasks and audits) and NNNN is
// the value of the table's partition column (Table.Partition: iteration,
// or round) in every row of the object. The directory is not a hive
// key=value on purpose: DuckDB, pyarrow and polars with hive partitioning
// on would each add or replace a column from it, with a type of its own
// (DuckDB reads a zero-padded value as text), so a partition directory
// adds no column and every tool reads the file's columns and types.
//
// # Compaction
//
// Writers store one object per unit of work (an attempt, a score), so a
// partition holds hundreds of small objects until Compact makes them one
// (one per MaxCompactedBytes of sources), once control has sealed the
// partition (the synthesis rounds when the pool is sealed; an iteration
// when its update is done and the evaluations stored under it have an
// outcome; the last policy's evaluation when the run completes). It
// stores, in this order, a CompactionRecord
// (runs/<run>/compactions/<table>/<dir>-NNNN/record-<sha256[:32]>.json:
// each source's claim check and the row offset of its rows in the
// compacted object), the compacted object (content-addressed as any
// other), and then deletes the sources. A crash anywhere loses nothing
// (no source goes before its rows are stored elsewhere and recorded) and
// duplicates nothing for t1's readers: Fetch serves a claim check whose
// object is gone from the record (the rows, checked against the record's
// claim check, which must equal the caller's), and TableObjects, which
// listing readers use, leaves out a source whose compacted object is
// stored. Compact again (control does, on restart) finishes a crashed
// compaction. Events, batch manifests and replays keep their claim checks
// as they were written; a program outside t1 that reads a compacted
// partition's sources by key reads the compacted object instead.
//
// Writers spool rows to a temporary file (zstd at DefaultZstdLevel,
// dictionary encoding for low-cardinality strings, bounded row groups),
// then PutIfAbsent the file: identical rows give identical bytes and so
// the same key, and a rewrite after a crash or a redelivery is a no-op.
// The key of a table with wall-clock columns (Table.WallClock:
// trajectories.duration_ms, turns.start_ms and turns.duration_ms) hashes
// its rows without them, so a rerun of the same seed names the same
// objects and a replayed attempt keeps the first attempt's object.
// The file's key-value metadata holds t1.table and t1.schema_version; the
// object's store metadata holds its sha256. Commit returns the FileRef
// (key, table, version, rows, bytes, SHA-256) an event carries.
//
// Readers check, in order: size and SHA-256 (against the caller's
// FileRef, else the object's stored sha256), the Parquet footer, the
// table name, and the schema version (any minor of a known major;
// another major is refused). Errors name the object. ReadRows decodes
// small objects into row structs with parquet-go (which verifies page
// CRCs); package columnar decodes them as Arrow tables, after a page-CRC
// pass (Object.CheckPages) when no hash vouched for the bytes
// (Object.Verified), and reads an object of an older minor as the
// current table, the columns added since as nulls.
// CheckAligned verifies that a tokens object and a routing object agree
// chunk by chunk.
//
// # Tables
//
// tasks — grain: task; partition: round. One synthesized, seed or imported
// task. Columns: run, task_id, parent_id, root_id, round, source (seed |
// synth | import), category, difficulty, tags (list<string>),
// instruction, steps (executable steps of the reference solution),
// bundle_key and bundle_sha256 (the Harbor task directory as an object),
// solution_passed.
//
// audits — grain: task; partition: round. Columns: run, task_id, round,
// dimensions (list<struct{name, facet, score}>, the eight audit
// dimensions), the four facet scores verifier, solution, instruction,
// value (0..1), total (weighted 45/25/20/10), reject_reasons
// (list<string>: hidden_requirement, test_leakage, solution_gaming,
// weak_verifier, near_duplicate, low_score), decision (accept | reject),
// near_duplicate_of.
//
// trajectories — grain: attempt; partition: iteration. Columns: run, task_id,
// attempt, iteration, purpose (train | eval), suite, policy_version,
// seed, turns, tokens, chunks, compactions, termination (task_complete |
// max_turns | token_budget | wall_clock | context_exhausted), snapshot_key,
// duration_ms, sandbox (bwrap | process), isolated (false: the attempt ran
// on the host; schema 1.1).
//
// turns — grain: turn; partition: iteration. Columns: run, task_id, attempt,
// turn, chunk, action, observation (bounded), truncated,
// observation_bytes (full size), exit_code, prompt_tokens,
// completion_tokens, compacted, start_ms, duration_ms; schema 1.1 adds
// purpose and policy_version, the attempt's, since evaluations of
// several policies share an iteration's partition (the turn's own under
// stages.rollout.episode_version latest); schema 1.2 adds iteration.
//
// tokens — grain: chunk; partition: iteration. A chunk is one training
// sequence, exactly as sampled (TITO). Columns: run, task_id, attempt, chunk, iteration, policy_version,
// token_ids (list<int32>), logprobs (list<float32>, the sampler's),
// loss_mask (list<bool>), turn_offsets (list<int32>, index in token_ids
// where each turn starts), drift_repair (how the chunk began: none,
// strict_prefix, clipped_norm, text_retokened, new_chunk; compaction, or
// version where a newer policy took over the episode under
// stages.rollout.episode_version latest, policy_version then the chunk's),
// repairs_strict_prefix, repairs_clipped_norm, repairs_text_retokened
// (repairs at turn boundaries inside the chunk); schema 1.1 adds
// temperature and top_p, the sampling settings the logprobs are relative
// to (a trainer divides its logits by temperature; 0 means untempered).
//
// routing — grain: chunk; partition: iteration. Columns: run, task_id,
// attempt, chunk, tokens, layers, top_k, experts (the model's expert
// count), encoding (packed | packed+zstd | rank | delta), ids_offset
// (for packed: where the raw [T, L, k] ids start inside record; −1
// otherwise), record (binary: one schemas/routing record); schema 1.1
// adds policy_version, the sampling policy's as in the chunk's tokens
// row; schema 1.2 adds iteration. Rows written for a GPU batch use packed; storage-only rows may use
// the smaller encodings.
//
// rewards — grain: attempt; partition: iteration. Columns: run, task_id,
// attempt, iteration, purpose, policy_version, assertions
// (list<struct{name, passed}>), passed, total, scale (fixed before the
// run), reward (passed × scale, or the binary fallback), source (ctrf,
// junit, reward_json, reward_txt, exit_code), fallback,
// verifier_exit_code.
//
// values — grain: chunk; partition: iteration. The critic's pre-update view,
// the actor update's input. Columns: run, task_id, attempt, chunk,
// iteration, policy_version, critic_version, values, advantages, returns
// (each list<float32>, one entry per token).
//
// metrics — grain: iteration; partition: iteration. Columns: run, iteration,
// policy_version, trajectories, tokens, reward_mean, resolve_rate,
// explained_variance, logprob_gap, clip_fraction, policy_loss,
// value_loss, repairs_strict_prefix, repairs_clipped_norm,
// repairs_text_retokened, repairs_new_chunk, routing_flip_rate; schema
// 1.1 adds approx_kl, grad_norm, logprob_gap_max, routing_mismatches,
// routing_sets, loss_drift, replay, actions, critic_warmup_steps; schema
// 1.2 adds live_kl and experts_switched (the update's change with each
// policy routing on its own).
//
// eval_results — grain: attempt; partition: iteration. Columns: run,
// suite, task_id, attempt, policy_version, reward, passed, total, solved,
// turns, difficulty, category; schema 1.1 adds iteration, the iteration
// whose rollouts the evaluated policy samples (0 for the initial and the
// fine-tuned policy, the number of iterations for the last one): group by
// policy_version to tell two policies of one iteration apart.
//
// # Events
//
// Payload JSON names are snake_case. FileRef points at a table object,
// ObjectRef at any other object (bundle, snapshot, checkpoint, manifest).
//
//	run.started        producer: t1 run, t1 replay (operator)  consumers: control, reward
//	                   seed, config_hash, model{vocab, layers, top_k, experts},
//	                   iterations, reward_scale, eval_suites, parent, branch{stage,
//	                   iteration, from_seq, continue, pool_version, overrides[]{key,
//	                   value, parent}} (a branch: t1 replay)
//	iteration.started  producer: control  consumers: reports and dashboards (no stage)
//	                   iteration, policy_version, pool_version
//	synth.requested    producer: control  consumers: synth, control
//	                   round, seed_ids, per_seed, seeds (round 0), seed
//	synth.candidate    producer: synth  consumers: synth, control
//	                   round, parent_id, root_id, steps ([]{name, seed, input}),
//	                   parent_steps, generator (builtin | llm), seed
//	synth.discarded    producer: synth  consumers: control
//	                   task_id, parent_id, round, reason
//	task.synthesized   producer: synth  consumers: audit, control
//	                   task_id, parent_id, round, steps, task (FileRef, tasks),
//	                   bundle (ObjectRef), category, difficulty
//	task.audited       producer: audit  consumers: control
//	                   task_id, round, decision, total, reject_reasons,
//	                   audit (FileRef, audits)
//	pool.sealed        producer: control  consumers: control, rollout, eval
//	                   pool_version, tasks, categories, pool ([]FileRef, tasks),
//	                   excluded, task_ids
//	sft.requested      producer: control  consumers: ppo (trainer)
//	                   policy_version, data ([]FileRef, tokens), epochs,
//	                   unsolved (demonstrations left out: their verifier failed),
//	                   seed (each pass's order over them; 0: sorted)
//	sft.completed      producer: ppo (trainer)  consumers: control
//	                   policy_version, checkpoint, loss
//	rollout.requested  producer: control, eval  consumers: rollout
//	                   task_id, attempt, purpose, suite, iteration,
//	                   policy_version, seed, max_turns, bundle (ObjectRef)
//	rollout.completed  producer: rollout  consumers: reward
//	                   task_id, attempt, purpose, suite, iteration,
//	                   policy_version, turns, tokens, chunks, termination,
//	                   drift{strict_prefix, clipped_norm, text_retokened, new_chunk},
//	                   malformed_replies (omitted when 0), last_version (the
//	                   last turn's policy under episode_version latest),
//	                   trajectory, turns_ref, tokens_ref, routing_ref (FileRefs),
//	                   snapshot, bundle (ObjectRefs), sandbox, isolated,
//	                   network (registries; omitted for none), egress[]{host,
//	                   port, method, allowed, reason, bytes} (every request
//	                   through the sandbox's proxy), egress_omitted
//	reward.scored      producer: reward  consumers: control (train), eval (eval)
//	                   task_id, attempt, purpose, suite, iteration,
//	                   policy_version, reward, passed, total, source,
//	                   fallback, rewards (FileRef)
//	batch.ready        producer: control  consumers: critic
//	                   iteration, policy_version, attempts, tokens,
//	                   manifest (ObjectRef to a BatchManifest)
//	critic.updated     producer: critic  consumers: ppo
//	                   iteration, policy_version, critic_version, warmup,
//	                   warmup_steps, warmup_end (why warm-up stopped),
//	                   explained_variance, value_loss, values ([]FileRef),
//	                   manifest (the batch with value_files), checkpoint
//	policy.updated     producer: ppo  consumers: control
//	                   iteration, policy_version, previous_version (the
//	                   policy trained: the batch's sampler plus its staleness),
//	                   checkpoint, metrics (FileRef), clip_fraction,
//	                   policy_loss, logprob_gap, skipped (why no step was
//	                   taken: the new version's tensors are the old ones)
//	eval.requested     producer: control  consumers: eval
//	                   suite, policy_version, iteration (the one the
//	                   policy samples, where its rows are stored),
//	                   attempts, tasks
//	eval.completed     producer: eval  consumers: control, reports
//	                   suite, policy_version, tasks, attempts, unscored
//	                   (attempts whose rollout or reward failed), resolve_rate,
//	                   mean_reward, mean_turns, by_difficulty, by_category
//	                   (map to {attempts, resolve_rate, mean_reward}),
//	                   results ([]FileRef, eval_results)
//	run.completed      producer: control  consumers: t1 run, reports
//	                   iterations, policy_version, pool_tasks, reason
//	run.failed         producer: control  consumers: t1 run, reports
//	                   iterations, policy_version, pool_tasks, reason
//
// # Batch manifest
//
// BatchManifest (JSON, runs/<run>/batches/iter=NNNN/manifest-<sha>.json)
// lists one PPO batch for the GPU update stage: token, routing, value,
// reward and trajectory FileRefs, the schema version of each table, the
// model dimensions (vocab, layers, top_k, experts), the routing encoding
// ("packed") and numpy dtype, and chunk, token and attempt counts that
// Validate checks against the FileRefs' row counts. policy_version is the
// policy that sampled the batch; staleness (omitted when 0,
// training.max_staleness) how many versions newer the policy it trains is.
package schemas
