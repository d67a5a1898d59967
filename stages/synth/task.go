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

// Lineage is what makes a task rebuildable and extendable: its steps,
// parent and round.
type Lineage struct {
	TaskID   string            `json:"task_id"`
	ParentID string            `json:"parent_id,omitempty"`
	RootID   string            `json:"root_id"`
	Round    int               `json:"round"`
	Steps    []taskgen.StepRef `json:"steps"`
}

// Verdict is the execution check of one candidate.
type Verdict struct {
	Keep bool
	// Reason says why a candidate was dropped.
	Reason string
	// Oracle is the reference solution's run; Parent the parent's solution
	// on the child's environment (nil for a seed).
	Oracle, Parent *trial.Outcome
	// New names the assertions the child adds.
	New []string
}

// Execute runs a candidate: the oracle must pass every assertion, and
// the parent's solution, run on the child's environment, must fail every
// assertion the child adds. dir is where the task is written; it is
// removed by the caller.
func Execute(ctx context.Context, child, parent *taskgen.Spec, t *harbor.Task, dir string, opt trial.Options) (Verdict, error) {
	var v Verdict
	if err := t.Write(dir); err != nil {
		return v, err
	}
	out, err := trial.Run(ctx, dir, t, trial.Oracle(dir), opt)
	if err != nil {
		return v, err
	}
	v.Oracle = &out
	if out.SolutionExit != 0 {
		v.Reason = fmt.Sprintf("reference solution exited %d: %s", out.SolutionExit, tail(out.SolutionOutput, 400))
		return v, nil
	}
	if !out.Report.Solved || out.Report.Total != len(child.Checks) {
		v.Reason = fmt.Sprintf("reference solution passed %d of %d assertions (%d expected): %s",
			out.Report.Passed, out.Report.Total, len(child.Checks), failures(out.Report))
		return v, nil
	}
	if parent == nil {
		v.Keep = true
		return v, nil
	}
	known := map[string]bool{}
	for _, c := range parent.Checks {
		known[c.Name] = true
	}
	for _, c := range child.Checks {
		if !known[c.Name] {
			v.New = append(v.New, c.Name)
		}
	}
	pout, err := trial.Run(ctx, dir, t, &trial.Solution{Script: []byte(parent.SolveScript())}, opt)
	if err != nil {
		return v, err
	}
	v.Parent = &pout
	for _, a := range pout.Report.Assertions {
		if slices.ContainsFunc(v.New, func(n string) bool { return sameTest(a.Name, n) }) && a.Status == verifier.Passed {
			v.Reason = fmt.Sprintf("the parent's solution already passes the new assertion %s", a.Name)
			return v, nil
		}
	}
	if len(v.New) == 0 {
		v.Reason = "the child adds no assertion"
		return v, nil
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
