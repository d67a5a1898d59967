package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/episode"
	"github.com/t1pipe/t1/harbor/atif"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/trial"
)

// tasksCmd is the parent of every command that works on Harbor task
// directories and bundles.
func tasksCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tasks", Short: "Work with Harbor / Terminal-Bench task directories"}
	cmd.AddCommand(tasksValidateCmd(g), tasksCheckCmd(g), tasksImportCmd(g), tasksExportCmd(g))
	return cmd
}

func tasksValidateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "validate DIR...",
		Short: "Load and check task directories; exit non-zero if any is invalid",
		Long:  trial.ValidateHelp,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			checks, bad := trial.ValidateAll(args)
			return cmp.Or(g.emit(cmd, checks, func(w io.Writer) { trial.WriteValidations(w, checks) }), bad)
		},
	}
}

func tasksCheckCmd(g *globals) *cobra.Command {
	var backend, offline string
	var scale float64
	var noOp bool
	cmd := &cobra.Command{
		Use:   "check DIR...",
		Short: "Run each task's reference solution and verifier in a fresh sandbox",
		Long:  trial.CheckHelp,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			be, err := cfg.Sandbox.NewBackend(backend)
			if err != nil {
				return err
			}
			rf, err := verifier.NewRewardFunc(verifier.ModeCount, scale)
			if err != nil {
				return err
			}
			opt := trial.Options{Backend: be, Limits: cfg.Sandbox.SandboxLimits(), Offline: trial.Offline(offline), AllowUnisolated: cfg.Sandbox.AllowUnisolated}
			results, failed := trial.CheckAll(cmd.Context(), args, opt, rf, noOp)
			return cmp.Or(g.emit(cmd, results, func(w io.Writer) { trial.WriteChecks(w, results) }), failed)
		},
	}
	cmd.Flags().StringVar(&backend, "backend", "", "sandbox backend: auto, bwrap or process (default: the config's sandbox.backend)")
	cmd.Flags().StringVar(&offline, "offline", string(trial.OfflineAuto), "answer test.sh's network installers with offline stand-ins: auto (when test.sh fetches tools), always or never")
	cmd.Flags().Float64Var(&scale, "scale", 1, "reward per passed assertion")
	cmd.Flags().BoolVar(&noOp, "no-op", true, "also verify the untouched environment and warn of tests that pass there")
	return cmd
}

func tasksImportCmd(g *globals) *cobra.Command {
	var run string
	cmd := &cobra.Command{
		Use:   "import DIR...",
		Short: "Validate task directories and store their bundles and tasks rows in a run",
		Long:  trial.ImportHelp,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			dirs, err := trial.AbsDirs(args)
			if err != nil {
				return err
			}
			return withInfra(cmd, cfg, local.Options{}, false, func(in *local.Infra) error {
				results, bad := trial.ImportAll(cmd.Context(), in.Store, cmp.Or(run, cfg.Run.ID), dirs)
				return cmp.Or(g.emit(cmd, results, func(w io.Writer) { trial.WriteImports(w, results) }), bad)
			})
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "run to import into (default: the config's run.id)")
	return cmd
}

func tasksExportCmd(g *globals) *cobra.Command {
	var run, out string
	cmd := &cobra.Command{
		Use:   "export [TASK...] --out DIR",
		Short: "Write a run's tasks (all, or the named ones) as Harbor task directories",
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			// The embedded S3 gateway moves the working directory.
			if out, err = filepath.Abs(out); err != nil {
				return err
			}
			return withInfra(cmd, cfg, local.Options{}, false, func(in *local.Infra) error {
				return trial.Export(cmd.Context(), in.Store, cmp.Or(run, cfg.Run.ID), args, out, func(dir string) { fmt.Fprintln(cmd.OutOrStdout(), dir) })
			})
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "run to export from (default: the config's run.id)")
	cmd.Flags().StringVar(&out, "out", "", "directory to write the task directories into")
	return cmd
}

func rolloutCmd(g *globals) *cobra.Command {
	var o episode.Options
	cmd := &cobra.Command{
		Use:   "rollout --task DIR",
		Short: "Play one episode of a task and print the transcript",
		Long:  episode.Help,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Task == "" {
				return fmt.Errorf("--task is required")
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			return episode.Play(cmd.Context(), cmd.OutOrStdout(), cfg, o)
		},
	}
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
	cmd := &cobra.Command{Use: "export", Short: "Write a run's data in other formats"}
	var run, out, purpose string
	atifCmd := &cobra.Command{
		Use:   "atif --run R --out DIR",
		Short: "Write every attempt of a run as Harbor ATIF trajectory JSON (" + atif.Version + ")",
		Long:  atif.ExportHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			if out, err = filepath.Abs(out); err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			// Replies are read as the run's harness read them: with the
			// configured action format.
			format, err := cfg.Stages.Rollout.Config().Format()
			if err != nil {
				return err
			}
			return withInfra(cmd, cfg, local.Options{}, false, func(in *local.Infra) error {
				n, err := atif.WriteRun(cmd.Context(), in.Log, in.Store, cmp.Or(run, cfg.Run.ID), purpose, format, cfg.Stages.Rollout.SystemPrompt, out)
				if err == nil {
					fmt.Fprintf(cmd.OutOrStdout(), "wrote %d trajectories to %s\n", n, out)
				}
				return err
			})
		},
	}
	atifCmd.Flags().StringVar(&run, "run", "", "run to export (default: the config's run.id)")
	atifCmd.Flags().StringVar(&out, "out", "", "directory for the JSON files")
	atifCmd.Flags().StringVar(&purpose, "purpose", "", "only train or only eval attempts")
	cmd.AddCommand(atifCmd)
	return cmd
}
