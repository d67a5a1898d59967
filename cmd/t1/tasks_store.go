package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/trial"
)

// checkResult is one task of `t1 tasks check`.
type checkResult struct {
	Dir          string               `json:"dir"`
	Task         string               `json:"task,omitempty"`
	SolutionExit int                  `json:"solution_exit"`
	Offline      bool                 `json:"offline_verifier"`
	Isolated     bool                 `json:"isolated"`
	Source       string               `json:"report_source,omitempty"`
	Assertions   []verifier.Assertion `json:"assertions,omitempty"`
	Passed       int                  `json:"passed"`
	Total        int                  `json:"total"`
	Solved       bool                 `json:"solved"`
	Reward       float64              `json:"reward"`
	Problems     []string             `json:"problems,omitempty"`
	Error        string               `json:"error,omitempty"`
	// Notes say how the sandbox built the environment (FROM ignored,
	// python for a python image).
	Notes []string `json:"environment_notes,omitempty"`
	// SolutionTail is the end of the solution's output (stdout, then
	// stderr) when it failed.
	SolutionTail string `json:"solution_tail,omitempty"`
	// NoOp is what the verifier says of the untouched environment.
	NoOp *noOpResult `json:"no_op,omitempty"`
}

// noOpResult is the verifier's report on an attempt that did nothing.
// Tests it passes check nothing the task asks for, or find what the host's
// system directories provide although the task should have made it.
type noOpResult struct {
	Passed int      `json:"passed"`
	Total  int      `json:"total"`
	Tests  []string `json:"passed_tests,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// tailLines is how much of a failed solution's output check prints.
const tailLines, tailBytes = 20, 4096

// outputTail is the last tailLines lines of s, at most tailBytes.
func outputTail(s string) string {
	s = strings.TrimRight(s, "\n")
	if len(s) > tailBytes {
		s = s[len(s)-tailBytes:]
	}
	if ls := strings.Split(s, "\n"); len(ls) > tailLines {
		s = strings.Join(ls[len(ls)-tailLines:], "\n")
	}
	return strings.ToValidUTF8(s, "\uFFFD")
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
			var results []checkResult
			failed := 0
			for _, dir := range expandTaskDirs(args) {
				r := checkResult{Dir: dir, SolutionExit: trial.NoSolution}
				t, err := harbor.Load(dir)
				if err == nil {
					r.Task = t.Name
					var out trial.Outcome
					if out, err = trial.Run(cmd.Context(), dir, t, trial.Oracle(dir), opt); err == nil {
						rep := out.Report
						r.SolutionExit, r.Offline, r.Isolated, r.Notes = out.SolutionExit, out.Offline, out.Isolated, out.Notes
						r.Source, r.Assertions, r.Passed, r.Total, r.Solved = string(rep.Source), rep.Assertions, rep.Passed, rep.Total, rep.Solved
						r.Reward, r.Problems = rf.Score(rep).Value, rep.Problems
						if out.SolutionExit != 0 || out.SolutionTimedOut {
							r.SolutionTail = outputTail(out.SolutionOutput)
						}
					}
					if err == nil && noOp {
						r.NoOp = &noOpResult{}
						if out, nerr := trial.Run(cmd.Context(), dir, t, nil, opt); nerr != nil {
							r.NoOp.Error = oneLine(nerr)
						} else {
							r.NoOp.Passed, r.NoOp.Total = out.Report.Passed, out.Report.Total
							for _, a := range out.Report.Assertions {
								if a.Status == verifier.Passed {
									r.NoOp.Tests = append(r.NoOp.Tests, a.Name)
								}
							}
						}
					}
				}
				if err != nil {
					r.Error = oneLine(err)
				}
				if !r.Solved {
					failed++
				}
				results = append(results, r)
			}
			if g.json {
				if err := printJSON(cmd, results); err != nil {
					return err
				}
			} else {
				printChecks(cmd.OutOrStdout(), results)
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

func printChecks(w io.Writer, rs []checkResult) {
	for _, r := range rs {
		if r.Error != "" {
			fmt.Fprintf(w, "%s: error: %s\n\n", r.Dir, r.Error)
			continue
		}
		notes := ""
		if r.Offline {
			notes += ", offline verifier"
		}
		if !r.Isolated {
			notes += ", NOT ISOLATED"
		}
		fmt.Fprintf(w, "%s (%s): solution exit %d, verifier report from %s%s\n", r.Dir, r.Task, r.SolutionExit, r.Source, notes)
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  environment: %s\n", n)
		}
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		for _, a := range r.Assertions {
			msg := strings.SplitN(a.Message, "\n", 2)[0]
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", a.Status, a.Name, msg)
		}
		tw.Flush()
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  note: %s\n", p)
		}
		if r.SolutionTail != "" {
			fmt.Fprintf(w, "  solution output (last lines):\n")
			for _, l := range strings.Split(r.SolutionTail, "\n") {
				fmt.Fprintf(w, "    | %s\n", l)
			}
		}
		fmt.Fprintf(w, "  passed %d/%d  solved %t  reward %g\n", r.Passed, r.Total, r.Solved, r.Reward)
		switch n := r.NoOp; {
		case n == nil:
		case n.Error != "":
			fmt.Fprintf(w, "  no-op: error: %s\n", n.Error)
		case n.Passed > 0:
			fmt.Fprintf(w, "  WARNING: with no solution %d/%d tests pass (%s): they check nothing the task does, or find what the host's system directories provide\n",
				n.Passed, n.Total, strings.Join(n.Tests, ", "))
		default:
			fmt.Fprintf(w, "  no-op: passed 0/%d\n", n.Total)
		}
		fmt.Fprintln(w)
	}
}

// importResult is one task of `t1 tasks import`.
type importResult struct {
	Dir    string          `json:"dir"`
	Task   string          `json:"task,omitempty"`
	Bundle string          `json:"bundle,omitempty"`
	Row    schemas.FileRef `json:"row"`
	Error  string          `json:"error,omitempty"`
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
			dirs, err := absAll(expandTaskDirs(args))
			if err != nil {
				return err
			}
			in, err := local.Open(cmd.Context(), cfg, local.Options{})
			if err != nil {
				return err
			}
			defer in.Close()
			var results []importResult
			bad := 0
			for _, dir := range dirs {
				r := importResult{Dir: dir}
				err := func() error {
					t, err := harbor.Load(dir)
					if err != nil {
						return err
					}
					r.Task = taskID(t)
					key, sum, _, err := trial.PutBundle(cmd.Context(), in.Store, run, r.Task, t)
					if err != nil {
						return err
					}
					r.Bundle = key
					md := t.Config.Metadata
					row := schemas.TaskRow{Run: run, TaskID: r.Task, RootID: r.Task, Source: "import", Category: md.Category,
						Difficulty: md.Difficulty, Tags: md.Tags, Instruction: t.Instruction, BundleKey: key, BundleSHA: sum}
					r.Row, err = schemas.WriteTable(cmd.Context(), in.Store, run, 0, []schemas.TaskRow{row}, schemas.WriterOptions{})
					return err
				}()
				if err != nil {
					r.Error = oneLine(err)
					bad++
				}
				results = append(results, r)
			}
			if g.json {
				if err := printJSON(cmd, results); err != nil {
					return err
				}
			} else {
				for _, r := range results {
					if r.Error != "" {
						fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", r.Dir, r.Error)
					} else {
						fmt.Fprintf(cmd.OutOrStdout(), "%s: %s → %s\n", r.Dir, r.Task, r.Bundle)
					}
				}
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d tasks not imported", bad, len(results))
			}
			return nil
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

// taskID names an imported task in keys and events: its name, with the
// organisation separator of Harbor 1.1 names ("org/task") made key-safe.
func taskID(t *harbor.Task) string { return strings.ReplaceAll(t.Name, "/", "--") }

func absAll(paths []string) ([]string, error) {
	out := make([]string, len(paths))
	for i, p := range paths {
		a, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}
