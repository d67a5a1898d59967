package taskgen

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
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
	for _, lib := range []Library{Basic, BasicRename} {
		rng := rand.New(rand.NewPCG(5, 5))
		for range 50 {
			refs := Seed(lib, rng)
			child, err := Extend(lib, refs, 1+rng.IntN(2), rng)
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
				if !InLibrary(lib, r) || LibraryOf(r) == Full {
					t.Fatalf("%s task %v: library %s", lib, r, LibraryOf(r))
				}
			}
		}
	}
}

// The two basic libraries differ only in the move: a task of their shared
// steps grows in the library it is extended in, and a rename is the
// instruction's two paths.
func TestBasicRename(t *testing.T) {
	shared := []StepRef{{Name: "basic.file", Seed: 1, Input: -1}, {Name: "basic.copy", Seed: 2, Input: 0}}
	if _, err := Extend(BasicRename, []StepRef{{Name: "basic.file", Seed: 1, Input: -1}, {Name: "basic.move", Seed: 2, Input: 0}}, 1, rand.New(rand.NewPCG(1, 1))); err == nil {
		t.Fatal("a basic move grew in basic-rename")
	}
	moves := map[Library]*Spec{}
	for seed := range uint64(200) {
		for _, lib := range []Library{Basic, BasicRename} {
			refs, err := Extend(lib, shared, 1, rand.New(rand.NewPCG(seed, 9)))
			if err != nil {
				t.Fatal(err)
			}
			if !InLibrary(lib, refs) {
				t.Fatalf("%s grew %v", lib, refs)
			}
			if n := refs[len(refs)-1].Name; n == "basic.move" || n == "basic.rename" {
				if moves[lib], err = Build(refs); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	last := func(sp *Spec) string { return sp.Solution[len(sp.Solution)-1] }
	sp := moves[BasicRename]
	if sp == nil {
		t.Fatal("basic-rename grew no move in 200 draws")
	}
	m := regexp.MustCompile(`^mv (/app/\w+\.txt) (/app/\w+\.txt)$`).FindStringSubmatch(last(sp))
	if m == nil || !strings.Contains(sp.Instruction, "Move the file "+m[1]+" to "+m[2]+".") {
		t.Errorf("basic-rename move: %q for\n%s", last(sp), sp.Instruction)
	}
	if sp := moves[Basic]; sp == nil || !strings.HasPrefix(last(sp), "mkdir -p ") {
		t.Errorf("basic move: %+v", sp)
	}
}
