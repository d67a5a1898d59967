package synth

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/taskgen"
	"github.com/t1pipe/t1/trial"
)

func backend(t *testing.T) sandbox.Backend { return testinfra.Bubblewrap(t) }

// Grown tasks are kept only by execution: the oracle passes everything,
// the parent's solution fails exactly the new assertions.
func TestExecuteKeepsGrownTasks(t *testing.T) {
	t.Parallel()
	opt := trial.Options{Backend: backend(t)}
	rng := rand.New(rand.NewPCG(5, 5))
	n := 4
	if testing.Short() {
		n = len(taskgen.Libraries()) // each library once
	}
	for i := range n {
		// Every library: the basic ones' steps that change a file must
		// leave every earlier assertion true. The tasks are drawn here, in
		// order, so that each subtest's is the same however they run.
		lib := taskgen.Libraries()[i%len(taskgen.Libraries())]
		parentRefs := taskgen.Seed(lib, rng)
		childRefs, err := taskgen.Extend(lib, parentRefs, 2, rng)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			parent, _ := taskgen.Build(parentRefs)
			child, _ := taskgen.Build(childRefs)
			tk, err := child.Task(1)
			if err != nil {
				t.Fatal(err)
			}
			v, err := Execute(ctx, child, parent, tk, filepath.Join(t.TempDir(), tk.Name), opt)
			if err != nil {
				t.Fatal(err)
			}
			if !v.Keep {
				t.Fatalf("task %d (%v) dropped: %s", i, childRefs, v.Reason)
			}
			if got := v.Parent.Report.Failed + v.Parent.Report.Errors; got != len(v.New) {
				t.Fatalf("parent's solution fails %d assertions, want the %d new ones", got, len(v.New))
			}
		})
	}
}

// A child whose new step the parent's solution already satisfies is
// dropped: its extension adds no work.
func TestExecuteDropsAChildThatAddsNothing(t *testing.T) {
	t.Parallel()
	opt := trial.Options{Backend: backend(t)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	refs := []taskgen.StepRef{{Name: "source.log", Seed: 1, Input: -1}, {Name: "text.count", Seed: 2, Input: 0}}
	sp, _ := taskgen.Build(refs)
	// The "parent" here is the task itself: its solution passes all.
	tk, _ := sp.Task(1)
	parent := *sp
	parent.Checks = sp.Checks[:0]
	v, err := Execute(ctx, sp, &parent, tk, filepath.Join(t.TempDir(), tk.Name), opt)
	if err != nil {
		t.Fatal(err)
	}
	if v.Keep {
		t.Fatal("kept a child whose new assertions the parent's solution passes")
	}
}

// Three rounds from a handful of seeds: every task is kept by execution
// and each round's solution is longer than its parent's.
func TestThreeRoundsGrowSolutions(t *testing.T) {
	if testing.Short() {
		t.Skip("three rounds of sandboxed synthesis: skipped with -short")
	}
	opt := trial.Options{Backend: backend(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(11, 3))
	for seed := range 2 {
		refs := taskgen.Seed(taskgen.Full, rng)
		var parent *taskgen.Spec
		prevLines := 0
		for round := range 3 {
			if round > 0 {
				var err error
				if refs, err = taskgen.Extend(taskgen.Full, refs, 2, rng); err != nil {
					t.Fatal(err)
				}
			}
			sp, err := taskgen.Build(refs)
			if err != nil {
				t.Fatal(err)
			}
			tk, err := sp.Task(round)
			if err != nil {
				t.Fatal(err)
			}
			v, err := Execute(ctx, sp, parent, tk, filepath.Join(t.TempDir(), tk.Name), opt)
			if err != nil {
				t.Fatal(err)
			}
			if !v.Keep {
				t.Fatalf("seed %d round %d dropped: %s", seed, round, v.Reason)
			}
			if lines := len(sp.Solution); lines <= prevLines {
				t.Fatalf("seed %d round %d: solution of %d lines after %d", seed, round, lines, prevLines)
			} else {
				prevLines = lines
			}
			parent = sp
		}
	}
}
