package taskgen

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
)

// Categories a step belongs to; a task's category is its last step's.
const (
	CatFiles     = "file-operations"
	CatText      = "text-processing"
	CatData      = "data-processing"
	CatArchives  = "archives"
	CatSysadmin  = "system-administration"
	CatScripting = "scripting"
	CatDebugging = "debugging"
	CatGit       = "git"
)

// Step is one kind of executable work.
//
// Apply is called with a generator whose random source is seeded for this
// step alone and, for a step that Consumes something, the input artifact.
// It must be a pure function of those two: Build relies on it to rebuild
// any task from its step list.
type Step interface {
	Name() string
	Category() string
	// Consumes lists the input kinds the step accepts; empty for a source,
	// which only adds preconditions to the environment.
	Consumes() []Kind
	Apply(g *Gen, in *Artifact) Contribution
}

// Contribution is what a step adds to a task.
type Contribution struct {
	// Env holds files the environment provides before the agent starts.
	Env []File
	// Solution is shell, run from /app with `set -euo pipefail`.
	Solution []string
	// Checks are the verifier's assertions for this step.
	Checks []Check
	// Phrase is the instruction's sentence for this step; empty for a
	// source, whose files the consuming step's phrase names.
	Phrase string
	// Produces lists the artifacts the step leaves behind.
	Produces []*Artifact
	// Replaces says the step changes or removes its input (an append in
	// place, a move), so later steps must consume what it produced.
	Replaces bool
}

// Check is one verifier assertion: the body of a pytest function, using
// only the Python standard library (imported by the test file's header).
type Check struct {
	Name string
	Body []string
	// Paths the assertion reads; the audit requires the instruction to
	// name each of them.
	Paths []string
}

// Gen is a step's view of the generator: a seeded random source and the
// names already taken in the task, so a step never overwrites another's
// output.
type Gen struct {
	rng   *rand.Rand
	taken map[string]bool
}

// Intn returns a value in [0, n).
func (g *Gen) Intn(n int) int { return g.rng.IntN(n) }

// Between returns a value in [lo, hi].
func (g *Gen) Between(lo, hi int) int { return lo + g.rng.IntN(hi-lo+1) }

// Pick returns one of xs.
func Pick[T any](g *Gen, xs []T) T { return xs[g.rng.IntN(len(xs))] }

// PickN returns n distinct elements of xs in a random order.
func PickN[T any](g *Gen, xs []T, n int) []T {
	idx := g.rng.Perm(len(xs))[:n]
	out := make([]T, n)
	for i, j := range idx {
		out[i] = xs[j]
	}
	return out
}

// Path returns a fresh absolute path dir/stem[-N]ext not used by any other
// step of the task.
func (g *Gen) Path(dir, stem, ext string) string {
	for i := 0; ; i++ {
		p := dir + "/" + stem + ext
		if i > 0 {
			p = fmt.Sprintf("%s/%s-%d%s", dir, stem, i+1, ext)
		}
		if !g.taken[p] {
			g.taken[p] = true
			return p
		}
	}
}

// quote renders s as a double-quoted literal valid in JSON and Python
// (the generator only produces printable ASCII).
func quote(s string) string { return strconv.Quote(s) }

// sh renders s as a single-quoted shell word.
func sh(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// pyList renders strings as a Python list literal.
func pyList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = quote(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Library names a set of steps that grow tasks together: a task's steps
// all come from one library. A step may belong to several libraries.
type Library string

// The libraries.
const (
	// Full spans file operations, text, data, archives, scripting,
	// debugging and git: multi-command work for capable policies.
	Full Library = "full"
	// Basic is one-command file work whose instruction carries every
	// parameter (steps_basic.go): what the reference model can learn.
	Basic Library = "basic"
	// BasicRename is Basic with its move a rename within /app ("Move the
	// file /app/log.txt to /app/test.txt.") instead of a move into a new
	// directory, a command every seed of the reference model learns from
	// its demonstrations (steps_basic.go).
	BasicRename Library = "basic-rename"
)

// Libraries lists the library names.
func Libraries() []Library { return []Library{Basic, BasicRename, Full} }

// ParseLibrary checks a library name.
func ParseLibrary(s string) (Library, error) {
	for _, l := range Libraries() {
		if string(l) == s {
			return l, nil
		}
	}
	return "", fmt.Errorf("unknown step library %q (want basic, basic-rename or full)", s)
}

// registry is the step library by name; libraries is each library's step
// names.
var (
	registry  = map[string]Step{}
	libraries = map[Library]map[string]bool{}
)

func register(s Step) { registerIn(s, Full) }

// registerIn adds s to the libraries libs. A name is one step: the
// step's name is part of every task ID it is in (Spec.ID), so two
// different steps may never share one.
func registerIn(s Step, libs ...Library) {
	if _, dup := registry[s.Name()]; dup {
		panic("synth: step registered twice: " + s.Name())
	}
	registry[s.Name()] = s
	for _, lib := range libs {
		if libraries[lib] == nil {
			libraries[lib] = map[string]bool{}
		}
		libraries[lib][s.Name()] = true
	}
}

// InLibrary reports whether every step of refs belongs to lib.
func InLibrary(lib Library, refs []StepRef) bool {
	for _, r := range refs {
		if !libraries[lib][r.Name] {
			return false
		}
	}
	return true
}

// LibraryOf returns the first library, in Libraries order, that holds
// every step of a task (Full when none does): which one of several a task
// of shared steps is in does not change how it is built.
func LibraryOf(refs []StepRef) Library {
	if len(refs) == 0 {
		return Full
	}
	for _, lib := range Libraries() {
		if InLibrary(lib, refs) {
			return lib
		}
	}
	return Full
}

// Lookup returns the named step.
func Lookup(name string) (Step, bool) { s, ok := registry[name]; return s, ok }

// Steps lists a library's steps in name order.
func Steps(lib Library) []Step {
	out := make([]Step, 0, len(registry))
	for _, n := range sortedKeys(registry) {
		if libraries[lib][n] {
			out = append(out, registry[n])
		}
	}
	return out
}

// step is the common part of the library's steps.
type step struct {
	name, cat string
	consumes  []Kind
	apply     func(g *Gen, in *Artifact) Contribution
	// envOnly: the step changes or removes its input (Contribution.
	// Replaces), so it may only consume what the environment holds: an
	// output of an earlier step is checked by that step's assertions,
	// which must still hold at the end.
	envOnly bool
}

func (s *step) EnvOnly() bool { return s.envOnly }

func (s *step) Name() string                            { return s.name }
func (s *step) Category() string                        { return s.cat }
func (s *step) Consumes() []Kind                        { return s.consumes }
func (s *step) Apply(g *Gen, in *Artifact) Contribution { return s.apply(g, in) }
