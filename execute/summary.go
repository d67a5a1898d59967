package execute

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/t1pipe/t1/report"
	"github.com/t1pipe/t1/schemas"
)

// Summary is how a run ended, as `t1 run` prints it.
type Summary struct {
	Run    string            `json:"run"`
	Status string            `json:"status"` // completed | failed | stopped
	Reason string            `json:"reason,omitempty"`
	Events map[string]uint64 `json:"events"`
	Evals  []EvalLine        `json:"evals,omitempty"`
	// Recipe is the base → SFT → RL table (report.Recipe).
	Recipe     []report.RecipeRow `json:"recipe,omitempty"`
	Dead       uint64             `json:"dead_letters"`
	Elapsed    time.Duration      `json:"elapsed_ns"`
	PolicyLast int64              `json:"policy_version"`
	// ExitCode is the code the command ends with (README's table).
	ExitCode int `json:"exit_code"`
	ReportFiles
}

// EvalLine is one evaluation of the run.
type EvalLine struct {
	Suite         string  `json:"suite"`
	PolicyVersion int64   `json:"policy_version"`
	Attempts      int     `json:"attempts"`
	Unscored      int     `json:"unscored,omitempty"`
	ResolveRate   float64 `json:"resolve_rate"`
	MeanReward    float64 `json:"mean_reward"`
	MeanTurns     float64 `json:"mean_turns"`
}

// FailedTotal counts the run's failed events of every type.
func FailedTotal(counts map[string]uint64) uint64 {
	var n uint64
	for t, c := range counts {
		if strings.HasSuffix(t, ".failed") && t != schemas.RunFailed {
			n += c
		}
	}
	return n
}

// WriteText prints s as `t1 run` ends: its events, the evaluations of the
// policies between the recipe's stages, then each suite's base → after
// SFT → after RL table, every evaluation once.
func (s Summary) WriteText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%s (%s)\n", s.Run, s.Status)
	if s.Reason != "" {
		fmt.Fprintf(tw, "reason\t%s\n", s.Reason)
	}
	for _, t := range []string{schemas.TaskSynthesized, schemas.SynthDiscarded, schemas.TaskAudited, schemas.RolloutCompleted,
		schemas.RewardScored, schemas.PolicyUpdated, schemas.EvalCompleted} {
		fmt.Fprintf(tw, "%s\t%d\n", t, s.Events[t])
	}
	fmt.Fprintf(tw, "failed events\t%d\n", FailedTotal(s.Events))
	fmt.Fprintf(tw, "dead letters\t%d\n", s.Dead)
	inRecipe := map[string]bool{}
	for _, r := range s.Recipe {
		inRecipe[fmt.Sprint(r.Suite, r.PolicyVersion)] = true
	}
	for _, e := range s.Evals {
		if !inRecipe[fmt.Sprint(e.Suite, e.PolicyVersion)] {
			fmt.Fprintf(tw, "eval %s v%d\tresolve %.2f  partial credit %.2f  turns %.1f  (%d attempts%s)\n", e.Suite, e.PolicyVersion, e.ResolveRate, e.MeanReward, e.MeanTurns, e.Attempts, unscored(e.Unscored))
		}
	}
	for _, row := range s.Recipe {
		fmt.Fprintf(tw, "%s %s\tresolve %.2f  partial credit %.2f  turns %.1f  (v%d, %d attempts%s)\n", row.Suite, row.Label(), row.ResolveRate, row.MeanReward, row.MeanTurns, row.PolicyVersion, row.Attempts, unscored(row.Unscored))
	}
	fmt.Fprintf(tw, "elapsed\t%s\n", s.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(tw, "report\t%s (object %s)\n", s.Report, s.ReportKey)
	fmt.Fprintf(tw, "report html\t%s (object %s)\n", s.HTML, s.HTMLKey)
	tw.Flush()
}

func unscored(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d unscored: their rollout or reward failed", n)
}
