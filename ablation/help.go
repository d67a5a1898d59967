package ablation

// Help is what `t1 ablate` says of itself.
const Help = `Runs the configured run and then each variant of the configuration's variants list (by
default replay-off, critic-cold, reward-fraction and reward-binary) as run <run.id>-<name>, in
this process on the same infrastructure and seed, and writes a report that
shows them side by side: runs/<run.id>/ablation.md and ablation.html, in the store and under
the data directory. A variant whose settings change only what happens from an iteration on
(reward, critic, advantages, the actor update; pipeline.VariantBranch) runs as a continued branch
of the base run at the first stage it changes (t1 replay --continue at iteration 0): it shares the
base run's pool, fine-tuning and base and fine-tuned evaluations, which are the same by
construction, and re-runs only what differs. --fresh runs every variant from scratch instead.
Runs that already completed are not run again, so an interrupted ablation resumes where it
stopped. With --seeds, the base run and every variant run once per seed, as
run <run.id>-s<seed> (and <run.id>-s<seed>-<name>), each with that run seed and model seed on the
same held-out suite; the summary then shows each variant's base → SFT → RL resolve rate as the
mean and the lowest and highest over the seeds, and each step's gain within each seed beside the
attempts it changed: the held-out attempts (the same task, attempt index and sampling seed) solved
only after the step and only before it, over every seed, with the exact sign test's p-value for
that split. --base-only runs no variant: the base run's
spread over the seeds alone. --model-seed N starts every seed from the initial model of model seed N instead
of its own, as every seed of a post-training run starts from one pretrained checkpoint; with
stages.control.pool_seed and stages.control.sft_shuffle the seeds then differ only in what
training draws: the fine-tuning's order, the iterations' tasks and every sample. --rl-seeds instead runs RL again at each seed from each base run's
one fine-tuned policy, as run <base run>-rl<seed> (a continued branch at sft with that run seed;
the base run is its own seed's): its pool, fine-tuning and base and fine-tuned evaluations are the
base run's, so the spread shown per base run is RL's alone, the one an RL paper reports over its
seeds. With --seeds too, every seed's base run gets its RL seeds. The
runs run at once (--jobs): first every base run, then every branch, each run with consumers of
its own (<stage>_<run>), since most of a run's time is spent waiting on sandboxes and one run
keeps about half of two cores busy.`
