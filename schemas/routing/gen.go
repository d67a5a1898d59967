package routing

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Uniform fills a record with independent, uniformly random sets, the
// worst case for any coder.
func Uniform(rng *rand.Rand, tokens, layers, topK, experts int) (*Record, error) {
	r, err := NewRecord(tokens, layers, topK, experts)
	if err != nil {
		return nil, err
	}
	set := make([]int, topK)
	for t := range tokens {
		for l := range layers {
			pick(rng, set, experts, nil)
			if err := r.Set(t, l, set); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// Correlated fills a record the way trained routers behave: each layer
// has its own Zipf-like expert popularity (exponent s, over a per-layer
// random permutation of experts), and each expert of a token's set stays
// selected for the next token with probability keep.
func Correlated(rng *rand.Rand, tokens, layers, topK, experts int, keep, s float64) (*Record, error) {
	r, err := NewRecord(tokens, layers, topK, experts)
	if err != nil {
		return nil, err
	}
	// Cumulative Zipf weights over popularity ranks, shared by layers.
	cdf := make([]float64, experts)
	sum := 0.0
	for i := range experts {
		sum += 1 / math.Pow(float64(i+1), s)
		cdf[i] = sum
	}
	perms := make([][]int, layers)
	for l := range perms {
		perms[l] = rng.Perm(experts)
	}
	prev := make([][]int, layers)
	set := make([]int, 0, topK)
	in := make(map[int]bool, topK)
	for t := range tokens {
		for l := range layers {
			set = set[:0]
			clear(in)
			if t > 0 {
				for _, e := range prev[l] {
					if rng.Float64() < keep {
						set = append(set, e)
						in[e] = true
					}
				}
			}
			for len(set) < topK {
				i, _ := slices.BinarySearch(cdf, rng.Float64()*sum)
				e := perms[l][min(i, experts-1)]
				if !in[e] {
					set = append(set, e)
					in[e] = true
				}
			}
			if err := r.Set(t, l, set); err != nil {
				return nil, err
			}
			prev[l] = append(prev[l][:0], set...)
		}
	}
	return r, nil
}

// pick draws len(set) distinct values below n.
func pick(rng *rand.Rand, set []int, n int, _ map[int]bool) {
	for i := range set {
	again:
		v := rng.IntN(n)
		for _, u := range set[:i] {
			if u == v {
				goto again
			}
		}
		set[i] = v
	}
}
