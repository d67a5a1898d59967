package execute

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/t1pipe/t1/report"
)

// Every evaluation is printed once: those of the recipe's stages in the
// base → after SFT → after RL table, with what only their own line said
// (unscored attempts), and those between the stages on lines of their own.
func TestSummarySaysEachEvaluationOnce(t *testing.T) {
	ev := func(v int64, rate float64, unscored int) report.Eval {
		return report.Eval{Suite: "builtin", PolicyVersion: v, Attempts: 64, Unscored: unscored, ResolveRate: rate, MeanReward: 2 * rate, MeanTurns: 3}
	}
	s := Summary{Run: "r", Status: "completed", Events: map[string]uint64{"rollout.completed.failed": 2}}
	for _, e := range []report.Eval{ev(0, 0.25, 0), ev(1, 0.5, 0), ev(2, 0.5, 0), ev(3, 0.75, 2)} {
		s.Evals = append(s.Evals, EvalLine{e.Suite, e.PolicyVersion, e.Attempts, e.Unscored, e.ResolveRate, e.MeanReward, e.MeanTurns})
	}
	base := ev(0, 0.25, 0)
	base.From = "parent"
	s.Recipe = []report.RecipeRow{{Stage: report.StageBase, Eval: base}, {Stage: report.StageSFT, Eval: ev(1, 0.5, 0)}, {Stage: report.StageRL, Eval: ev(3, 0.75, 2)}}
	var b bytes.Buffer
	s.WriteText(&b)
	out := b.String()
	for _, want := range []string{
		"failed events +2\n",
		`eval builtin v2 +resolve 0.50  partial credit 1.00  turns 3.0  \(64 attempts\)\n`,
		`builtin base \(parent\) +resolve 0.25  partial credit 0.50  turns 3.0  \(v0, 64 attempts\)\n`,
		`builtin after SFT +resolve 0.50  partial credit 1.00  turns 3.0  \(v1, 64 attempts\)\n`,
		`builtin after RL +resolve 0.75  partial credit 1.50  turns 3.0  \(v3, 64 attempts, 2 unscored: their rollout or reward failed\)\n`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "resolve "); n != 4 {
		t.Errorf("%d evaluation lines for 4 evaluations:\n%s", n, out)
	}
}
