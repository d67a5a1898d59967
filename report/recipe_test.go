package report

import (
	"strings"
	"testing"
)

// The recipe table takes the base, the fine-tuned and the last policy's
// evaluation, whatever else was evaluated in between.
func TestRecipe(t *testing.T) {
	r := &Run{ID: "r", SFT: []SFT{{PolicyVersion: 1}}, Evals: []Eval{
		{Suite: "s", PolicyVersion: 0, ResolveRate: 0},
		{Suite: "s", PolicyVersion: 1, ResolveRate: 0.25},
		{Suite: "s", PolicyVersion: 3, ResolveRate: 0.4},
		{Suite: "s", PolicyVersion: 4, ResolveRate: 0.5},
	}}
	rows := Recipe(r)
	var got []string
	for _, row := range rows {
		got = append(got, row.Stage+"@v"+string(rune('0'+row.PolicyVersion)))
	}
	if strings.Join(got, ",") != "base@v0,after SFT@v1,after RL@v4" {
		t.Fatalf("recipe rows %v", got)
	}
	// Without fine-tuning there is no middle row.
	r.SFT = nil
	if rows := Recipe(r); len(rows) != 2 || rows[1].Stage != StageRL || rows[1].PolicyVersion != 4 {
		t.Fatalf("recipe without SFT: %+v", rows)
	}
}

// A run whose updates had nothing to learn from says so, in words, where
// its training is reported.
func TestReportSaysWhenThereWasNoSignal(t *testing.T) {
	r := &Run{ID: "r", Status: "completed", Updates: []Update{
		{Iteration: 0, PolicyVersion: 1, Skipped: "every advantage is 0", WarmupEnd: "rewards do not vary"},
		{Iteration: 1, PolicyVersion: 2, Skipped: "every advantage is 0"},
	}}
	md, _, err := Render([]*Run{r})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"No learning signal, so the policy did not change, in iteration 0 (v1: every advantage is 0) and iteration 1 (v2: every advantage is 0).",
		"No update of this run changed the policy",
		"Iteration 0: every attempt earned the same reward",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	r.Updates[1].Skipped = ""
	md, _, _ = Render([]*Run{r})
	if strings.Contains(string(md), "No update of this run changed the policy") {
		t.Error("a run with one real update reported as unchanged")
	}
}

// An evaluation with attempts whose rollout or reward failed says how many
// its rates leave out.
func TestReportCountsUnscoredAttempts(t *testing.T) {
	r := &Run{ID: "r", Status: "completed", Evals: []Eval{{Suite: "s", PolicyVersion: 2, Tasks: 3, Attempts: 5, Unscored: 1, ResolveRate: 0.4}}}
	md, _, err := Render([]*Run{r})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "5 (+1 unscored)") {
		t.Fatalf("report does not count the unscored attempt:\n%s", md)
	}
}

// Fine-tuning that left demonstrations out because their replay failed
// the verifier says how many.
func TestReportCountsUnsolvedDemonstrations(t *testing.T) {
	r := &Run{ID: "r", Status: "completed", SFT: []SFT{{PolicyVersion: 1, Demonstrations: 40, Unsolved: 2}}}
	md, _, err := Render([]*Run{r})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "on demonstrations of 40 tasks (2 left out: their replay failed the verifier)") {
		t.Fatalf("report does not count the unsolved demonstrations:\n%s", md)
	}
}

// The report opens with the answer, once, with intervals and paired
// tests; facts and event counts come last; rewards of evaluations stored
// under one iteration stay apart per policy version.
func TestReportOpensWithTheAnswer(t *testing.T) {
	r := defaultShaped()
	for _, v := range []int64{0, 1, 4} {
		r.Rewards = append(r.Rewards, Reward{TaskID: "eval-syn-00", Purpose: "eval", PolicyVersion: v, Reward: float64(v), Passed: int(v), Total: 4})
	}
	md, _, err := Render([]*Run{r})
	if err != nil {
		t.Fatal(err)
	}
	s := string(md)
	var sections []string
	for _, line := range strings.Split(s, "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			sections = append(sections, h)
		}
	}
	if len(sections) < 4 || sections[0] != "Result" || sections[1] != "Training" || sections[len(sections)-2] != "Run" || sections[len(sections)-1] != "Events" {
		t.Fatalf("sections %v: want Result, Training first and Run, Events last", sections)
	}
	for _, want := range []string{
		"| builtin | after SFT | v1 | 48 | 0.854 (41/48) | [0.728, 0.928] |",
		"| +41 −0 of 48 paired, p = 9.1e-13 |",
		"| +2 −0 of 48 paired, p = 0.500 |",
		"| eval | v0 | 0 | 1 | 0 |", "| eval | v4 | 0 | 1 | 4 |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "| builtin | after SFT | v1 |") + strings.Count(s, "| builtin | v1 | 24 |"); n != 1 {
		t.Errorf("the SFT policy's evaluation is shown %d times, want once", n)
	}
}
