package synth

import (
	"fmt"
	"strings"
	"testing"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/taskgen"
)

// fanOutSeeds is what round 0 of 96 seeds emits with candidates.
func fanOutSeeds(t *testing.T, candidates int) [][]taskgen.StepRef {
	t.Helper()
	ev := testinfra.RootEvent(t, "cover", schemas.SynthRequested, "round-0", schemas.SynthRequestedPayload{Round: 0, Seeds: 96, Seed: 1})
	var out [][]taskgen.StepRef
	for _, c := range testinfra.Feed(t, New(Config{Candidates: candidates}), ev) {
		var p schemas.SynthCandidatePayload
		if err := c.Decode(&p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Steps)
	}
	return out
}

// One candidate fans out the draws synthesis always made, so runs that
// ask for it grow the pools they grew before; eight write every word of
// the basic library at least twice in round 0, with the same steps.
func TestFanOutCoversTheLibrarysValues(t *testing.T) {
	one, eight := fanOutSeeds(t, 1), fanOutSeeds(t, 8)
	for i, refs := range one {
		if want := taskgen.Seed(taskgen.Basic, rngFor(1, fmt.Sprintf("round-0/seed-%d", i))); fmt.Sprint(refs) != fmt.Sprint(want) {
			t.Fatalf("seed %d: one candidate emitted %v, not the draw %v", i, refs, want)
		}
	}
	words := func(pool [][]taskgen.StepRef) map[string]int {
		n := map[string]int{}
		for _, refs := range pool {
			sp, err := taskgen.Build(refs)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range sp.Solution {
				if f := strings.Fields(line); f[0] == "echo" {
					n[f[1]]++
				}
			}
		}
		return n
	}
	drawn, covered := words(one), words(eight)
	for _, w := range []string{"branch", "build", "check", "code", "colour", "command", "commit", "count",
		"directory", "docs", "feature", "file", "git", "grep", "line", "lines", "logs", "port", "read",
		"server", "src", "tests"} {
		if covered[w] < 2 {
			t.Errorf("%q written by %d of 96 seeds chosen for coverage (%d drawn once)", w, covered[w], drawn[w])
		}
	}
	for i := range one {
		for j := range one[i] {
			if one[i][j].Name != eight[i][j].Name || one[i][j].Input != eight[i][j].Input {
				t.Fatalf("seed %d: coverage changed the steps: %v against %v", i, eight[i], one[i])
			}
		}
	}
}

// With AvoidEval's references, round 0 emits no task that audit would
// exclude as a near-duplicate of the held-out suite; without them, some.
func TestFanOutAvoidsTheSuite(t *testing.T) {
	var refs []harbor.Reference
	for _, steps := range taskgen.Suite(taskgen.Basic, 1000, 96, 0) {
		sp, err := taskgen.Build(steps)
		if err != nil {
			t.Fatal(err)
		}
		task, err := sp.Task(0)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, harbor.Reference{Name: sp.ID(), Print: harbor.FingerprintOf(task)})
	}
	near := func(cfg Config) int {
		ev := testinfra.RootEvent(t, "avoid", schemas.SynthRequested, "round-0", schemas.SynthRequestedPayload{Round: 0, Seeds: 192, Seed: 1})
		n := 0
		for _, c := range testinfra.Feed(t, New(cfg), ev) {
			var p schemas.SynthCandidatePayload
			if err := c.Decode(&p); err != nil {
				t.Fatal(err)
			}
			if (&stage{cfg: Config{Avoid: refs, MaxSimilarity: 0.8}}).nearEval(p.Steps) {
				n++
			}
		}
		return n
	}
	if n := near(Config{Candidates: 8}); n == 0 {
		t.Fatal("no near-duplicate of the suite among 192 seeds drawn without references: the test shows nothing")
	}
	if n := near(Config{Candidates: 8, Avoid: refs, MaxSimilarity: 0.8}); n != 0 {
		t.Errorf("%d of 192 seeds are near-duplicates of the suite with its references", n)
	}
}
