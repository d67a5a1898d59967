package main

import (
	"testing"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/report"
)

// The spread of a variant is over its seeds, stage by stage; a stage no
// seed evaluated has no row.
func TestAblationSpread(t *testing.T) {
	run := func(base, rl float64) *pipelineSummary {
		return &pipelineSummary{Recipe: []report.RecipeRow{
			{Stage: report.StageBase, Eval: report.Eval{ResolveRate: base, MeanReward: 1}},
			{Stage: report.StageRL, Eval: report.Eval{ResolveRate: rl, MeanReward: 3}},
		}}
	}
	rows := spread([]string{"", "replay-off"}, map[string][]*pipelineSummary{
		"":           {run(0, 0.5), run(0.1, 0.7), run(0, 0.6)},
		"replay-off": {run(0, 0.25)},
	})
	want := []spreadRow{
		{Variant: "", Stage: report.StageBase, Seeds: 3, ResolveMean: 0.1 / 3, ResolveMin: 0, ResolveMax: 0.1, PartialCredit: 1},
		{Variant: "", Stage: report.StageRL, Seeds: 3, ResolveMean: 0.6, ResolveMin: 0.5, ResolveMax: 0.7, PartialCredit: 3},
		{Variant: "replay-off", Stage: report.StageBase, Seeds: 1, ResolveMean: 0, ResolveMin: 0, ResolveMax: 0, PartialCredit: 1},
		{Variant: "replay-off", Stage: report.StageRL, Seeds: 1, ResolveMean: 0.25, ResolveMin: 0.25, ResolveMax: 0.25, PartialCredit: 3},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	for i := range want {
		g, w := rows[i], want[i]
		if g.Variant != w.Variant || g.Stage != w.Stage || g.Seeds != w.Seeds || !near(g.ResolveMean, w.ResolveMean) ||
			g.ResolveMin != w.ResolveMin || g.ResolveMax != w.ResolveMax || !near(g.PartialCredit, w.PartialCredit) {
			t.Errorf("row %d: %+v, want %+v", i, g, w)
		}
	}
	c := seeded(config.Default(), 7)
	if c.Run.ID != "main-s7" || c.Run.Seed != 7 || c.Inference.Model.Seed != 7 {
		t.Fatalf("seeded: %s seed %d model seed %d", c.Run.ID, c.Run.Seed, c.Inference.Model.Seed)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
