package main

import (
	"cmp"
	"errors"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/ablation"
	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/evaljob"
	"github.com/t1pipe/t1/execute"
	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/known"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/worker"
)

func runCmd(g *globals) *cobra.Command {
	var noStages bool
	cmd := leaf("run [--no-stages]", "Run the whole pipeline in one process on the configured (by default embedded) NATS and S3", execute.RunHelp, cobra.NoArgs,
		g.configured(nil, func(cmd *cobra.Command, _ []string, cfg config.Config) error {
			sum, err := execute.Start(cmd.Context(), cmd.ErrOrStderr(), cfg, !noStages)
			// A stopped run prints nothing but its JSON summary.
			if sum != nil && (g.json || !errors.Is(err, exit.ErrStopped)) {
				if perr := g.show(cmd, sum, nil); perr != nil {
					return perr
				}
			}
			return err
		}))
	cmd.Flags().BoolVar(&noStages, "no-stages", false, "start and follow the run only; t1 worker processes run its stages")
	return cmd
}

func replayCmd(g *globals) *cobra.Command {
	var since string
	var o pipeline.BranchOptions
	check := func() error {
		if o.Stage == "" || o.Into == "" {
			return exit.Configf("--stage and --into are required")
		}
		return known.Name("stage", "stages", o.Stage, worker.Stages)
	}
	cmd := leaf("replay --stage S --run R --into B [--from-seq N | --since T | --continue [--iteration I]] [--set key=value]...",
		"Re-run one stage over a run's past inputs into a branch, leaving the original untouched; --continue carries on from there", execute.ReplayHelp, cobra.NoArgs,
		g.configured(check, func(cmd *cobra.Command, _ []string, cfg config.Config) error {
			out, err := execute.Branch(cmd.Context(), cmd.ErrOrStderr(), cfg, o, since)
			if out != nil {
				if perr := g.emit(cmd, out, plain(out.WriteResult)); perr != nil {
					return perr
				}
			}
			return err
		}))
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
	cmd := leaf("ablate [--variants a,b] [--seeds 1,2,3 [--model-seed N] [--base-only] | --rl-seeds 1,2,3] [--jobs N] [--fresh]",
		"Run the base run and its ablation variants on one seed and compare them in one report", ablation.Help, cobra.NoArgs,
		g.configured(nil, func(cmd *cobra.Command, _ []string, cfg config.Config) error {
			plan, err := ablation.NewPlan(cfg, o, cmp.Or(g.configPath, "the configuration"))
			if err != nil {
				return err
			}
			return withInfra(cmd, cfg, local.Options{Serve: true}, true, func(in *local.Infra) error {
				sum, err := ablation.Execute(cmd.Context(), cmd.ErrOrStderr(), in, plan)
				return g.show(cmd, sum, err)
			})
		}))
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
	return leaf("demo", "Run the two-stage smoke pipeline (producer and verifier) on the configured NATS and S3", execute.DemoHelp, cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return g.infra(cmd, local.Options{Serve: true}, true, func(in *local.Infra) error {
				sum, err := execute.Demo(cmd.Context(), cmd.ErrOrStderr(), in)
				if sum == nil {
					return err
				}
				return cmp.Or(g.show(cmd, sum, nil), err)
			})
		})
}

func workerCmd(g *globals) *cobra.Command {
	var o worker.Options
	cmd := leaf("worker --stage S [--run R] [--until-idle]", "Run one stage against the configured NATS and S3 (scale-out, cron, Slurm or Kubernetes jobs)", worker.Help, cobra.NoArgs,
		g.configured(func() error { return o.Check() }, func(cmd *cobra.Command, _ []string, cfg config.Config) error {
			sum, err := worker.Run(cmd.Context(), cmd.ErrOrStderr(), cfg, o)
			if g.json {
				return cmp.Or(err, printJSON(cmd, sum))
			}
			return err
		}))
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
	cmd := leaf("eval --run R --policy vN --suite NAME|DIR [--attempts k]", "Evaluate one policy version of a run on a suite, as a job of its own", evaljob.Help, cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			sum, err := evaljob.Run(cmd.Context(), cmd.ErrOrStderr(), g.load, o)
			if g.json {
				return cmp.Or(err, printJSON(cmd, sum))
			} else if err == nil {
				sum.WriteText(cmd.OutOrStdout())
			}
			return err
		})
	f := cmd.Flags()
	f.StringVar(&o.Run, "run", "", "the run whose policy is evaluated and which receives the results")
	f.StringVar(&o.Policy, "policy", "", "policy version: v0 (the initial policy), v1, … or a bare number")
	f.StringVar(&o.Suite, "suite", "", "the configured suite's name, or a directory of Harbor tasks")
	f.IntVar(&o.Attempts, "attempts", 0, "attempts per task (default: stages.eval.attempts)")
	return cmd
}
