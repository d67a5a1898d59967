// Package checkpoint is where the update stages find the checkpoints
// they start from and put the ones a trainer reports.
//
// # Refs and lineage
//
// A checkpoint is a Hugging Face model directory stored under a prefix
// (keys.Policy, keys.Critic), its weights written last so that their
// presence marks it complete. Its claim check (Ref) is the prefix with
// the size and SHA-256 of model.safetensors, or of an external model's
// shard index. A branch stores only the versions it makes: EnsurePolicy
// and LatestCritic resolve a version through the run's lineage (the run,
// then its ancestors, nearest first), and EnsurePolicy creates policy
// version 0 from the initial checkpoint when no run of the lineage has it
// (EnsureExternalPolicy when that checkpoint is of an external
// architecture). Load loads a reference-model checkpoint.
//
// # Adoption
//
// A trainer reports where its new checkpoint is: an object-store prefix,
// or an absolute local directory an external trainer wrote. Adopt makes
// it the one at the job's prefix: it must load (or, for an external
// architecture t1 never runs, have a config.json whose dimensions parse,
// a tokenizer t1 reads with no more ids than its vocabulary, and weights:
// model.safetensors or an index whose every shard is there) and fit the
// batch (PolicyFits, CriticFits); it is stored under the prefix when it
// is elsewhere, file by file, the weights last. CheckInitial applies the
// same checks to a run's initial directory before the run starts.
//
// # Export
//
// An engine loads a checkpoint from a local directory: Export copies a
// stored one there, LoadTokenizer reads only its tokenizer (what sampling
// from a remote engine needs), and ExportDir fills a directory beside the
// target and renames it into place, so an engine never reads half of one.
//
// A checkpoint that is missing, does not load or does not fit is a
// batch.BadInputError; a store that cannot be reached is returned as is.
package checkpoint
