package taskgen

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/t1pipe/t1/moe"
)

// The basic library's values are one token of the reference tokenizer, the
// same token in the instruction and in the command, which is what lets a
// small policy copy them (steps_basic.go).
func TestBasicValuesAreSingleTokens(t *testing.T) {
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range basicWords {
		if ids := tok.EncodeOrdinary(" " + w); len(ids) != 1 {
			t.Errorf("word %q is %d tokens with its leading space", w, len(ids))
		}
	}
	for _, s := range basicStems {
		in := tok.EncodeOrdinary("the file /app/" + s + ".txt")
		stem := tok.EncodeOrdinary(s)
		if len(stem) != 1 || !slices.Contains(in, stem[0]) {
			t.Errorf("stem %q: %v, not one token of %v", s, stem, in)
		}
	}
}

// A basic task's reference solution is what a policy must write: one
// command per step, every parameter read off the instruction.
func TestBasicTasks(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for range 50 {
		refs := Seed(Basic, rng)
		child, err := Extend(refs, 1+rng.IntN(2), rng)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range [][]StepRef{refs, child} {
			sp, err := Build(r)
			if err != nil {
				t.Fatal(err)
			}
			if len(sp.Solution) != sp.Work || len(sp.Checks) != 2*sp.Work {
				t.Fatalf("%d steps of work, %d commands, %d checks:\n%s", sp.Work, len(sp.Solution), len(sp.Checks), sp.Instruction)
			}
			if LibraryOf(r) != Basic {
				t.Fatalf("library %s", LibraryOf(r))
			}
		}
	}
}
