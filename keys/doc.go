// Package keys builds the key of every object a run stores, and so is the
// one place that holds the object layout (ARCHITECTURE.md §4). Everything
// of a run lives under runs/<run>/ in one bucket; <run> is a run id
// (ValidRun), also the run's token in its event subjects (t1.<run>.<type>).
// Events never carry bytes, only claim checks naming these keys
// (schemas.FileRef, schemas.ObjectRef), so a key, once announced, must
// keep naming the same bytes.
//
// # Layout
//
//	key                                         built by        stored             format
//
//	runs/<run>/
//	├── <table>/<dir>-NNNN/part-<h>.parquet     TableObject     content-addressed  Parquet
//	├── compactions/<table>/<dir>-NNNN/
//	│   └── record-<h>.json                     CompactionRecord content-addressed JSON
//	├── batches/iter=NNNN/manifest-<h>.json     Manifest        content-addressed  JSON
//	├── attempts/<attempt>.json                 AttemptMarker   store-once         JSON
//	├── attempts/<attempt>/turn-NNNNN.json      AttemptTurn     store-once         JSON
//	├── snapshots/<attempt>.tar                 Snapshot        store-once         tar layer
//	├── bundles/<task>.tar.gz                   Bundle          store-once         gzip tar
//	├── lineage/<task>.json                     Lineage         store-once         JSON
//	├── synth/
//	│   └── llm/<task>.json                     SynthReply      store-once         JSON
//	├── policy/vNNNNNN/                         Policy          a checkpoint:
//	│   ├── config.json                                         put                JSON
//	│   ├── tokenizer.json                                      put                JSON
//	│   ├── optimizer.safetensors                               put, optional      safetensors
//	│   └── model.safetensors                                   put, last          safetensors
//	├── critic/vNNNNNN/                         Critic          a checkpoint, as policy/
//	├── critic/fresh-vNNNNNN/                   FreshCritic     a checkpoint, as policy/ (put: seeded, the same bytes each time)
//	├── training/iter=NNNN/policy-vNNNNNN.json  TrainingReport  store-once         JSON
//	├── blobs/item-NNNNN.bin                    Blob            put                bytes
//	├── report.md                               Report          put                Markdown
//	├── report.html                             ReportHTML      put                HTML
//	├── ablation.md                             Ablation        put                Markdown
//	└── ablation.html                           AblationHTML    put                HTML
//
//	images/layers/<layer>.tar                   ImageLayer      store-once         tar layer (OCI whiteouts)
//
//	<layer>    an image layer's content address (package image): shared by every run
//	<h>        the first 32 hex digits of the object's SHA-256 (for tables, see below)
//	<attempt>  iter=NNNN/<purpose>[-<suite>]/v<policy version>/<task>/a<attempt>  (Attempt.Name)
//	<table>    tasks, audits (dir round: column round); trajectories, turns, tokens,
//	           routing, rewards, values, metrics, eval_results (dir iter: column iteration)
//	<dir>-NNNN a partition: NNNN is the value of the table's partition column in
//	           every row. Not <dir>=NNNN: a hive reader would take a column from
//	           the path, of a type of its own, beside or instead of the row's
//
// Content-addressed: the key is derived from the bytes and the object is
// put if absent, so identical content gives the identical object and a
// rewrite is a no-op. Store-once: the key is derived from the work, not
// its result, which need not be deterministic; the first writer's object
// stands and a later writer announces it instead of its own
// (store.PutOnce, store.PutOnceSum). Put: a plain put that may replace
// the object.
//
// # Objects
//
// Table objects (schemas.Writer.Commit): one Parquet file of rows of one
// table; <h> hashes the file, or for a table with wall-clock columns its
// rows without them, so a rerun names the same objects. tasks: synth as it
// keeps a task (task.synthesized), t1 tasks import. audits: audit
// (task.audited). trajectories, turns, tokens, routing: rollout, per
// attempt, before its marker. rewards: reward (reward.scored). values:
// critic (critic.updated). metrics: ppo (policy.updated). eval_results:
// eval (eval.completed).
//
// compactions/: control, once a partition is sealed (schemas.Compact):
// which objects of the partition one compacted object took in and where
// their rows start, stored before the compacted object and before the
// sources are deleted, so their claim checks stay readable.
//
// batches/: the batch manifest (schemas.BatchManifest) control writes for
// batch.ready, and the copy listing value_files the critic writes for
// critic.updated.
//
// attempts/: rollout, once the attempt's tables and snapshot are stored;
// the rollout.completed payload, which a redelivered rollout.requested
// announces again instead of playing a second episode. Under
// stages.rollout.episode_version latest, rollout stores before each turn
// which policy version samples it ({"policy_version": V}); a redelivered
// attempt plays its turns on the versions stored, so it samples what the
// first delivery did.
//
// snapshots/: rollout, when an attempt's episode ends; the sandbox's
// changes as a tar layer with OCI-style whiteouts (infra/sandbox), which
// reward restores before it runs the verifier.
//
// bundles/: the Harbor task directory, deterministically packed
// (harbor.Task.BundleBytes, trial.PutBundle): synth as it keeps a task,
// eval as it materialises a suite, t1 tasks import.
//
// lineage/: synth, as it keeps a task: where the task came from (parent,
// root, round, steps, generator; synth.Lineage). A seed's lineage is read
// when it is grown.
//
// synth/llm/: synth's llm generator, before it judges a candidate: the
// model's reply, so a redelivered candidate is judged on the same reply.
//
// policy/ and critic/: checkpoints (moe.Checkpoint.Save; the file names
// are moe's), one prefix per version, the prefix itself being the key of
// its claim check, whose size and SHA-256 are the weights file's. policy
// v000000 is created from the configured initial checkpoint when no run
// of the lineage has it (checkpoint.EnsurePolicy); ppo writes v<V+1> for policy.updated and sft for
// sft.completed; the critic writes critic v<iteration+1> for
// critic.updated. The weights go last, so their presence marks a complete
// checkpoint; an update is redone, and its checkpoint rewritten, only
// until its event is announced (for ppo: its training report is stored).
// A branch (t1 replay) stores only the versions it makes: the others it
// reads from the nearest run of its lineage that stores them, its parent's
// keys (engine.Log.Lineage, checkpoint.EnsurePolicy, checkpoint.LatestCritic).
//
// training/: ppo, after the new policy and its metrics row are stored: the
// trainer's full report (trainer.TrainingReport), which marks the update
// done; a redelivered critic.updated announces it again.
//
// blobs/: the demo pipeline (stages/demo): bytes that are a pure function
// of the seed and the index.
//
// report.md, report.html: t1 run when the run ends, t1 report on demand
// (t1 demo writes its own report.md). ablation.md, ablation.html: t1
// ablate, on its base run.
package keys
