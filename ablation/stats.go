package ablation

import (
	"cmp"
	"math"

	"github.com/t1pipe/t1/execute"
	"github.com/t1pipe/t1/report"
)

// spread folds the recipe rows of runs (variant name → one summary per
// seed) into Spreads, in the order of names.
func spread(names []string, runs map[string][]*execute.Summary) []Spread {
	var out []Spread
	for _, n := range names {
		for _, stage := range []string{report.StageBase, report.StageSFT, report.StageRL} {
			row := Spread{Variant: n, Stage: stage, ResolveMin: 1}
			for _, s := range runs[n] {
				for _, r := range s.Recipe {
					if r.Stage != stage {
						continue
					}
					row.Seeds++
					row.ResolveMean += r.ResolveRate
					row.PartialCredit += r.MeanReward
					row.ResolveMin, row.ResolveMax = min(row.ResolveMin, r.ResolveRate), max(row.ResolveMax, r.ResolveRate)
				}
			}
			if row.Seeds > 0 {
				row.ResolveMean /= float64(row.Seeds)
				row.PartialCredit /= float64(row.Seeds)
				out = append(out, row)
			}
		}
	}
	return out
}

// gains returns, for each variant of names, the steps base → SFT and
// SFT → RL of its runs' recipes, each seed's step taken within the seed
// and, where results holds both evaluations (a branch's earlier one is
// its ancestor's), attempt by attempt.
func gains(names []string, runs map[string][]*execute.Summary, results map[string][]report.EvalResult) []Gain {
	var out []Gain
	steps := [][2]string{{report.StageBase, report.StageSFT}, {report.StageSFT, report.StageRL}}
	for _, n := range names {
		for _, st := range steps {
			row := Gain{Variant: n, From: st[0], To: st[1], Min: math.Inf(1), Max: math.Inf(-1)}
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, s := range runs[n] {
				from, okF := recipeEval(s.Recipe, st[0])
				to, okT := recipeEval(s.Recipe, st[1])
				if !okF || !okT {
					continue
				}
				d := to.ResolveRate - from.ResolveRate
				row.Paired = row.Paired.Add(report.Pair(from.Suite, results[cmp.Or(from.From, s.Run)], from.PolicyVersion,
					results[cmp.Or(to.From, s.Run)], to.PolicyVersion))
				row.Seeds++
				row.Mean += d
				row.Min, row.Max = min(row.Min, d), max(row.Max, d)
				lo, hi = min(lo, from.ResolveRate), max(hi, from.ResolveRate)
			}
			if row.Seeds > 0 {
				row.Mean /= float64(row.Seeds)
				row.Spread = hi - lo
				row.SignP = row.Paired.SignP()
				out = append(out, row)
			}
		}
	}
	return out
}

// recipeEval is stage's evaluation in rows; with several suites, the
// first suite's.
func recipeEval(rows []report.RecipeRow, stage string) (report.Eval, bool) {
	for _, r := range rows {
		if r.Stage == stage {
			return r.Eval, true
		}
	}
	return report.Eval{}, false
}
