package taskgen

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// wordCounts counts, over pools of seeds of the basic library, how many
// of them write each of its words.
func wordCounts(t *testing.T, candidates int, seeds int, pool uint64) map[string]int {
	t.Helper()
	cov := NewCoverage()
	counts := map[string]int{}
	for i := range seeds {
		cands := [][]StepRef{Seed(Basic, rand.New(rand.NewPCG(pool, uint64(i*100))))}
		for k := 1; k < candidates; k++ {
			cands = append(cands, Revalue(cands[0], 0, rand.New(rand.NewPCG(pool, uint64(i*100+k)))))
		}
		refs, err := cov.Choose(cands)
		if err != nil {
			t.Fatal(err)
		}
		sp, err := Build(refs)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range values(sp) {
			if slices.Contains(basicWords, " "+v) || slices.Contains(basicWords, v) {
				counts[v]++
			}
		}
	}
	return counts
}

// Choosing among candidates that differ in their values writes every
// word of the library in a pool of 96 seeds, and the rarest word at least
// as often as independent draws do; one candidate is taken as drawn.
func TestCoverageWritesEveryValue(t *testing.T) {
	for pool := range uint64(5) {
		drawn, covered := wordCounts(t, 1, 96, pool), wordCounts(t, 8, 96, pool)
		least := func(c map[string]int) int {
			m := 1 << 30
			for _, w := range basicWords {
				m = min(m, c[w])
			}
			return m
		}
		t.Logf("pool %d: rarest word written by %d seeds drawn independently, %d chosen by coverage", pool, least(drawn), least(covered))
		if least(covered) < 2 || least(covered) < least(drawn) {
			t.Errorf("pool %d: rarest word %d times with coverage, %d without", pool, least(covered), least(drawn))
		}
	}
	one := Seed(Basic, rand.New(rand.NewPCG(1, 2)))
	got, err := NewCoverage().Choose([][]StepRef{one})
	if err != nil || fmt.Sprint(got) != fmt.Sprint(one) {
		t.Fatalf("one candidate: got %v, %v", got, err)
	}
	if _, err := NewCoverage().Choose(nil); err == nil {
		t.Fatal("no candidate: want an error")
	}
}
