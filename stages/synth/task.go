package synth

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/taskgen"
	"github.com/t1pipe/t1/trial"
)

// Generators of a task, as lineage records them.
const (
	Builtin = "builtin" // taskgen's typed executable steps
	LLM     = "llm"     // a chat model behind an OpenAI-compatible endpoint
)

// Lineage is what makes a task rebuildable and extendable: its steps,
// parent and round, and which generator grew it. A task the llm generator
// grew has no steps; its bundle is its whole content, and Reply is the
// stored model reply it was parsed from.
type Lineage struct {
	TaskID   string            `json:"task_id"`
	ParentID string            `json:"parent_id,omitempty"`
	RootID   string            `json:"root_id"`
	Round    int               `json:"round"`
	Steps    []taskgen.StepRef `json:"steps,omitempty"`
	// Generator is Builtin or LLM; empty in lineages written before there
	// was a choice, which are Builtin.
	Generator string `json:"generator,omitempty"`
	// Model names the chat model of an LLM task.
	Model string `json:"model,omitempty"`
	Reply string `json:"reply,omitempty"`
}

// Verdict is the execution check of one candidate.
type Verdict struct {
	Keep bool
	// Reason says why a candidate was dropped.
	Reason string
	// Oracle is the reference solution's run; Parent the parent's solution
	// on the child's environment (nil for a seed).
	Oracle, Parent *trial.Outcome
	// New names the assertions the child adds, as the oracle's report
	// names them.
	New []string
}

// Expect is what execution must show of a candidate.
type Expect struct {
	// Assertions is how many assertions the oracle must report; 0 takes
	// whatever it reports, as long as it reports at least one.
	Assertions int
	// Known are the parent's assertions (pytest function names); every
	// other assertion the oracle reports is new.
	Known []string
	// ParentSolution is the parent's solve.sh, run on the child's
	// environment; nil for a seed, which has no parent to outgrow.
	ParentSolution []byte
}

// Execute runs a candidate grown by taskgen: the oracle must pass every
// assertion, and the parent's solution, run on the child's environment,
// must fail every assertion the child adds. dir is where the task is
// written; it is removed by the caller.
func Execute(ctx context.Context, child, parent *taskgen.Spec, t *harbor.Task, dir string, opt trial.Options) (Verdict, error) {
	e := Expect{Assertions: len(child.Checks)}
	if parent != nil {
		for _, c := range parent.Checks {
			e.Known = append(e.Known, c.Name)
		}
		e.ParentSolution = []byte(parent.SolveScript())
	}
	return ExecuteTask(ctx, t, e, dir, opt)
}

// ExecuteTask runs any candidate task against e, each run in a fresh
// sandbox: the oracle must pass every assertion of a per-assertion report,
// and with a parent there must be new assertions, every one of which the
// parent's solution fails. A task that shows otherwise is dropped with the
// reason; the error is for failures to run at all.
func ExecuteTask(ctx context.Context, t *harbor.Task, e Expect, dir string, opt trial.Options) (Verdict, error) {
	var v Verdict
	if err := t.Write(dir); err != nil {
		return v, err
	}
	out, err := trial.Run(ctx, dir, t, trial.Oracle(dir), opt)
	if err != nil {
		return v, err
	}
	v.Oracle = &out
	r := out.Report
	switch {
	case out.SolutionExit != 0:
		v.Reason = fmt.Sprintf("reference solution exited %d: %s", out.SolutionExit, tail(out.SolutionOutput, 400))
		return v, nil
	case r.Fallback || r.Total == 0:
		v.Reason = fmt.Sprintf("the verifier reported no assertions (%s, exit %d): %s", r.Source, r.ExitCode, strings.Join(r.Problems, "; "))
		return v, nil
	case r.Passed != r.Total || (e.Assertions > 0 && r.Total != e.Assertions):
		want := ""
		if e.Assertions > 0 {
			want = fmt.Sprintf(" (%d expected)", e.Assertions)
		}
		v.Reason = fmt.Sprintf("reference solution passed %d of %d assertions%s: %s", r.Passed, r.Total, want, failures(r))
		return v, nil
	}
	if e.ParentSolution == nil {
		v.Keep = true
		return v, nil
	}
	for _, a := range r.Assertions {
		if !slices.ContainsFunc(e.Known, func(fn string) bool { return sameTest(a.Name, fn) }) {
			v.New = append(v.New, a.Name)
		}
	}
	if len(v.New) == 0 {
		v.Reason = "the child adds no assertion"
		return v, nil
	}
	pout, err := trial.Run(ctx, dir, t, &trial.Solution{Script: e.ParentSolution}, opt)
	if err != nil {
		return v, err
	}
	v.Parent = &pout
	for _, a := range pout.Report.Assertions {
		if slices.Contains(v.New, a.Name) && a.Status == verifier.Passed {
			v.Reason = fmt.Sprintf("the parent's solution already passes the new assertion %s", a.Name)
			return v, nil
		}
	}
	v.Keep = true
	return v, nil
}

// sameTest matches a reported test name ("test_outputs::test_s03_count"
// in JUnit, possibly with a class) to a check's function name.
func sameTest(reported, fn string) bool {
	return reported == fn || strings.HasSuffix(reported, "::"+fn) || strings.HasSuffix(reported, "."+fn)
}

func failures(r *verifier.Report) string {
	var s []string
	for _, a := range r.Assertions {
		if a.Status != verifier.Passed {
			s = append(s, a.Name+": "+tail(a.Message, 200))
		}
	}
	if len(s) == 0 {
		return "no per-assertion report (" + string(r.Source) + ")"
	}
	return fmt.Sprint(s)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
