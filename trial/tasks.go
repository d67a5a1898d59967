package trial

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/infra/egress"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// Validation is what `t1 tasks validate` says of one task directory.
type Validation struct {
	Dir           string `json:"dir"`
	OK            bool   `json:"ok"`
	ID            string `json:"id,omitempty"`
	Name          string `json:"name,omitempty"`
	Category      string `json:"category,omitempty"`
	Difficulty    string `json:"difficulty,omitempty"`
	Environment   string `json:"environment,omitempty"`
	TestFiles     int    `json:"test_files"`
	TestFunctions int    `json:"test_functions"`
	NeedsOffline  bool   `json:"needs_offline"`
	Error         string `json:"error,omitempty"`
}

// Validate loads dir as a Harbor task and says what it is, or why it is
// not one.
func Validate(dir string) Validation {
	c := Validation{Dir: dir}
	t, err := harbor.Load(dir)
	if err == nil {
		c.ID, err = t.ID()
	}
	if err != nil {
		c.Error = err.Error()
		return c
	}
	c.OK, c.Name = true, t.Name
	c.Category, c.Difficulty = t.Config.Metadata.Category, t.Config.Metadata.Difficulty
	c.Environment = t.EnvironmentKind()
	c.TestFiles, c.TestFunctions = len(t.TestFiles()), t.CountTestFunctions()
	c.NeedsOffline, _ = verifier.NeedsOffline(t)
	return c
}

// CheckResult is what `t1 tasks check` says of one task: its reference
// solution's attempt and, with a no-op check, the untouched environment's.
type CheckResult struct {
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
	// VerifierTail is the end of test.sh's output when it failed
	// without writing results (verifier.Report.Output).
	VerifierTail string `json:"verifier_tail,omitempty"`
	// NoOp is what the verifier says of the untouched environment.
	NoOp *NoOpResult `json:"no_op,omitempty"`
	// Network is the solution's network policy when it had one
	// (registries), Egress every request its proxy answered.
	Network string           `json:"network,omitempty"`
	Egress  []egress.Request `json:"egress,omitempty"`
}

// NoOpResult is the verifier's report on an attempt that did nothing.
// Tests it passes check nothing the task asks for, or find what the host's
// system directories provide although the task should have made it.
type NoOpResult struct {
	Passed int      `json:"passed"`
	Total  int      `json:"total"`
	Tests  []string `json:"passed_tests,omitempty"`
	// Problems are the verifier report's: why it has no result, when
	// test.sh stopped before writing one.
	Problems []string `json:"problems,omitempty"`
	Error    string   `json:"error,omitempty"`
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

// Check runs the reference solution of the task in dir and its verifier
// in fresh sandboxes, scoring the report with rf, and with noOp also the
// verifier on the untouched environment. A task that cannot be loaded or
// run says why in Error.
func Check(ctx context.Context, dir string, opt Options, rf verifier.RewardFunc, noOp bool) CheckResult {
	r := CheckResult{Dir: dir, SolutionExit: NoSolution}
	t, err := harbor.Load(dir)
	if err == nil {
		r.Task = t.Name
		var out Outcome
		if out, err = Run(ctx, dir, t, Oracle(dir), opt); err == nil {
			rep := out.Report
			r.SolutionExit, r.Offline, r.Isolated, r.Notes = out.SolutionExit, out.Offline, out.Isolated, out.Notes
			r.Source, r.Assertions, r.Passed, r.Total, r.Solved = string(rep.Source), rep.Assertions, rep.Passed, rep.Total, rep.Solved
			r.Reward, r.Problems = rf.Score(rep).Value, rep.Problems
			if out.Network != egress.None {
				r.Network, r.Egress = out.Network, out.Egress
			}
			if out.SolutionExit != 0 || out.SolutionTimedOut {
				r.SolutionTail = outputTail(out.SolutionOutput)
			}
			if rep.Output != "" {
				r.VerifierTail = outputTail(rep.Output)
			}
		}
		if err == nil && noOp {
			r.NoOp = &NoOpResult{}
			if out, nerr := Run(ctx, dir, t, nil, opt); nerr != nil {
				r.NoOp.Error = exit.Line(nerr)
			} else {
				r.NoOp.Passed, r.NoOp.Total, r.NoOp.Problems = out.Report.Passed, out.Report.Total, out.Report.Problems
				for _, a := range out.Report.Assertions {
					if a.Status == verifier.Passed {
						r.NoOp.Tests = append(r.NoOp.Tests, a.Name)
					}
				}
			}
		}
	}
	if err != nil {
		r.Error = exit.Line(err)
	}
	return r
}

// WriteChecks prints rs as `t1 tasks check` does.
func WriteChecks(w io.Writer, rs []CheckResult) {
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
		for _, q := range r.Egress {
			if !q.Allowed {
				fmt.Fprintf(w, "  network: %s\n", q)
			}
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
		if r.VerifierTail != "" {
			fmt.Fprintf(w, "  verifier output (last lines):\n")
			for _, l := range strings.Split(r.VerifierTail, "\n") {
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
		if n := r.NoOp; n != nil {
			for _, p := range n.Problems {
				fmt.Fprintf(w, "  no-op note: %s\n", p)
			}
		}
		fmt.Fprintln(w)
	}
}

// Imported is what `t1 tasks import` did with one task directory.
type Imported struct {
	Dir    string          `json:"dir"`
	Task   string          `json:"task,omitempty"`
	Bundle string          `json:"bundle,omitempty"`
	Row    schemas.FileRef `json:"row"`
	Error  string          `json:"error,omitempty"`
}

// Import loads the task in dir and stores it in run as `t1 tasks import`
// does: its deterministic bundle and a tasks-table row of source
// "import", so that importing the same task again changes nothing.
func Import(ctx context.Context, st store.ObjectStore, run, dir string) Imported {
	r := Imported{Dir: dir}
	err := func() error {
		t, err := harbor.Load(dir)
		if err != nil {
			return err
		}
		r.Task = taskID(t)
		key, sum, _, err := PutBundle(ctx, st, run, r.Task, t)
		if err != nil {
			return err
		}
		r.Bundle = key
		md := t.Config.Metadata
		row := schemas.TaskRow{Run: run, TaskID: r.Task, RootID: r.Task, Source: "import", Category: md.Category,
			Difficulty: md.Difficulty, Tags: md.Tags, Instruction: t.Instruction, BundleKey: key, BundleSHA: sum}
		r.Row, err = schemas.WriteTable(ctx, st, run, 0, []schemas.TaskRow{row}, schemas.WriterOptions{})
		return err
	}()
	if err != nil {
		r.Error = exit.Line(err)
	}
	return r
}

// taskID names an imported task in keys and events: its name, with the
// organisation separator of Harbor 1.1 names ("org/task") made key-safe.
func taskID(t *harbor.Task) string { return strings.ReplaceAll(t.Name, "/", "--") }
