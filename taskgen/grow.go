package taskgen

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// sources and transforms split the library by whether a step consumes.
func sources(lib Library) (out []Step) {
	for _, s := range Steps(lib) {
		if len(s.Consumes()) == 0 {
			out = append(out, s)
		}
	}
	return out
}

func transforms(lib Library) (out []Step) {
	for _, s := range Steps(lib) {
		if len(s.Consumes()) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// Seed returns a round-0 task of lib: one source and one step that
// consumes it.
func Seed(lib Library, rng *rand.Rand) []StepRef {
	srcs := sources(lib)
	refs := []StepRef{{Name: srcs[rng.IntN(len(srcs))].Name(), Seed: rng.Uint64(), Input: -1}}
	return append(refs, pickTransform(lib, rng, mustFold(refs), 0, nil))
}

// Extend returns parent, a task of lib, grown by n steps of lib that do
// work. Each new step consumes an artifact the task already has,
// preferring the most recent ones so the solution path gets longer rather
// than wider; now and then a new source joins the environment and the
// next step consumes it. lib is named rather than read off the parent: a
// parent of shared steps alone is in several libraries.
func Extend(lib Library, parent []StepRef, n int, rng *rand.Rand) ([]StepRef, error) {
	if _, err := Build(parent); err != nil {
		return nil, fmt.Errorf("synth: parent: %w", err)
	}
	if !InLibrary(lib, parent) {
		return nil, fmt.Errorf("synth: parent has steps outside the %s library", lib)
	}
	refs := slices.Clone(parent)
	used := map[StepRef]bool{}
	for _, r := range parent {
		used[StepRef{Name: r.Name, Input: r.Input}] = true
	}
	for range n {
		only := -1
		if rng.IntN(5) == 0 {
			srcs := sources(lib)
			refs = append(refs, StepRef{Name: srcs[rng.IntN(len(srcs))].Name(), Seed: rng.Uint64(), Input: -1})
			only = len(refs) - 1
		}
		ref := pickTransform(lib, rng, mustFold(refs), only, used)
		used[StepRef{Name: ref.Name, Input: ref.Input}] = true
		refs = append(refs, ref)
	}
	return refs, nil
}

// mustFold returns the artifacts of refs, which the caller built from
// valid refs.
func mustFold(refs []StepRef) []*Artifact {
	sp, err := fold(refs)
	if err != nil {
		panic(err)
	}
	return sp.Artifacts
}

// pickTransform chooses a step and an input. With only >= 0 it must consume
// that artifact; otherwise later artifacts weigh more. Pairs in used are
// avoided while any other pair exists.
func pickTransform(lib Library, rng *rand.Rand, arts []*Artifact, only int, used map[StepRef]bool) StepRef {
	type cand struct {
		step  Step
		input int
		w     int
	}
	var all, fresh []cand
	for _, st := range transforms(lib) {
		for i, a := range arts {
			eo, _ := st.(interface{ EnvOnly() bool })
			if (only >= 0 && i != only) || a.Replaced || (eo != nil && eo.EnvOnly() && !a.FromEnv) || !slices.Contains(st.Consumes(), a.Kind) {
				continue
			}
			c := cand{st, i, 1 + 3*i}
			all = append(all, c)
			if !used[StepRef{Name: st.Name(), Input: i}] {
				fresh = append(fresh, c)
			}
		}
	}
	cs := all
	if len(fresh) > 0 {
		cs = fresh
	}
	if len(cs) == 0 {
		panic(fmt.Sprintf("synth: no step consumes artifact %d", only))
	}
	total := 0
	for _, c := range cs {
		total += c.w
	}
	x := rng.IntN(total)
	for _, c := range cs {
		if x < c.w {
			return StepRef{Name: c.step.Name(), Seed: rng.Uint64(), Input: c.input}
		}
		x -= c.w
	}
	panic("unreachable")
}

// Suite grows n tasks of lib for evaluation from seed, each through rounds
// extensions, in a random stream of its own: a suite's seed never meets the
// seeds synthesis draws for training, so the two start apart. (Audit's
// near-duplicate check against the suite keeps them apart.)
func Suite(lib Library, seed uint64, n, rounds int) [][]StepRef {
	rng := rand.New(rand.NewPCG(seed, 0x65766131)) // "eva1"
	out := make([][]StepRef, n)
	for i := range out {
		refs := Seed(lib, rng)
		for range rounds {
			refs, _ = Extend(lib, refs, 1+rng.IntN(2), rng)
		}
		out[i] = refs
	}
	return out
}
