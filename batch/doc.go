// Package batch is the training data path: a PPO batch as the update
// stages and trainers read it, and the one classification of input a
// retry cannot fix.
//
// # The manifest
//
// A batch is a schemas.BatchManifest stored content-addressed under
// runs/<run>/batches/: the run, iteration and policy version it was
// sampled at, the sampling model's dimensions, and claim checks
// (schemas.FileRef: key, table, schema version, rows, bytes, SHA-256) of
// its Parquet objects — tokens, routing (re-encoded as packed by Write, so
// a GPU trainer views the ids as [T, L, k] without decoding), rewards,
// trajectories and, once the critic has run, values. Write stores the
// objects and the manifest; WithValues stores the critic's values and a
// copy of the manifest that lists them, leaving the first manifest as it
// was, so the batch the critic read and the batch PPO reads are both
// addressable.
//
// # Reading
//
// ReadManifest fetches the manifest an event's claim check names and
// validates it; Load fetches every object it lists and checks each
// against its reference (size, SHA-256, table, schema version, rows)
// before decoding it. Load then joins the tables per chunk
// (task, attempt, chunk): token ids, log-probs and loss mask of equal
// length, the routing record of every token in the manifest's model
// dimensions, at most one value row as long as its chunk, and one reward
// per attempt; chunks of an attempt must run 0..n-1. The result is a
// Batch, attempts in (task, attempt) order. An update stage loads its
// batch once and hands the Batch on (trainer.ActorJob.Batch,
// trainer.CriticJob.Batch); only an external trainer reads the objects
// again, itself, by the exec protocol.
//
// ValueRows turns a critic's per-chunk figures into the values table's
// rows, checked against the batch's chunks.
//
// # Bad input
//
// A BadInputError (Bad, IsBad) is a failure of the input itself: a
// manifest or object that is missing or does not match its claim check,
// tables that disagree, a checkpoint that does not load or fit, an
// external trainer that exits non-zero or reports nonsense. A retry
// cannot help, so the stages fail the event (engine.Permanent). A store
// failing mid-read is not one: it is returned as it is and retried.
package batch
