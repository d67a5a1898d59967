package moe

import "sync"

// prefixCache keeps the KV cache and routing of recent generations so that
// a request whose prompt extends an earlier sequence (the next turn of an
// agent, which holds on to its tokens) skips recomputing the shared prefix.
// A token's keys, values and routing depend only on the tokens before it
// and the weights, so a reused prefix gives bit-identical results.
type prefixCache struct {
	mu      sync.Mutex
	max     int
	clock   uint64
	entries []*cacheEntry
	hits    uint64 // tokens served from the cache
}

type cacheEntry struct {
	tokens  []int
	kt, v   [][]float32 // per layer [Hkv, len(tokens)] (keys transposed), [len(tokens), Hkv]
	routing []int32     // [len(tokens), L, K]
	used    uint64
}

// restore copies into st the longest cached prefix of prompt, leaving at
// least the last prompt token to process (its logits start sampling), and
// returns the number of positions restored and their routing.
func (c *prefixCache) restore(st *kvState, prompt []int, D, L, K int) (int, []int32) {
	if c == nil || c.max == 0 {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *cacheEntry
	bestN := 0
	for _, e := range c.entries {
		n := 0
		for n < len(e.tokens) && n < len(prompt)-1 && e.tokens[n] == prompt[n] {
			n++
		}
		if n > bestN {
			best, bestN = e, n
		}
	}
	if best == nil {
		return 0, nil
	}
	c.clock++
	best.used = c.clock
	c.hits += uint64(bestN)
	en := len(best.tokens)
	for l := 0; l < L; l++ {
		for d := 0; d < D; d++ {
			copy(st.kt[l][d*st.capacity:d*st.capacity+bestN], best.kt[l][d*en:d*en+bestN])
		}
		copy(st.v[l][:bestN*D], best.v[l][:bestN*D])
	}
	return bestN, append([]int32(nil), best.routing[:bestN*L*K]...)
}

// store records the first n processed tokens of st, replacing the least
// recently used entry when full. An entry that is a prefix of the new one
// is dropped.
func (c *prefixCache) store(st *kvState, tokens []int, routing []int32, D, L, K int) {
	if c == nil || c.max == 0 || len(tokens) == 0 {
		return
	}
	n := len(tokens)
	e := &cacheEntry{tokens: append([]int(nil), tokens...), routing: append([]int32(nil), routing[:n*L*K]...)}
	for l := 0; l < L; l++ {
		kt := make([]float32, D*n)
		for d := 0; d < D; d++ {
			copy(kt[d*n:(d+1)*n], st.kt[l][d*st.capacity:d*st.capacity+n])
		}
		e.kt = append(e.kt, kt)
		e.v = append(e.v, append([]float32(nil), st.v[l][:n*D]...))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	e.used = c.clock
	kept := c.entries[:0]
	for _, old := range c.entries {
		if len(old.tokens) <= n && equalInts(old.tokens, tokens[:len(old.tokens)]) {
			continue
		}
		kept = append(kept, old)
	}
	c.entries = kept
	if len(c.entries) >= c.max {
		lru := 0
		for i, old := range c.entries {
			if old.used < c.entries[lru].used {
				lru = i
			}
		}
		c.entries = append(c.entries[:lru], c.entries[lru+1:]...)
	}
	c.entries = append(c.entries, e)
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
