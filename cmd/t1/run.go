package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/ablation"
	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/evaljob"
	"github.com/t1pipe/t1/execute"
	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/worker"
)

func runCmd(g *globals) *cobra.Command {
	var noStages bool
	cmd := &cobra.Command{
		Use:   "run [--no-stages]",
		Short: "Run the whole pipeline in one process on the configured (by default embedded) NATS and S3",
		Long: `Runs every stage in this process — control, synth, audit, rollout, reward, critic, ppo and
eval — on embedded NATS and S3 unless the configuration points elsewhere, sampling from the
configured engine (inference.backend: the in-process reference MoE, or an SGLang or vLLM
server, which must answer at inference.url before anything starts and is made to load each
new policy version). Progress goes to stderr; a summary and the report's path go to stdout.
Interrupting stops cleanly; running again with the same configuration resumes from the log.
With --no-stages this process runs no stage: it starts the run and follows it to its end while
the stages run elsewhere as ` + "`t1 worker --stage S`" + ` processes on the same NATS and S3 (for
example beside ` + "`t1 infra up`" + ` on the data directory).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if ck := cfg.Inference.Checkpoint; ck != "" && inference.IsLocalCheckpoint(ck) {
				// An initial checkpoint the exec trainer could not start
				// from (no weights, a shard missing) fails the run now, not
				// when its first rollout stores it as version 0.
				dir, err := filepath.Abs(ck)
				if err != nil {
					return err
				}
				if err := checkpoint.CheckInitial(ctx, dir); err != nil {
					return err
				}
			}
			at := execute.Elsewhere
			if !noStages {
				// An engine that is not there fails the run now, not at
				// its first rollout after synthesis and audit.
				if err := inference.Probe(ctx, pipeline.InferenceOptions(cfg.Inference)); err != nil {
					return exit.InfraError(err)
				}
				at = execute.Shared
			}
			in, err := connect(ctx, cfg, local.Options{Serve: true})
			if err != nil {
				return err
			}
			defer in.Close()
			sum, err := execute.Run(ctx, cmd.ErrOrStderr(), in, at)
			if err != nil {
				return err
			}
			if sum == nil {
				if g.json {
					if err := printJSON(cmd, execute.Summary{Run: cfg.Run.ID, Status: "stopped", ExitCode: exit.Stopped}); err != nil {
						return err
					}
				}
				return exit.ErrStopped
			}
			if err := g.emit(cmd, sum, sum.WriteText); err != nil {
				return err
			}
			if sum.Status == "failed" {
				return exit.With(exit.Failed, fmt.Errorf("run %s failed: %s (t1 events list --run %s --type run.failed)", sum.Run, sum.Reason, sum.Run))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&noStages, "no-stages", false, "start and follow the run only; t1 worker processes run its stages")
	return cmd
}

func replayCmd(g *globals) *cobra.Command {
	var since string
	var o pipeline.BranchOptions
	cmd := &cobra.Command{
		Use:   "replay --stage S --run R --into B [--from-seq N | --since T | --continue [--iteration I]] [--set key=value]...",
		Short: "Re-run one stage over a run's past inputs into a branch, leaving the original untouched; --continue carries on from there",
		Long: `Opens run B as a branch of run R and hands the inputs of stage S in R to the stage as if they
belonged to B; what the stage emits goes into B. For example, re-score every attempt of a run
with a fixed verifier without rolling anything out again:

    t1 replay --stage reward --run main --into main-rescored

B's run.started names its parent and branch point and keeps what R froze (seed, model, iterations,
reward scale, pool); --set reward_scale=2, --set seed=9 or --set iterations=4 change one, and the
branch records and reports the change beside R's value. The stage reads what R's events point at
(bundles, snapshots, checkpoints, manifests) and writes under runs/B/; R is never written to.

Without --continue the stage re-runs every input of R (from --from-seq or --since, else from the
start) and nothing else runs: B's status is "replayed". With --continue the branch is R up to
iteration I (default 0) of stage S and a run of its own from there: S re-runs its inputs of that
iteration (sft: the fine-tuning before the first; eval: the evaluations from iteration I's policy
on), then every stage runs in this process until B completes, on consumers of B's own
(<stage>_<B>), as t1 ablate runs its branches — re-score, retrain and evaluate in the branch:

    t1 replay --stage reward --run main --into main-fixed --continue

S is one of rollout, reward, critic, ppo, sft or eval (without --continue also control, synth or
audit). Replaying into B again with the same options resumes it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Stage == "" || o.Into == "" {
				return fmt.Errorf("--stage and --into are required")
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			if o.Parent == "" {
				o.Parent = cfg.Run.ID
			}
			switch {
			case o.From.Seq > 0 && since != "":
				return fmt.Errorf("--from-seq and --since exclude each other")
			case since != "":
				if o.From.Time, err = time.Parse(time.RFC3339, since); err != nil {
					return fmt.Errorf("--since: want an RFC 3339 time such as 2026-11-29T20:00:00Z: %w", err)
				}
			}
			ctx := cmd.Context()
			in, err := local.Open(ctx, cfg, local.Options{Serve: o.Continue})
			if err != nil {
				return err
			}
			defer in.Close()
			if !o.Continue {
				p, err := pipeline.Build(cfg, in.Log, in.Store, pipeline.WithWorkDir(in.WorkDir))
				if err != nil {
					return err
				}
				res, err := p.Branch(ctx, in.Log, o)
				if err != nil {
					return err
				}
				out := execute.Replay{BranchResult: res, Stage: o.Stage, Run: o.Parent, Into: o.Into}
				return g.emit(cmd, out, out.WriteText)
			}
			// Consumers of the branch's own: the log's shared ones, made
			// now in a data directory whose runs had consumers of their
			// own (t1 ablate), would deliver every earlier run's history
			// to this process's handlers, which redid all of its work
			// before the branch's first rollout.
			out, err := execute.Continue(ctx, cmd.ErrOrStderr(), in, o, execute.Own)
			if err != nil || out.Branch == nil {
				return err
			}
			if err := g.emit(cmd, out, out.Branch.WriteText); err != nil {
				return err
			}
			if out.Branch.Status == "failed" {
				return fmt.Errorf("branch %s failed: %s (t1 events list --run %s --type run.failed)", o.Into, out.Branch.Reason, o.Into)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Stage, "stage", "", "stage to re-run: rollout, reward, critic, ppo, sft or eval (without --continue also control, synth or audit)")
	f.StringVar(&o.Parent, "run", "", "source run (default: the config's run.id)")
	f.StringVar(&o.Into, "into", "", "the branch: a new run id the stage's outputs go to")
	f.Uint64Var(&o.From.Seq, "from-seq", 0, "without --continue: start at this stream sequence")
	f.StringVar(&since, "since", "", "without --continue: start at this time (RFC 3339)")
	f.BoolVar(&o.Continue, "continue", false, "after the stage, run the branch's downstream stages to its end")
	f.IntVar(&o.Iteration, "iteration", 0, "with --continue: the source run's iteration the branch re-runs the stage at")
	f.StringToStringVar(&o.Set, "set", nil, "change a setting the source run froze: "+strings.Join(pipeline.OverridableSettings(), ", ")+" (repeatable)")
	return cmd
}

func ablateCmd(g *globals) *cobra.Command {
	var o ablation.Options
	cmd := &cobra.Command{
		Use:   "ablate [--variants a,b] [--seeds 1,2,3 [--model-seed N] [--base-only] | --rl-seeds 1,2,3] [--jobs N] [--fresh]",
		Short: "Run the base run and its ablation variants on one seed and compare them in one report",
		Long: `Runs the configured run and then each variant of the configuration's variants list (by
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
keeps about half of two cores busy.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			plan, err := ablation.NewPlan(cfg, o, g.configName())
			if err != nil {
				return err
			}
			in, err := connect(cmd.Context(), cfg, local.Options{Serve: true})
			if err != nil {
				return err
			}
			defer in.Close()
			sum, err := ablation.Execute(cmd.Context(), cmd.ErrOrStderr(), in, plan)
			if err != nil {
				return err
			}
			return g.emit(cmd, sum, sum.WriteText)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Variants, "variants", nil, "variants to run, by name (default: every configured variant)")
	f.BoolVar(&o.Fresh, "fresh", false, "run every variant from scratch, as a run of its own, instead of as a branch of its base run")
	f.BoolVar(&o.BaseOnly, "base-only", false, "with --seeds, run only the base configuration, for its spread over the seeds")
	f.IntVar(&o.Jobs, "jobs", 0, "with --seeds or --rl-seeds, run this many runs at once (default: every seed, at most 4)")
	f.UintSliceVar(&o.RLSeeds, "rl-seeds", nil, "train each base run's fine-tuned policy again once per seed (a base run is its own seed's), and show RL's spread over them")
	f.Uint64Var(&o.ModelSeed, "model-seed", 0, "with --seeds, start every seed from the initial model of this model seed instead of its own")
	f.UintSliceVar(&o.Seeds, "seeds", nil, "run the base and every variant once per seed, and show the spread (default: the configuration's seed only)")
	return cmd
}

func demoCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Run the two-stage smoke pipeline (producer and verifier) on the configured NATS and S3",
		Long: "A producer writes seeded blobs to the object store with one claim-check event each; a verifier\n" +
			"reads every blob back and checks its hash. It exercises the engine, bus and store alone, with\n" +
			"live progress and a summary. Interrupting stops cleanly; running again resumes.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			in, err := connect(cmd.Context(), cfg, local.Options{Serve: true})
			if err != nil {
				return err
			}
			defer in.Close()
			sum, err := execute.Demo(cmd.Context(), cmd.ErrOrStderr(), in)
			if sum == nil {
				return err
			}
			if perr := g.emit(cmd, sum, sum.WriteText); perr != nil {
				return perr
			}
			return err
		},
	}
}

func workerCmd(g *globals) *cobra.Command {
	var o worker.Options
	cmd := &cobra.Command{
		Use:   "worker --stage S [--run R] [--until-idle]",
		Short: "Run one stage against the configured NATS and S3 (scale-out, cron, Slurm or Kubernetes jobs)",
		Long: `Runs a single stage's consumer. Any number of workers of one stage share its work through
its durable consumer, each running engine.concurrency handlers, with at most
engine.max_ack_pending events of the stage out at once across all of them. A stage that must
run once per run (control, eval) is leased: the worker first takes the stage's lease (a
JetStream KV entry renewed while it runs, expiring --lease-ttl after a crash), and a second one
exits 4 naming the holder. With --run R the worker runs that stage for run R alone, through a
consumer of R's events, beside other processes that run it for other runs (t1 run, t1 eval,
workers of other runs); without it, it runs the stage for every run and is refused while any
process runs it for one run, and the reverse. --exclusive leases any stage over every run;
--no-lease skips the lease.

--until-idle makes the worker exit 0 once nothing of the stage is pending or in flight for
--idle, for batch schedulers. --json prints a summary when the worker ends. Exit codes are
README's: 0 idle or stopped, 1 failed, 2 configuration, 3 NATS or S3 lost, 4 leased elsewhere,
5 interrupted before --until-idle found the stage idle.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Check(); err != nil {
				return err
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			sum, err := worker.Run(cmd.Context(), cmd.ErrOrStderr(), cfg, o)
			if g.json {
				if perr := printJSON(cmd, sum); perr != nil && err == nil {
					return perr
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Stage, "stage", "", "stage to run: control, synth, audit, rollout, reward, critic, ppo, sft or eval")
	f.StringVar(&o.Run, "run", "", "with control or eval: run the stage for this run alone (default: for every run)")
	f.BoolVar(&o.UntilIdle, "until-idle", false, "exit 0 once no event is pending or in flight")
	f.DurationVar(&o.Idle, "idle", 10*time.Second, "with --until-idle, how long the stage must stay idle")
	f.BoolVar(&o.NoLease, "no-lease", false, "take no lease, even for control or eval (their folds then break if two workers run)")
	f.BoolVar(&o.Exclusive, "exclusive", false, "lease the stage whatever it is, so this worker is its only one")
	f.DurationVar(&o.LeaseTTL, "lease-ttl", engine.DefaultLeaseTTL, "how long a crashed worker's lease lasts (1s to 10m)")
	return cmd
}

func evalCmd(g *globals) *cobra.Command {
	var o evaljob.Options
	cmd := &cobra.Command{
		Use:   "eval --run R --policy vN --suite NAME|DIR [--attempts k]",
		Short: "Evaluate one policy version of a run on a suite, as a job of its own",
		Long: `Evaluates policy version N of run R on a suite: the configured one by its name
(stages.eval.suite), or a directory of Harbor tasks (a task, or a dataset root of them).
The job writes eval_results and eval.completed under the run, as the run's own evaluations
do, running the eval, rollout and reward stages in this process for this evaluation alone:
on consumers of its own (<stage>_R_<id>, <id> beginning the id of its eval.requested), which
start at that event and pass over every event of R that does not descend from it (R's
training, its other evaluations); it deletes them once the evaluation has completed or
failed. Where the log has shared consumers of rollout and reward (a t1 run made them), it
works on those instead, beside any workers on them, so that each attempt runs once.

It is idempotent: an evaluation the log already completed for the same run, suite and
version is printed, not redone, and the job exits 0. Interrupted, it resumes where it
stopped when run again. It holds the lease of the eval stage for run R while it works, so it
exits 4 while another process runs eval for R (t1 run of R, t1 eval --run R, t1 worker --stage
eval with --run R or for every run), and runs beside those of other runs. Exit codes: 0 done,
1 the evaluation failed, 2 a bad run, version, suite or attempts, 3 NATS or S3 lost,
4 eval of R runs elsewhere, 5 interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sum, err := evaljob.Run(cmd.Context(), cmd.ErrOrStderr(), g.load, o)
			if g.json {
				if perr := printJSON(cmd, sum); perr != nil && err == nil {
					return perr
				}
			} else if err == nil {
				sum.WriteText(cmd.OutOrStdout())
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Run, "run", "", "the run whose policy is evaluated and which receives the results")
	f.StringVar(&o.Policy, "policy", "", "policy version: v0 (the initial policy), v1, … or a bare number")
	f.StringVar(&o.Suite, "suite", "", "the configured suite's name, or a directory of Harbor tasks")
	f.IntVar(&o.Attempts, "attempts", 0, "attempts per task (default: stages.eval.attempts)")
	return cmd
}
