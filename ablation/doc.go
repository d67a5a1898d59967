// Package ablation plans, runs and compares an ablation (`t1 ablate`):
// the base run beside each variant of its configuration, optionally over
// several seeds, and the statistics that judge them.
//
// A variant whose settings change only what happens from an iteration on
// (pipeline.VariantBranch) runs as a continued branch of its base run at
// the first stage it changes, sharing the base run's pool, fine-tuning
// and early evaluations, which are the same by construction. Run ids are
// the contract between invocations: <run.id>[-m<model seed>]-s<seed> for
// a seed's base run, <base>-<variant> for a variant, <base>-rl<seed> for
// RL run again from a base run's fine-tuned policy; a run that completed
// is not run again, so an interrupted ablation resumes where it stopped.
//
// With several seeds, Spread is each variant's recipe table over the
// seeds, and Gain each step of the recipe taken within each seed and then
// over the seeds, with the held-out attempts it changed paired over every
// seed and the sign test's p-value for that split (report.Paired).
package ablation
