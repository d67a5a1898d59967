package report

import (
	"fmt"
	"slices"
)

// Stage rows of the recipe table.
const (
	StageBase = "base"
	StageSFT  = "after SFT"
	StageRL   = "after RL"
)

// RecipeRow is one row of the base → SFT → RL table: how a suite went for
// the policy a stage of the recipe left.
type RecipeRow struct {
	Stage string `json:"stage"`
	Eval
}

// Label is the row's stage, naming the ancestor that evaluated it when a
// continued branch took the evaluation over.
func (r RecipeRow) Label() string {
	if r.From != "" {
		return r.Stage + " (" + r.From + ")"
	}
	return r.Stage
}

// Recipe is the run's base → SFT → RL table per suite: the initial
// policy, the fine-tuned one (when the run fine-tuned) and the last
// policy RL produced, each as its evaluation reported it. A stage that
// was not evaluated has no row.
func Recipe(r *Run) []RecipeRow {
	sft := int64(-1)
	for _, s := range r.SFT {
		sft = max(sft, s.PolicyVersion)
	}
	var out []RecipeRow
	for _, suite := range evalSuites(r) {
		var base, tuned, last *Eval
		for i := range r.Evals {
			e := &r.Evals[i]
			switch {
			case e.Suite != suite:
			case e.PolicyVersion == 0:
				base = e
			case e.PolicyVersion == sft:
				tuned = e
			case e.PolicyVersion > sft && (last == nil || e.PolicyVersion > last.PolicyVersion):
				last = e
			}
		}
		for _, row := range []struct {
			stage string
			e     *Eval
		}{{StageBase, base}, {StageSFT, tuned}, {StageRL, last}} {
			if row.e != nil {
				out = append(out, RecipeRow{Stage: row.stage, Eval: *row.e})
			}
		}
	}
	return out
}

// signalNotes says, in plain words, which updates had nothing to learn
// from and which critics could not be measured.
func signalNotes(r *Run) []string {
	var notes []string
	var skipped []string
	for _, u := range r.Updates {
		if u.Skipped != "" {
			skipped = append(skipped, fmt.Sprintf("iteration %d (v%d: %s)", u.Iteration, u.PolicyVersion, u.Skipped))
		}
		if u.WarmupEnd == warmupNoVariance {
			notes = append(notes, fmt.Sprintf("Iteration %d: every attempt earned the same reward, so the returns have no variance: the critic's warm-up stopped and its explained variance (0) measures nothing.", u.Iteration))
		}
	}
	if len(skipped) > 0 {
		notes = append(notes, "No learning signal, so the policy did not change, in "+joinAnd(skipped)+".")
	}
	if len(r.Updates) > 0 && len(skipped) == len(r.Updates) {
		notes = append(notes, "No update of this run changed the policy: its final policy is its initial one.")
	}
	return slices.Compact(notes)
}

func joinAnd(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	s := ""
	for i, x := range xs[:len(xs)-1] {
		if i > 0 {
			s += ", "
		}
		s += x
	}
	return s + " and " + xs[len(xs)-1]
}

// warmupNoVariance is trainer.WarmupNoVariance, as critic.updated carries
// it (report reads events, not the trainer).
const warmupNoVariance = "rewards do not vary"
