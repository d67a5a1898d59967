package routing

import "math/bits"

// Fast paths for records of ≤ 256 experts: a set is also held as a
// 256-bit bitset, which turns set overlap and "how many previous experts
// lie below e" into a few AND/popcount operations instead of branchy
// merges of sorted lists.

type bitset256 [4]uint64

func setBits(ids []byte) bitset256 {
	var b bitset256
	for _, e := range ids {
		b[e>>6] |= 1 << (e & 63)
	}
	return b
}

func (b *bitset256) has(e byte) bool { return b[e>>6]&(1<<(e&63)) != 0 }

func overlap256(a, b *bitset256) int {
	return bits.OnesCount64(a[0]&b[0]) + bits.OnesCount64(a[1]&b[1]) + bits.OnesCount64(a[2]&b[2]) + bits.OnesCount64(a[3]&b[3])
}

func deltaHistogram8(r *Record) []uint64 {
	k, L := r.TopK, r.Layers
	hist := make([]uint64, k+1)
	prev := make([]bitset256, L)
	for s := range r.Tokens * L {
		cur := setBits(r.IDs[s*k : s*k+k])
		if s >= L {
			hist[k-overlap256(&cur, &prev[s%L])]++
		}
		prev[s%L] = cur
	}
	return hist
}

// encodeDelta8 writes the per-set differences of encodeDelta for t ≥ 1.
func encodeDelta8(w *bitWriter, c *combin, r *Record, lens []byte, codes []uint32) {
	k, L, E := r.TopK, r.Layers, r.Experts
	nb := c.rankBits(E, k)
	widths, radix := diffTables(c, k, E)
	prev := make([]bitset256, L)
	dropped, added := make([]int, 0, k), make([]int, 0, k)
	full := make([]int, k)
	for s := range r.Tokens * L {
		ids := r.IDs[s*k : s*k+k]
		cur := setBits(ids)
		p := &prev[s%L]
		if s < L {
			for j, e := range ids {
				full[j] = int(e)
			}
			w.put(c.rank(full), nb)
			*p = cur
			continue
		}
		dropped, added = dropped[:0], added[:0]
		for j, e := range r.IDs[(s-L)*k : (s-L)*k+k] {
			if !cur.has(e) {
				dropped = append(dropped, j)
			}
		}
		prevIDs := r.IDs[(s-L)*k : (s-L)*k+k]
		q := 0 // previous experts below e; both sets ascend
		for _, e := range ids {
			if !p.has(e) {
				for q < k && prevIDs[q] < e {
					q++
				}
				added = append(added, int(e)-q)
			}
		}
		x := len(dropped)
		w.put(uint64(codes[x]), int(lens[x]))
		if x > 0 {
			w.put(c.rank(dropped)*radix[x]+c.rank(added), widths[x])
		}
		*p = cur
	}
}

// diffTables precomputes, per replaced count x, the bit width of the
// difference number and C(E−k, x), its radix of added experts.
func diffTables(c *combin, k, e int) (widths []int, radix []uint64) {
	widths, radix = make([]int, k+1), make([]uint64, k+1)
	for x := range widths {
		widths[x] = diffBits(c, k, e, x)
		radix[x] = c.at(e-k, x)
	}
	return widths, radix
}

// decodeDelta8 decodes the sets of tokens t ≥ 1 (token 0 is already in
// r.IDs) of a ≤ 256-expert record.
func decodeDelta8(br *bitReader, dec *prefixDecoder, c *combin, r *Record) error {
	k, L, E := r.TopK, r.Layers, r.Experts
	widths, radix := diffTables(c, k, E)
	dropped, added := make([]int, k), make([]int, k)
	for s := L; s < r.Tokens*L; s++ {
		x, err := dec.next(br)
		if err != nil {
			return corrupt("token %d layer %d: %v", s/L, s%L, err)
		}
		prev := r.IDs[(s-L)*k : (s-L)*k+k]
		cur := r.IDs[s*k : s*k+k]
		if x == 0 {
			copy(cur, prev)
			continue
		}
		v, err := br.get(widths[x])
		if err != nil {
			return corrupt("token %d layer %d: %v", s/L, s%L, err)
		}
		vd, va := v/radix[x], v%radix[x]
		if vd >= c.at(k, x) {
			return corrupt("token %d layer %d: difference %d out of range", s/L, s%L, v)
		}
		c.unrank(vd, x, k, dropped[:x])
		c.unrank(va, x, E-k, added[:x])
		var mask uint64
		for _, d := range dropped[:x] {
			mask |= 1 << uint(d)
		}
		n, i, q := 0, 0, 0
		for _, a := range added[:x] {
			e := a + q
			for q < k && int(prev[q]) <= e {
				q++
				e = a + q
			}
			for i < k && int(prev[i]) < e {
				if mask&(1<<uint(i)) == 0 {
					cur[n] = prev[i]
					n++
				}
				i++
			}
			cur[n] = byte(e)
			n++
		}
		for ; i < k; i++ {
			if mask&(1<<uint(i)) == 0 {
				cur[n] = prev[i]
				n++
			}
		}
	}
	return nil
}
