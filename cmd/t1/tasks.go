package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/episode"
	"github.com/t1pipe/t1/harbor/atif"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/known"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/trial"
)

// tasksCmd is the parent of every command that works on Harbor task
// directories and bundles.
func tasksCmd(g *globals) *cobra.Command {
	return group("tasks", "Work with Harbor / Terminal-Bench task directories", "",
		tasksValidateCmd(g), tasksCheckCmd(g), tasksImportCmd(g), tasksExportCmd(g))
}

func tasksValidateCmd(g *globals) *cobra.Command {
	return leaf("validate DIR...", "Load and check task directories; exit non-zero if any is invalid", trial.ValidateHelp, cobra.MinimumNArgs(1),
		func(cmd *cobra.Command, args []string) error {
			checks, bad := trial.ValidateAll(args)
			return cmp.Or(g.emit(cmd, checks, plain(func(w io.Writer) { trial.WriteValidations(w, checks) })), bad)
		})
}

func tasksCheckCmd(g *globals) *cobra.Command {
	var backend, offline string
	var scale float64
	var noOp bool
	cmd := leaf("check DIR...", "Run each task's reference solution and verifier in a fresh sandbox", trial.CheckHelp, cobra.MinimumNArgs(1),
		g.configured(nil, func(cmd *cobra.Command, args []string, cfg config.Config) error {
			opt, err := cfg.Sandbox.TrialOptions(backend)
			if err != nil {
				return err
			}
			rf, err := verifier.NewRewardFunc(verifier.ModeCount, scale)
			if err != nil {
				return err
			}
			opt.Offline = trial.Offline(offline)
			results, failed := trial.CheckAll(cmd.Context(), args, opt, rf, noOp)
			return cmp.Or(g.emit(cmd, results, plain(func(w io.Writer) { trial.WriteChecks(w, results) })), failed)
		}))
	f := cmd.Flags()
	f.StringVar(&backend, "backend", "", "sandbox backend: auto, bwrap or process (default: the config's sandbox.backend)")
	f.StringVar(&offline, "offline", string(trial.OfflineAuto), "answer test.sh's network installers with offline stand-ins: auto (when test.sh fetches tools), always or never")
	f.Float64Var(&scale, "scale", 1, "reward per passed assertion")
	f.BoolVar(&noOp, "no-op", true, "also verify the untouched environment and warn of tests that pass there")
	return cmd
}

func tasksImportCmd(g *globals) *cobra.Command {
	var run string
	cmd := leaf("import DIR...", "Validate task directories and store their bundles and tasks rows in a run", trial.ImportHelp, cobra.MinimumNArgs(1),
		g.configured(nil, func(cmd *cobra.Command, args []string, cfg config.Config) error {
			dirs, err := trial.AbsDirs(args)
			if err != nil {
				return err
			}
			return withInfra(cmd, cfg, local.Options{}, false, func(in *local.Infra) error {
				results, bad := trial.ImportAll(cmd.Context(), in.Store, cmp.Or(run, cfg.Run.ID), dirs)
				return cmp.Or(g.emit(cmd, results, plain(func(w io.Writer) { trial.WriteImports(w, results) })), bad)
			})
		}))
	cmd.Flags().StringVar(&run, "run", "", "run to import into (default: the config's run.id)")
	return cmd
}

func tasksExportCmd(g *globals) *cobra.Command {
	var run, out string
	cmd := leaf("export [TASK...] --out DIR", "Write a run's tasks (all, or the named ones) as Harbor task directories", "", nil,
		g.configured(required("--out", &out), func(cmd *cobra.Command, args []string, cfg config.Config) error {
			// The embedded S3 gateway moves the working directory.
			dir, err := filepath.Abs(out)
			if err != nil {
				return err
			}
			return withInfra(cmd, cfg, local.Options{}, false, func(in *local.Infra) error {
				var dirs []string
				if err := known.Run(cmd.Context(), in.Log, in.Store, cmp.Or(run, cfg.Run.ID)); err != nil {
					return err
				}
				err := trial.Export(cmd.Context(), in.Store, cmp.Or(run, cfg.Run.ID), args, dir, func(d string) { dirs = append(dirs, d) })
				return cmp.Or(err, g.emit(cmd, dirs, plain(func(w io.Writer) { fmt.Fprint(w, lines(dirs)) })))
			})
		}))
	cmd.Flags().StringVar(&run, "run", "", "run to export from (default: the config's run.id)")
	cmd.Flags().StringVar(&out, "out", "", "directory to write the task directories into")
	return cmd
}

func rolloutCmd(g *globals) *cobra.Command {
	var o episode.Options
	cmd := leaf("rollout --task DIR", "Play one episode of a task and print the transcript", episode.Help, cobra.NoArgs,
		g.configured(required("--task", &o.Task), func(cmd *cobra.Command, _ []string, cfg config.Config) error {
			o.JSON = g.json
			return episode.Play(cmd.Context(), cmd.OutOrStdout(), cfg, o)
		}))
	f := cmd.Flags()
	f.StringVar(&o.Task, "task", "", "Harbor task directory")
	f.StringVar(&o.Policy, "policy", "config", "config (the inference section) or oracle (replay the reference solution)")
	f.StringVar(&o.Backend, "backend", "", "sandbox backend: auto, bwrap or process (default: the config's)")
	f.IntVar(&o.MaxTurns, "max-turns", 300, "turn limit")
	f.IntVar(&o.Context, "context", 0, "context in tokens (default: the model's; see above)")
	f.Uint64Var(&o.Seed, "seed", 1, "sampling seed")
	f.BoolVar(&o.Verify, "verify", true, "run the verifier on the final state")
	f.StringVar(&o.Rows, "rows", "", "write the attempt's table rows (tokens, routing, turns, trajectory), as a rollout stores them, to this JSON file")
	return cmd
}

func exportCmd(g *globals) *cobra.Command {
	var run, out, purpose string
	atifCmd := leaf("atif --run R --out DIR", "Write every attempt of a run as Harbor jobs and trials with ATIF trajectories ("+atif.Version+")", atif.ExportHelp, cobra.NoArgs,
		g.configured(required("--out", &out), func(cmd *cobra.Command, _ []string, cfg config.Config) error {
			dir, err := filepath.Abs(out)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			// Replies are read as the run's harness read them: with the
			// configured action format.
			format, err := cfg.Stages.Rollout.Config().Format()
			if err != nil {
				return err
			}
			return withInfra(cmd, cfg, local.Options{}, false, func(in *local.Infra) error {
				if err := known.Run(cmd.Context(), in.Log, in.Store, cmp.Or(run, cfg.Run.ID)); err != nil {
					return err
				}
				wr, err := atif.WriteRun(cmd.Context(), in.Log, in.Store, cmp.Or(run, cfg.Run.ID), purpose, format, cfg.Stages.Rollout.SystemPrompt, dir)
				return g.show(cmd, wr, err)
			})
		}))
	atifCmd.Flags().StringVar(&run, "run", "", "run to export (default: the config's run.id)")
	atifCmd.Flags().StringVar(&out, "out", "", "directory for the Harbor jobs")
	atifCmd.Flags().StringVar(&purpose, "purpose", "", "only train or only eval attempts")
	return group("export", "Write a run's data in other formats", "", atifCmd)
}

// lines is each of items on a line of its own.
func lines(items []string) string {
	var out string
	for _, s := range items {
		out += s + "\n"
	}
	return out
}
