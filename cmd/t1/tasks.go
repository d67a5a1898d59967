package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/atif"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/schemas"
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
		Long: `Loads each DIR as a Harbor task (instruction.md, task.toml, environment/,
solution/solve.sh, tests/test.sh) and prints its id, category, difficulty,
environment kind, test files and test functions, or the error naming the
file and field. A DIR without task.toml whose subdirectories hold tasks
(a dataset root) is expanded to those subdirectories.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var checks []trial.Validation
			bad := 0
			for _, dir := range harbor.ExpandDirs(args) {
				if checks = append(checks, trial.Validate(dir)); !checks[len(checks)-1].OK {
					bad++
				}
			}
			err := g.emit(cmd, checks, func(out io.Writer) {
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "STATUS\tID\tCATEGORY\tDIFFICULTY\tENV\tTEST FILES\tTESTS\tDIR")
				for _, c := range checks {
					if c.OK {
						net := ""
						if c.NeedsOffline {
							net = " (fetches at verify time)"
						}
						fmt.Fprintf(tw, "ok\t%s\t%s\t%s\t%s\t%d\t%d\t%s%s\n", c.ID, dash(c.Category), dash(c.Difficulty), c.Environment, c.TestFiles, c.TestFunctions, c.Dir, net)
					}
				}
				tw.Flush()
				for _, c := range checks {
					if !c.OK {
						fmt.Fprintf(out, "INVALID %s\n", c.Error)
					}
				}
			})
			if err == nil && bad > 0 {
				err = fmt.Errorf("%d of %d tasks are invalid", bad, len(checks))
			}
			return err
		},
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func tasksCheckCmd(g *globals) *cobra.Command {
	var backend, offline string
	var scale float64
	var noOp bool
	cmd := &cobra.Command{
		Use:   "check DIR...",
		Short: "Run each task's reference solution and verifier in a fresh sandbox",
		Long: `For each task: a fresh sandbox with the task's environment, solution/solve.sh, then the
verifier (tests/test.sh; when it would fetch tools from the network, with stand-ins for
curl | sh of uv's installer, uv, uvx, pip and apt-get that succeed when the sandbox has
what they ask for). Prints every assertion's result and the reward (passed assertions ×
--scale), and the end of the solution's output when it fails. With --no-op (the default)
the verifier also judges the untouched environment and warns of every test that passes
there: such a test checks nothing the task does, or finds what the host's system
directories provide. Exits non-zero unless every task is solved.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			if backend == "" {
				backend = cfg.Sandbox.Backend
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
			var results []trial.CheckResult
			failed := 0
			for _, dir := range harbor.ExpandDirs(args) {
				if results = append(results, trial.Check(cmd.Context(), dir, opt, rf, noOp)); !results[len(results)-1].Solved {
					failed++
				}
			}
			if err := g.emit(cmd, results, func(w io.Writer) { trial.WriteChecks(w, results) }); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d tasks not solved by their reference solution", failed, len(results))
			}
			return nil
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
		Long: `Loads each DIR (a dataset root is expanded to its task subdirectories), stores its
deterministic bundle at runs/<run>/bundles/<task>.tar.gz and a tasks-table row
(source "import"). Importing the same task again changes nothing.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			if run == "" {
				run = cfg.Run.ID
			}
			// The embedded S3 gateway moves the working directory: resolve
			// the task paths first.
			var dirs []string
			for _, d := range harbor.ExpandDirs(args) {
				abs, err := filepath.Abs(d)
				if err != nil {
					return err
				}
				dirs = append(dirs, abs)
			}
			in, err := local.Open(cmd.Context(), cfg, local.Options{})
			if err != nil {
				return err
			}
			defer in.Close()
			var results []trial.Imported
			bad := 0
			for _, dir := range dirs {
				if results = append(results, trial.Import(cmd.Context(), in.Store, run, dir)); results[len(results)-1].Error != "" {
					bad++
				}
			}
			err = g.emit(cmd, results, func(w io.Writer) {
				for _, r := range results {
					if r.Error != "" {
						fmt.Fprintf(w, "%s: %s\n", r.Dir, r.Error)
					} else {
						fmt.Fprintf(w, "%s: %s → %s\n", r.Dir, r.Task, r.Bundle)
					}
				}
			})
			if err == nil && bad > 0 {
				err = fmt.Errorf("%d of %d tasks not imported", bad, len(results))
			}
			return err
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
			if run == "" {
				run = cfg.Run.ID
			}
			if out, err = filepath.Abs(out); err != nil {
				return err
			}
			in, err := local.Open(cmd.Context(), cfg, local.Options{})
			if err != nil {
				return err
			}
			defer in.Close()
			ids := args
			if len(ids) == 0 {
				for o, err := range in.Store.List(cmd.Context(), keys.Bundles(run)) {
					if err != nil {
						return err
					}
					if id, ok := keys.BundleTask(run, o.Key); ok {
						ids = append(ids, id)
					}
				}
			}
			if len(ids) == 0 {
				return fmt.Errorf("run %s has no task bundles", run)
			}
			for _, id := range ids {
				dir := filepath.Join(out, id)
				if _, err := trial.FetchBundle(cmd.Context(), in.Store, keys.Bundle(run, id), "", dir); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), dir)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "run to export from (default: the config's run.id)")
	cmd.Flags().StringVar(&out, "out", "", "directory to write the task directories into")
	return cmd
}

func rolloutCmd(g *globals) *cobra.Command {
	var task, backend, rowsOut string
	var o pipeline.StandaloneOptions
	var verify bool
	cmd := &cobra.Command{
		Use:   "rollout --task DIR",
		Short: "Play one episode of a task and print the transcript",
		Long: `Starts a fresh sandbox of the task, lets the policy work in it turn by turn, prints
