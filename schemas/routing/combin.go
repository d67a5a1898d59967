package routing

import (
	"math"
	"math/bits"
	"sync"
)

// combin holds C(c, i) for 0 ≤ i ≤ k, 0 ≤ c ≤ n, and per-level guess
// tables that make unranking a lookup plus a short scan instead of a
// binary search.
type combin struct {
	n, k int
	// tab[i*(n+1)+c] = C(c, i), saturated at MaxUint64.
	tab []uint64
	// guess[i][b] is the largest c with C(c, i) ≤ the smallest value of
	// log-bucket b (see bucket).
	guess [][]uint16
	// ok is false when some C(c, i) needed for ranking does not fit 63 bits.
	ok bool
}

const bucketBits = 7

// bucket maps v to a log-spaced bucket: its bit length and the bucketBits
// bits below its leading one. Consecutive binomials C(c, i), C(c+1, i)
// differ by a factor (c+1)/(c+1-i), so a bucket rarely holds more than a
// couple of them.
func bucket(v uint64) int {
	n := bits.Len64(v)
	var m uint64
	if n > bucketBits {
		m = v >> (n - 1 - bucketBits)
	} else {
		m = v << (bucketBits + 1 - n)
	}
	return n<<bucketBits | int(m&(1<<bucketBits-1))
}

// bucketLow is the smallest v with bucket(v) == b (or the value the bucket
// would start at when no integer lands in it).
func bucketLow(b int) uint64 {
	n := b >> bucketBits
	m := uint64(b&(1<<bucketBits-1)) | 1<<bucketBits
	if n == 0 {
		return 0
	}
	if n > bucketBits {
		return m << (n - 1 - bucketBits)
	}
	return m >> (bucketBits + 1 - n)
}

var combins sync.Map // [2]int{n, k} → *combin

// getCombin returns the (cached) tables for universes up to n and subsets
// up to size k.
func getCombin(n, k int) *combin {
	key := [2]int{n, k}
	if c, ok := combins.Load(key); ok {
		return c.(*combin)
	}
	c := newCombin(n, k)
	got, _ := combins.LoadOrStore(key, c)
	return got.(*combin)
}

func newCombin(n, k int) *combin {
	c := &combin{n: n, k: k, tab: make([]uint64, (k+1)*(n+1)), ok: true}
	w := n + 1
	for x := 0; x <= n; x++ {
		c.tab[x] = 1
	}
	for i := 1; i <= k; i++ {
		for x := 1; x <= n; x++ {
			a, b := c.tab[(i-1)*w+x-1], c.tab[i*w+x-1]
			s, carry := bits.Add64(a, b, 0)
			if carry != 0 || s > math.MaxInt64 {
				s = math.MaxUint64
				c.ok = false
			}
			c.tab[i*w+x] = s
		}
	}
	if !c.ok {
		return c
	}
	nb := 128 << bucketBits // a power of two, so lookups can mask instead of bounds-check
	c.guess = make([][]uint16, k+1)
	for i := 1; i <= k; i++ {
		g := make([]uint16, nb)
		row := c.tab[i*w : i*w+w]
		x := i - 1 // C(i-1, i) = 0 ≤ anything
		for b := range nb {
			low := bucketLow(b)
			for x+1 < n && row[x+1] <= low {
				x++
			}
			g[b] = uint16(x)
		}
		c.guess[i] = g
	}
	return c
}

// at is C(x, i).
func (c *combin) at(x, i int) uint64 { return c.tab[i*(c.n+1)+x] }

// rankBits is the number of bits a rank of an i-subset of a universe of u
// needs: bitlen(C(u, i) − 1).
func (c *combin) rankBits(u, i int) int {
	v := c.at(u, i)
	if v <= 1 {
		return 0
	}
	return bits.Len64(v - 1)
}

// unrank writes into out the ascending i-subset of [0, u) whose
// combinatorial rank is r. r < C(u, i) is the caller's to check; then the
// guess never overshoots and the scan stops below u, because the element
// found one level up bounds the next.
func (c *combin) unrank(r uint64, i, u int, out []int) {
	_ = u
	w := c.n + 1
	for ; i >= 1; i-- {
		row := c.tab[i*w : i*w+w]
		x := int(c.guess[i][bucket(r)])
		for row[x+1] <= r {
			x++
		}
		out[i-1] = x
		r -= row[x]
	}
}

// unrank8 is unrank of a full k-subset of [0, n) into one byte per id.
func (c *combin) unrank8(r uint64, out []byte) {
	w := c.n + 1
	for i := len(out); i >= 2; i-- {
		row := c.tab[i*w : i*w+w]
		g := c.guess[i]
		x := int(g[bucket(r)&(len(g)-1)])
		for row[x+1] <= r {
			x++
		}
		out[i-1] = byte(x)
		r -= row[x]
	}
	out[0] = byte(r) // C(x, 1) = x
}

// unrank8x4 is unrank8 of four sets at once. Unranking is a chain of
// dependent loads (each level's remainder picks the next level's row), so
// one set leaves the core idle waiting on memory; four interleaved
// chains keep it busy. out holds the four sets back to back.
func (c *combin) unrank8x4(r [4]uint64, k int, out []byte) {
	w := c.n + 1
	_ = out[4*k-1]
	for i := k; i >= 2; i-- {
		row := c.tab[i*w : i*w+w]
		g := c.guess[i]
		m := len(g) - 1
		x0 := int(g[bucket(r[0])&m])
		x1 := int(g[bucket(r[1])&m])
		x2 := int(g[bucket(r[2])&m])
		x3 := int(g[bucket(r[3])&m])
		for row[x0+1] <= r[0] {
			x0++
		}
		for row[x1+1] <= r[1] {
			x1++
		}
		for row[x2+1] <= r[2] {
			x2++
		}
		for row[x3+1] <= r[3] {
			x3++
		}
		out[i-1], out[k+i-1], out[2*k+i-1], out[3*k+i-1] = byte(x0), byte(x1), byte(x2), byte(x3)
		r[0] -= row[x0]
		r[1] -= row[x1]
		r[2] -= row[x2]
		r[3] -= row[x3]
	}
	out[0], out[k], out[2*k], out[3*k] = byte(r[0]), byte(r[1]), byte(r[2]), byte(r[3])
}
