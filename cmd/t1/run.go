package main

import (
	"cmp"
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
		Long:  execute.RunHelp,
		Args:  cobra.NoArgs,
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
			return withInfra(cmd, cfg, local.Options{Serve: true}, true, func(in *local.Infra) error {
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
			})
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
		Long:  execute.ReplayHelp,
		Args:  cobra.NoArgs,
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
			return withInfra(cmd, cfg, local.Options{Serve: o.Continue}, false, func(in *local.Infra) error {
				if !o.Continue {
					out, err := execute.ReplayStage(cmd.Context(), in, o)
					if err != nil {
						return err
					}
					return g.emit(cmd, out, out.WriteText)
				}
				// Consumers of the branch's own: the log's shared ones, made
				// now in a data directory whose runs had consumers of their
				// own (t1 ablate), would deliver every earlier run's history
				// to this process's handlers, which redid all of its work
				// before the branch's first rollout.
				out, err := execute.Continue(cmd.Context(), cmd.ErrOrStderr(), in, o, execute.Own)
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
			})
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
		Long:  ablation.Help,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			plan, err := ablation.NewPlan(cfg, o, cmp.Or(g.configPath, "the configuration"))
			if err != nil {
				return err
			}
			return withInfra(cmd, cfg, local.Options{Serve: true}, true, func(in *local.Infra) error {
				sum, err := ablation.Execute(cmd.Context(), cmd.ErrOrStderr(), in, plan)
				if err != nil {
					return err
				}
				return g.emit(cmd, sum, sum.WriteText)
			})
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
		Long:  execute.DemoHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.infra(cmd, local.Options{Serve: true}, true, func(in *local.Infra) error {
				sum, err := execute.Demo(cmd.Context(), cmd.ErrOrStderr(), in)
				if sum == nil {
					return err
				}
				if perr := g.emit(cmd, sum, sum.WriteText); perr != nil {
					return perr
				}
				return err
			})
		},
	}
}

func workerCmd(g *globals) *cobra.Command {
	var o worker.Options
	cmd := &cobra.Command{
		Use:   "worker --stage S [--run R] [--until-idle]",
		Short: "Run one stage against the configured NATS and S3 (scale-out, cron, Slurm or Kubernetes jobs)",
		Long:  worker.Help,
		Args:  cobra.NoArgs,
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
		Long:  evaljob.Help,
		Args:  cobra.NoArgs,
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