every reply and observation, then runs the task's verifier on the final state.

--policy config uses the inference section of the configuration (the reference MoE
by default, or an SGLang/vLLM server); --policy oracle replays the task's reference
solution one top-level shell statement per turn through the same harness. A served
model's inference.checkpoint is a local Hugging Face directory of any architecture
(qwen3_moe, …): its config.json gives the routing's shape and the context, its
tokenizer files the tokenizer and chat template; its weights are not read and need
not be there. The reference engine runs only t1's own architecture (t1_moe). The episode
is bounded as the pipeline's rollouts are, by stages.rollout, except for its context:
--context, by default the model's own (its checkpoint's; the configuration's for a
served model without one; for the oracle, stages.rollout.context plus what
the task's first turn needs, when that takes more than three quarters of it). An instruction that does not fit is an error
before the sandbox starts, never an episode that ends before its first turn.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if task == "" {
				return fmt.Errorf("--task is required")
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			dir, err := filepath.Abs(task)
			if err != nil {
				return err
			}
			t, err := harbor.Load(dir)
			if err != nil {
				return err
			}
			be, err := cfg.Sandbox.NewBackend(cmp.Or(backend, cfg.Sandbox.Backend))
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			o.Solution, o.Instruction = string(t.Files[harbor.SolutionPath].Data), t.Instruction
			ep, err := pipeline.StandaloneEpisode(ctx, cfg, o)
			if err != nil {
				return err
			}
			sb, err := be.Start(ctx, sandbox.Spec{TaskDir: dir, Limits: cfg.Sandbox.SandboxLimits()})
			if err != nil {
				return err
			}
			defer sb.Close()
			sh, err := sb.Shell(ctx, sandbox.ShellOptions{})
			if err != nil {
				return err
			}
			defer sh.Close()
			out := cmd.OutOrStdout()
			if info := sb.Info(); !info.Isolated {
				fmt.Fprintf(out, "WARNING: %s\n", info.Reason)
			}
			fmt.Fprintf(out, "=== task %s (context %d tokens)\n%s\n", t.Name, ep.Config.Context, strings.TrimSpace(t.Instruction))
			res, err := agent.Run(ctx, ep.Engine, ep.Chat, sh, t.Instruction, ep.Config, func(tr agent.Turn) { printTurn(out, tr) })
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "=== %s after %d turns, %d sampled tokens, %d chunks, repairs %v, loss drift %d, malformed %d\n",
				res.Termination, len(res.Turns), res.Sampled, len(res.Chunks), res.Repairs, res.LossDrift, res.Malformed)
			if rowsOut != "" {
				if err := writeRows(rowsOut, t.Name, res, ep.Experts); err != nil {
					return err
				}
			}
			if !verify {
				return nil
			}
			// The agent's shell and its jobs end before the verifier starts,
			// which runs in a fresh sandbox on what the agent left.
			sh.Close()
			rep, _, _, err := trial.Verify(ctx, sb, dir, t, trial.Options{Backend: be, Limits: cfg.Sandbox.SandboxLimits(), AllowUnisolated: cfg.Sandbox.AllowUnisolated})
			if err != nil {
				return err
			}
			rf, _ := verifier.NewRewardFunc(verifier.ModeCount, 1)
			fmt.Fprintf(out, "=== verifier (%s): passed %d/%d, solved %t, reward %g\n", rep.Source, rep.Passed, rep.Total, rep.Solved, rf.Score(rep).Value)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&task, "task", "", "Harbor task directory")
	f.StringVar(&o.Policy, "policy", "config", "config (the inference section) or oracle (replay the reference solution)")
	f.StringVar(&backend, "backend", "", "sandbox backend: auto, bwrap or process (default: the config's)")
	f.IntVar(&o.MaxTurns, "max-turns", 300, "turn limit")
	f.IntVar(&o.Context, "context", 0, "context in tokens (default: the model's; see above)")
	f.Uint64Var(&o.Seed, "seed", 1, "sampling seed")
	f.BoolVar(&verify, "verify", true, "run the verifier on the final state")
	f.StringVar(&rowsOut, "rows", "", "write the attempt's table rows (tokens, routing, turns, trajectory), as a rollout stores them, to this JSON file")
	return cmd
}

