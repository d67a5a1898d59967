package ablation

import (
	"fmt"
	"strings"
	"testing"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/execute"
	"github.com/t1pipe/t1/report"
)

// The spread of a variant is over its seeds, stage by stage; a stage no
// seed evaluated has no row.
func TestAblationSpread(t *testing.T) {
	run := func(base, rl float64) *execute.Summary {
		return &execute.Summary{Recipe: []report.RecipeRow{
			{Stage: report.StageBase, Eval: report.Eval{ResolveRate: base, MeanReward: 1}},
			{Stage: report.StageRL, Eval: report.Eval{ResolveRate: rl, MeanReward: 3}},
		}}
	}
	rows := spread([]string{"", "replay-off"}, map[string][]*execute.Summary{
		"":           {run(0, 0.5), run(0.1, 0.7), run(0, 0.6)},
		"replay-off": {run(0, 0.25)},
	})
	want := []Spread{
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
	c := seeded(config.Default(), 7, 0)
	if c.Run.ID != "main-s7" || c.Run.Seed != 7 || c.Inference.Model.Seed != 7 {
		t.Fatalf("seeded: %s seed %d model seed %d", c.Run.ID, c.Run.Seed, c.Inference.Model.Seed)
	}
	if c = seeded(config.Default(), 7, 3); c.Run.ID != "main-m3-s7" || c.Run.Seed != 7 || c.Inference.Model.Seed != 3 {
		t.Fatalf("seeded from model seed 3: %s seed %d model seed %d", c.Run.ID, c.Run.Seed, c.Inference.Model.Seed)
	}
}

// A step's gain is taken within each seed: the seeds' fine-tuned policies
// may differ by more than RL moves any one of them, and the row shows both.
// The attempts a step changed are paired within each seed, a branch's
// earlier evaluation being its ancestor's, and pooled over the seeds.
func TestAblationGains(t *testing.T) {
	seed := 0
	run := func(base, sft, rl float64) *execute.Summary {
		seed++
		id := fmt.Sprintf("r-s%d", seed)
		return &execute.Summary{Run: id, Recipe: []report.RecipeRow{
			{Stage: report.StageBase, Eval: report.Eval{Suite: "s", PolicyVersion: 0, ResolveRate: base}},
			{Stage: report.StageSFT, Eval: report.Eval{Suite: "s", PolicyVersion: 1, ResolveRate: sft, From: "parent-" + id}},
			{Stage: report.StageRL, Eval: report.Eval{Suite: "s", PolicyVersion: 3, ResolveRate: rl}},
		}}
	}
	noSFT := &execute.Summary{Recipe: []report.RecipeRow{
		{Stage: report.StageBase, Eval: report.Eval{ResolveRate: 0.5}},
		{Stage: report.StageRL, Eval: report.Eval{ResolveRate: 0.9}},
	}}
	res := func(v int64, solved ...bool) []report.EvalResult {
		var out []report.EvalResult
		for i, s := range solved {
			out = append(out, report.EvalResult{Suite: "s", TaskID: "t", Attempt: i, PolicyVersion: v, Solved: s})
		}
		return out
	}
	results := map[string][]report.EvalResult{
		// Seed 1: one attempt up, one down; seed 2: one up; seed 3's
		// ancestor is missing, so it has no pairs.
		"parent-r-s1": res(1, false, true, false), "r-s1": res(3, true, false, false),
		"parent-r-s2": res(1, false, true), "r-s2": res(3, true, true),
		"r-s3": res(3, true),
	}
	rows := gains([]string{""}, map[string][]*execute.Summary{
		"": {run(0, 0.6, 0.7), run(0, 0.8, 0.85), run(0.1, 0.7, 0.65), noSFT},
	}, results)
	want := []Gain{
		{From: report.StageBase, To: report.StageSFT, Seeds: 3, Mean: (0.6 + 0.8 + 0.6) / 3, Min: 0.6, Max: 0.8, Spread: 0.1, SignP: 1},
		{From: report.StageSFT, To: report.StageRL, Seeds: 3, Mean: (0.1 + 0.05 - 0.05) / 3, Min: -0.05, Max: 0.1, Spread: 0.2,
			Paired: report.Paired{Pairs: 5, Improved: 2, Worsened: 1}, SignP: 1},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	for i, w := range want {
		g := rows[i]
		if g.From != w.From || g.To != w.To || g.Seeds != w.Seeds || !near(g.Mean, w.Mean) || !near(g.Min, w.Min) ||
			!near(g.Max, w.Max) || !near(g.Spread, w.Spread) || g.Paired != w.Paired || !near(g.SignP, w.SignP) {
			t.Errorf("row %d: %+v, want %+v", i, g, w)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// A plan runs the base run of each seed first, each variant as a branch
// of its seed's base run where it departs from it, and groups the runs
// for the spread: by variant, or with RL seeds by the base run whose
// fine-tuned policy they train.
func TestNewPlan(t *testing.T) {
	cfg := config.Default()
	cfg.Variants = []config.Variant{{Name: "replay-off", Set: map[string]any{"training.replay": false}}}
	p, err := NewPlan(cfg, Options{Seeds: []uint{1, 2}}, "pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range p.Runs {
		ids = append(ids, fmt.Sprintf("%s %v %s %s", r.Config.Run.ID, r.Branch, r.Parent, r.Stage))
	}
	if got := fmt.Sprint(ids); got != "[main-s1 false   main-s1-replay-off true main-s1 ppo main-s2 false   main-s2-replay-off true main-s2 ppo]" {
		t.Fatalf("plan %s", got)
	}
	if p.jobs != 2 || fmt.Sprint(p.groups) != "[ replay-off]" || p.groupOf["main-s2-replay-off"] != "replay-off" {
		t.Fatalf("jobs %d, groups %q, %v", p.jobs, p.groups, p.groupOf)
	}
	p, err = NewPlan(cfg, Options{RLSeeds: []uint{1, 2, 3}}, "pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ids = ids[:0]
	for _, r := range p.Runs {
		ids = append(ids, r.Config.Run.ID+" "+p.groupOf[r.Config.Run.ID])
	}
	if got := fmt.Sprint(ids); got != "[main main main-rl2 main main-rl3 main]" || p.jobs != 3 || len(p.Variants) != 0 {
		t.Fatalf("RL seeds: %s, jobs %d, variants %v", got, p.jobs, p.Variants)
	}
	for o, want := range map[*Options]string{
		{BaseOnly: true}: "--base-only compares the base run over seeds",
		{BaseOnly: true, Variants: []string{"replay-off"}}: "--base-only runs no variant",
		{ModelSeed: 3}: "--model-seed starts every seed",
		{RLSeeds: []uint{1}, Variants: []string{"x"}}: "--rl-seeds trains",
		{Variants: []string{"nope"}}:                  "nope",
	} {
		if _, err := NewPlan(cfg, *o, "pipeline.yaml"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", *o, err, want)
		}
	}
	cfg.Variants = nil
	if _, err := NewPlan(cfg, Options{}, "the configuration"); err == nil || !strings.Contains(err.Error(), "variants: in the configuration") {
		t.Errorf("no variants: %v", err)
	}
}
