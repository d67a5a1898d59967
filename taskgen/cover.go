package taskgen

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Coverage counts the values of the tasks a pool has taken so far: the
// shell words of their reference solutions (commands, words, file and
// directory paths). A small policy fine-tuned on a pool's demonstrations learns to
// write a value only where demonstrations write it: drawn independently,
// a pool of 190 tasks may write one of the basic library's 22 words once,
// and the fine-tuned policy then fails every held-out task that asks for
// it, whatever it learnt of the task's shape. Synthesis draws several
// candidates for each task, alike in their steps and different in their
// values (Revalue), and keeps the one that adds most to what the pool
// covers (Choose), so every value is written several times while the
// pool's mix of task shapes stays the library's.
type Coverage struct{ seen map[string]int }

// NewCoverage returns a Coverage that has seen nothing.
func NewCoverage() *Coverage { return &Coverage{seen: map[string]int{}} }

// Add counts the values of sp.
func (c *Coverage) Add(sp *Spec) {
	for _, v := range values(sp) {
		c.seen[v]++
	}
}

// gain is what taking sp would add: first the count of its rarest value
// (lower is better: it fills a gap), then, between equals, the sum over
// its distinct values of 1/(1+n) for a value seen n times.
func (c *Coverage) gain(sp *Spec) (rarest int, sum float64) {
	rarest = -1
	for _, v := range values(sp) {
		n := c.seen[v]
		if rarest < 0 || n < rarest {
			rarest = n
		}
		sum += 1 / float64(1+n)
	}
	return rarest, sum
}

// Choose returns the candidate whose task adds most (the first of
// equals, so a single candidate is taken as it is) and counts it.
// Candidates that do not build are passed over; none building is an
// error.
func (c *Coverage) Choose(cands [][]StepRef) ([]StepRef, error) {
	best, bestSpec, bestRarest, bestSum := -1, (*Spec)(nil), 0, 0.0
	for i, refs := range cands {
		sp, err := Build(refs)
		if err != nil {
			continue
		}
		r, g := c.gain(sp)
		if best < 0 || r < bestRarest || (r == bestRarest && g > bestSum) {
			best, bestSpec, bestRarest, bestSum = i, sp, r, g
		}
	}
	if best < 0 {
		return nil, fmt.Errorf("synth: no candidate of %d builds", len(cands))
	}
	c.Add(bestSpec)
	return cands[best], nil
}

// values are the distinct shell words of sp's reference solution, so a
// word and a file named after it (echo line > /app/line.txt) are two
// values, as they are two things to learn.
func values(sp *Spec) []string {
	seen := map[string]bool{}
	var out []string
	for _, line := range sp.Solution {
		for _, w := range strings.Fields(line) {
			if !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	return out
}

// Revalue returns refs with the seeds of the steps from index from on
// drawn again from rng: the same steps consuming the same inputs, with
// other values (words, file names).
func Revalue(refs []StepRef, from int, rng *rand.Rand) []StepRef {
	out := slices.Clone(refs)
	for i := max(from, 0); i < len(out); i++ {
		out[i].Seed = rng.Uint64()
	}
	return out
}