// writeRows writes the rows the rollout stage would store for this episode.
func writeRows(path, task string, res *agent.Result, experts int) error {
	rows, err := agent.AttemptRows("rollout", schemas.RolloutRequestedPayload{TaskID: task}, res, experts, "", 0)
	if err == nil {
		var b []byte
		if b, err = json.MarshalIndent(rows, "", " "); err == nil {
			err = os.WriteFile(path, append(b, '\n'), 0o644)
		}
	}
	if err != nil {
		return fmt.Errorf("--rows: %w", err)
	}
	return nil
}

func printTurn(w io.Writer, tr agent.Turn) {
	fmt.Fprintf(w, "--- turn %d (chunk %d, %d tokens)\n", tr.Index, tr.Chunk, tr.Sampled)
	fmt.Fprintf(w, "assistant: %s\n", strings.TrimSpace(tr.Reply))
	if tr.Observation != "" {
		fmt.Fprintf(w, "observation:\n%s", tr.Observation)
		if !strings.HasSuffix(tr.Observation, "\n") {
			fmt.Fprintln(w)
		}
	}
}

func exportCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "export", Short: "Write a run's data in other formats"}
	var run, out, purpose string
	atifCmd := &cobra.Command{
		Use:   "atif --run R --out DIR",
		Short: "Write every attempt of a run as Harbor ATIF trajectory JSON (" + atif.Version + ")",
		Long: `Follows the run's rollout.completed events to their trajectory, turns and tokens
objects and writes one ATIF file per attempt: DIR/<task>-a<attempt>-i<iteration>-v<policy>-<purpose>.json.
Agent steps carry the commands as bash tool calls (read from each reply with the
configured stages.rollout.model.action_format), the observation, and the turn's
prompt length, completion token ids and sampler log-probs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			if run == "" {
				run = cfg.Run.ID
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
			in, err := local.Open(cmd.Context(), cfg, local.Options{})
			if err != nil {
				return err
			}
			defer in.Close()
			n, err := atif.WriteRun(cmd.Context(), in.Log, in.Store, run, purpose, format, cfg.Stages.Rollout.SystemPrompt, out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d trajectories to %s\n", n, out)
			return nil
		},
	}
	atifCmd.Flags().StringVar(&run, "run", "", "run to export (default: the config's run.id)")
	atifCmd.Flags().StringVar(&out, "out", "", "directory for the JSON files")
	atifCmd.Flags().StringVar(&purpose, "purpose", "", "only train or only eval attempts")
	cmd.AddCommand(atifCmd)
	return cmd
}
