package taskgen

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// grow makes n tasks of lib of up to four rounds each from one seed.
func grow(t *testing.T, lib Library, seed uint64, n int) [][]StepRef {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var out [][]StepRef
	for i := range n {
		refs := Seed(lib, rng)
		out = append(out, refs)
		for range i % 4 {
			var err error
			if refs, err = Extend(lib, refs, 1+rng.IntN(2), rng); err != nil {
				t.Fatal(err)
			}
			out = append(out, refs)
		}
	}
	return out
}

func render(t *testing.T, refs []StepRef) []byte {
	t.Helper()
	sp, err := Build(refs)
	if err != nil {
		t.Fatalf("build %v: %v", refs, err)
	}
	var b bytes.Buffer
	for _, f := range sp.Files() {
		b.WriteString("== " + f.Path + "\n")
		b.Write(f.Data)
	}
	return b.Bytes()
}

func TestDeterministic(t *testing.T) {
	for _, lib := range Libraries() {
		t.Run(string(lib), func(t *testing.T) { testDeterministic(t, lib) })
	}
}

func testDeterministic(t *testing.T, lib Library) {
	a, b := grow(t, lib, 42, 12), grow(t, lib, 42, 12)
	if len(a) != len(b) {
		t.Fatalf("%d vs %d tasks", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(render(t, a[i]), render(t, b[i])) {
			t.Fatalf("task %d differs between equal seeds", i)
		}
	}
	c := grow(t, lib, 43, 12)
	if bytes.Equal(render(t, a[5]), render(t, c[5])) {
		t.Fatal("different seeds gave the same task")
	}
}

// Every kind a step produces has a consumer, and every step runs on every
// kind it claims to consume, so extension never gets stuck.
func TestLibraryClosed(t *testing.T) {
	for _, lib := range Libraries() {
		t.Run(string(lib), func(t *testing.T) { testLibraryClosed(t, lib) })
	}
}

func testLibraryClosed(t *testing.T, lib Library) {
	produced := map[Kind][]StepRef{} // a task prefix that ends in an artifact of the kind
	for _, refs := range grow(t, lib, 7, 60) {
		sp, err := fold(refs)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range sp.Artifacts {
			if _, ok := produced[a.Kind]; !ok {
				produced[a.Kind] = slices.Clone(refs[:i+1])
			}
		}
	}
	cats := map[string]bool{}
	for _, st := range Steps(lib) {
		cats[st.Category()] = true
		for _, k := range st.Consumes() {
			prefix, ok := produced[k]
			if !ok {
				t.Errorf("%s consumes %s, which no grown task produced", st.Name(), k)
				continue
			}
			refs := append(slices.Clone(prefix), StepRef{Name: st.Name(), Seed: 9, Input: len(prefix) - 1})
			if _, err := Build(refs); err != nil {
				t.Errorf("%s on %s: %v", st.Name(), k, err)
			}
		}
	}
	for k := range produced {
		consumed := false
		for _, st := range Steps(lib) {
			consumed = consumed || slices.Contains(st.Consumes(), k)
		}
		if !consumed {
			t.Errorf("no step consumes %s", k)
		}
	}
	if lib != Full {
		return
	}
	for _, c := range []string{CatFiles, CatText, CatData, CatArchives, CatSysadmin, CatScripting, CatDebugging, CatGit} {
		if !cats[c] {
			t.Errorf("no step in category %s", c)
		}
	}
}

// The instruction names every path an assertion reads: the verifier never
// checks what the instruction does not ask for.
func TestNoHiddenRequirement(t *testing.T) {
	for _, lib := range Libraries() {
		t.Run(string(lib), func(t *testing.T) { testNoHiddenRequirement(t, lib) })
	}
}

func testNoHiddenRequirement(t *testing.T, lib Library) {
	// The full library quotes paths; the basic ones spell them bare, so
	// that a path is the same tokens in the instruction and the command.
	named := func(instr, p string) bool { return strings.Contains(instr, "`"+p+"`") }
	if lib != Full {
		named = func(instr, p string) bool {
			return strings.Contains(instr, " "+p+" ") || strings.Contains(instr, " "+p+".")
		}
	}
	for _, refs := range grow(t, lib, 11, 40) {
		sp, err := Build(refs)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range sp.Checks {
			if len(c.Paths) == 0 {
				t.Errorf("%s: assertion reads no declared path", c.Name)
			}
			for _, p := range c.Paths {
				if !named(sp.Instruction, p) {
					t.Errorf("%s reads %s, which the instruction never names:\n%s", c.Name, p, sp.Instruction)
				}
			}
		}
	}
}

// A child keeps its parent's steps and assertions and adds its own.
func TestExtendKeepsParent(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	parent := Seed(Full, rng)
	child, err := Extend(Full, parent, 2, rng)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(child[:len(parent)], parent) {
		t.Fatal("child does not start with the parent's steps")
	}
	ps, _ := Build(parent)
	cs, _ := Build(child)
	if cs.Work != ps.Work+2 {
		t.Fatalf("work %d → %d, want +2", ps.Work, cs.Work)
	}
	for i, c := range ps.Checks {
		if cs.Checks[i].Name != c.Name || !slices.Equal(cs.Checks[i].Body, c.Body) {
			t.Fatalf("parent assertion %s changed in the child", c.Name)
		}
	}
	if len(cs.Phrases) <= len(ps.Phrases) {
		t.Fatal("child instruction asks for no new work")
	}
}

func TestBuildRejectsBadRefs(t *testing.T) {
	for name, refs := range map[string][]StepRef{
		"empty":        nil,
		"unknown step": {{Name: "nope", Input: -1}},
		"only sources": {{Name: "source.log", Input: -1}},
		"no input":     {{Name: "source.log", Input: -1}, {Name: "text.count", Input: 5}},
		"wrong kind":   {{Name: "source.csv", Input: -1}, {Name: "text.count", Input: 0}},
		"source input": {{Name: "source.log", Input: 0}},
	} {
		if _, err := Build(refs); err == nil {
			t.Errorf("%s: Build accepted %v", name, refs)
		}
	}
}
