package routing

import (
	"container/heap"
	"errors"
	"fmt"
	"math/bits"
	"slices"
)

// maxCodeLen bounds the prefix-code length of the replaced-expert count,
// which keeps the decoder's lookup table at 4096 entries.
const maxCodeLen = 12

// huffmanLengths returns a length-limited Huffman code length per symbol.
// Symbols that occur get a length ≥ 1 (a lone symbol gets 1), others 0.
func huffmanLengths(hist []uint64, maxLen int) []byte {
	counts := slices.Clone(hist)
	for {
		lens := huffmanOnce(counts)
		if int(slices.Max(append([]byte{0}, lens...))) <= maxLen {
			return lens
		}
		// Flatten the distribution and retry; each round halves the
		// spread, so a handful of rounds suffices for ≤ 65 symbols.
		for i, c := range counts {
			if c > 0 {
				counts[i] = c>>1 | 1
			}
		}
	}
}

type hnode struct {
	count uint64
	syms  []int
}

type hheap []hnode

func (h hheap) Len() int { return len(h) }
func (h hheap) Less(i, j int) bool {
	if h[i].count != h[j].count {
		return h[i].count < h[j].count
	}
	return h[i].syms[0] < h[j].syms[0] // deterministic ties
}
func (h hheap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *hheap) Push(x any)   { *h = append(*h, x.(hnode)) }
func (h *hheap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func huffmanOnce(counts []uint64) []byte {
	lens := make([]byte, len(counts))
	h := hheap{}
	for s, c := range counts {
		if c > 0 {
			h = append(h, hnode{count: c, syms: []int{s}})
		}
	}
	if len(h) == 1 {
		lens[h[0].syms[0]] = 1
		return lens
	}
	heap.Init(&h)
	for h.Len() > 1 {
		a := heap.Pop(&h).(hnode)
		b := heap.Pop(&h).(hnode)
		for _, s := range a.syms {
			lens[s]++
		}
		for _, s := range b.syms {
			lens[s]++
		}
		syms := append(append([]int{}, a.syms...), b.syms...)
		slices.Sort(syms)
		heap.Push(&h, hnode{count: a.count + b.count, syms: syms})
	}
	return lens
}

// canonicalCodes assigns canonical codes (ordered by length, then symbol)
// and returns them bit-reversed, ready for an LSB-first stream.
func canonicalCodes(lens []byte) []uint32 {
	codes := make([]uint32, len(lens))
	code := uint32(0)
	for l := 1; l <= maxCodeLen; l++ {
		for s, sl := range lens {
			if int(sl) == l {
				codes[s] = bits.Reverse32(code) >> (32 - l)
				code++
			}
		}
		code <<= 1
	}
	return codes
}

// prefixDecoder decodes a canonical code by table lookup on the next
// maxLen bits.
type prefixDecoder struct {
	maxLen int
	// table entries: symbol<<4 | length; length 0 marks an unused pattern.
	table []uint16
}

func newPrefixDecoder(lens []byte) (*prefixDecoder, error) {
	maxLen := 0
	var kraft uint64 // in units of 2^-maxCodeLen
	for s, l := range lens {
		if l > maxCodeLen {
			return nil, fmt.Errorf("symbol %d: code length %d exceeds %d", s, l, maxCodeLen)
		}
		if l > 0 {
			maxLen = max(maxLen, int(l))
			kraft += 1 << (maxCodeLen - int(l))
		}
	}
	if kraft > 1<<maxCodeLen {
		return nil, errors.New("code lengths over-subscribe the code space")
	}
	d := &prefixDecoder{maxLen: maxLen}
	if maxLen == 0 {
		return d, nil
	}
	d.table = make([]uint16, 1<<maxLen)
	codes := canonicalCodes(lens)
	for s, l := range lens {
		if l == 0 {
			continue
		}
		for f := uint32(0); f < 1<<(maxLen-int(l)); f++ {
			d.table[codes[s]|f<<l] = uint16(s)<<4 | uint16(l)
		}
	}
	return d, nil
}

func (d *prefixDecoder) next(br *bitReader) (int, error) {
	if d.maxLen == 0 {
		return 0, errors.New("no prefix code for a later token")
	}
	e := d.table[br.peek56()&(1<<d.maxLen-1)]
	l := uint64(e & 15)
	if l == 0 {
		return 0, errors.New("invalid prefix code")
	}
	if br.pos+l > br.end {
		return 0, errShort
	}
	br.pos += l
	return int(e >> 4), nil
}
