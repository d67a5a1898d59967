package report

import (
	"math"
	"testing"
)

// Pairing goes by suite, version, task and attempt; attempts one side
// lacks are not pairs.
func TestPair(t *testing.T) {
	res := func(suite, task string, attempt int, v int64, solved bool) EvalResult {
		return EvalResult{Suite: suite, TaskID: task, Attempt: attempt, PolicyVersion: v, Solved: solved}
	}
	a := []EvalResult{
		res("s", "t1", 0, 1, false), res("s", "t1", 1, 1, true), res("s", "t2", 0, 1, true), res("s", "t3", 0, 1, false),
		res("other", "t1", 0, 1, true), res("s", "t1", 0, 0, true),
	}
	b := []EvalResult{
		res("s", "t1", 0, 7, true), res("s", "t1", 1, 7, true), res("s", "t2", 0, 7, false), res("s", "t3", 0, 7, true),
		res("s", "t4", 0, 7, true), res("other", "t1", 0, 7, false),
	}
	got := Pair("s", a, 1, b, 7)
	if want := (Paired{Pairs: 4, Improved: 2, Worsened: 1}); got != want {
		t.Fatalf("Pair: %+v, want %+v", got, want)
	}
	if got := got.Add(Paired{Pairs: 2, Improved: 1}); got != (Paired{Pairs: 6, Improved: 3, Worsened: 1}) {
		t.Fatalf("Add: %+v", got)
	}
}

func TestSignP(t *testing.T) {
	for _, c := range []struct {
		up, down int
		want     float64
	}{
		{0, 0, 1},
		{1, 0, 1},
		{5, 5, 1},
		{8, 0, 2.0 / 256},
		{0, 8, 2.0 / 256},
		{4, 1, 2 * 6.0 / 32},
		{21, 1, 2 * 23.0 / (1 << 22)},
		{600, 400, 2.7284641560660184e-10}, // exact (Python fractions); far past what float64 factorials hold
	} {
		got := Paired{Improved: c.up, Worsened: c.down}.SignP()
		if math.Abs(got-c.want) > 1e-9*c.want {
			t.Errorf("SignP(%d, %d) = %g, want %g", c.up, c.down, got, c.want)
		}
	}
}

// Wilson's interval against values computed independently (the closed
// form evaluated in Python), at the edges and for the default run's rates.
func TestWilson(t *testing.T) {
	for _, c := range []struct {
		k, n   int
		lo, hi float64
	}{{0, 48, 0, 0.0741}, {41, 48, 0.7283, 0.9275}, {43, 48, 0.7783, 0.9547}, {1, 6, 0.0301, 0.5635}, {0, 0, 0, 1}} {
		lo, hi := Wilson(c.k, c.n)
		if math.Abs(lo-c.lo) > 1e-4 || math.Abs(hi-c.hi) > 1e-4 {
			t.Errorf("Wilson(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", c.k, c.n, lo, hi, c.lo, c.hi)
		}
	}
}
