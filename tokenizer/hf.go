package tokenizer

import (
	"container/heap"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// HF is a Hugging Face byte-level BPE tokenizer (tokenizer.json), encoding
// exactly as the Rust tokenizers library does with add_special_tokens
// false: added tokens split out leftmost-longest, NFC, the Split
// pre-tokenizer's pattern, the byte-level alphabet, then merges lowest
// rank first, leftmost on ties.
type HF struct {
	tokens    [][]byte         // id -> the bytes it decodes to
	known     []bool           // id -> whether it is a token at all
	byteLevel map[string]int   // raw bytes -> id, for tokens written in the byte-level alphabet
	byteID    [256]int32       // byte -> id of its one-byte token
	merges    map[uint64]merge // (left, right) -> rank and merged id
	bytePairs []merge          // [256*a+b]: the merge of two one-byte tokens (rank noMerge: none)
	cache     wordCache

	ignoreMerges bool
	nfc          bool
	splits       []pattern // applied in order, each to the pieces of the one before

	addedID   map[string]int // added token text (and its NFC form) -> id
	special   map[int]bool
	rawAdded  *matcher // added tokens matched before normalisation
	normAdded *matcher // added tokens with normalized: true, matched after it
}

var _ Tokenizer = (*HF)(nil)

type merge struct{ rank, id int32 }

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// VocabSize is one more than the largest id (model vocabulary and added
// tokens).
func (h *HF) VocabSize() int { return len(h.tokens) }

// SpecialID is the id of an added token (special or not).
func (h *HF) SpecialID(text string) (int, bool) {
	id, ok := h.addedID[text]
	return id, ok
}

// IsSpecial reports whether id is an added token marked special.
func (h *HF) IsSpecial(id int) bool { return h.special[id] }

// TokenBytes is the bytes id decodes to.
func (h *HF) TokenBytes(id int) ([]byte, error) {
	if id < 0 || id >= len(h.tokens) || !h.known[id] {
		return nil, fmt.Errorf("tokenizer: id %d is not in the vocabulary [0,%d)", id, len(h.tokens))
	}
	return h.tokens[id], nil
}

// Decode concatenates the bytes of ids. Unlike the Rust library, it keeps
// invalid UTF-8 as it is (the library writes U+FFFD) and refuses an
// unknown id (the library skips it).
func (h *HF) Decode(ids []int) (string, error) {
	var b strings.Builder
	for i, id := range ids {
		t, err := h.TokenBytes(id)
		if err != nil {
			return "", fmt.Errorf("token %d: %w", i, err)
		}
		b.Write(t)
	}
	return b.String(), nil
}

// Encode tokenises text. The Rust library takes text as Unicode, never
// bytes: invalid UTF-8 is read as Python's bytes.decode(errors="replace")
// and JavaScript's TextDecoder read it, each maximal ill-formed subpart one
// U+FFFD, so Decode(Encode(s)) is s only for valid UTF-8 in NFC.
func (h *HF) Encode(text string) []int {
	text = validUTF8(text)
	out := make([]int, 0, len(text)/3+1)
	h.rawAdded.split(text, func(piece string, added bool) {
		if added {
			out = append(out, h.addedID[piece])
			return
		}
		if h.nfc {
			piece = nfc(piece)
		}
		h.normAdded.split(piece, func(p string, added bool) {
			if added {
				out = append(out, h.addedID[p])
				return
			}
			out = h.preTokenize(out, p, 0)
		})
	})
	return out
}

// EncodeOrdinary is Encode without added tokens: the text as one segment
// between two of them.
func (h *HF) EncodeOrdinary(text string) []int {
	text = validUTF8(text)
	if h.nfc {
		text = nfc(text)
	}
	return h.preTokenize(make([]int, 0, len(text)/3+1), text, 0)
}

// AddedTokens are the added tokens' texts in id order.
func (h *HF) AddedTokens() []string {
	out := make([]string, 0, len(h.addedID))
	for id := range h.tokens {
		if h.known[id] {
			if aid, ok := h.addedID[string(h.tokens[id])]; ok && aid == id {
				out = append(out, string(h.tokens[id]))
			}
		}
	}
	return out
}

// preTokenize applies splits[step:] to s, then the model to each piece.
func (h *HF) preTokenize(out []int, s string, step int) []int {
	if step == len(h.splits) {
		return h.bpe(out, s)
	}
	p := h.splits[step]
	for i := 0; i < len(s); {
		j := p.next(s, i)
		out = h.preTokenize(out, s[i:j], step+1)
		i = j
	}
	return out
}

// bpe encodes one pre-token (raw bytes, which the byte-level alphabet maps
// one to one onto its symbols).
func (h *HF) bpe(out []int, word string) []int {
	if len(word) == 1 {
		return append(out, int(h.byteID[word[0]]))
	}
	if h.ignoreMerges {
		if id, ok := h.byteLevel[word]; ok {
			return append(out, id)
		}
	}
	if len(word) > cachedWord {
		return h.bpeHeap(out, word)
	}
	if ids, ok := h.cache.get(word); ok {
		for _, id := range ids {
			out = append(out, int(id))
		}
		return out
	}
	n := len(out)
	out = h.bpeSmall(out, word)
	h.cache.put(word, out[n:])
	return out
}

// cachedWord is the longest word the cache holds; longer ones go through
// the heap.
const cachedWord = 256

// wordCache remembers the ids of words, as the Rust library's BPE cache
// does: text repeats its words, and a hit skips the merges. It stops
// growing when full, so memory stays bounded and ids never depend on it.
type wordCache struct {
	shards [32]struct {
		sync.RWMutex
		m map[string][]int32
	}
}

const cacheShardSize = 4096

func shardOf(w string) int {
	h := uint32(2166136261)
	for i := 0; i < len(w); i++ {
		h = (h ^ uint32(w[i])) * 16777619
	}
	return int(h % 32)
}

func (c *wordCache) get(w string) ([]int32, bool) {
	s := &c.shards[shardOf(w)]
	s.RLock()
	ids, ok := s.m[w]
	s.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int) {
	s := &c.shards[shardOf(w)]
	s.Lock()
	defer s.Unlock()
	if s.m == nil {
		s.m = map[string][]int32{}
	}
	if len(s.m) >= cacheShardSize {
		return
	}
	v := make([]int32, len(ids))
	for i, id := range ids {
		v[i] = int32(id)
	}
	s.m[strings.Clone(w)] = v
}

const noMerge = int32(1<<31 - 1)

// bpeSmall merges, at each step, the lowest-ranked adjacent pair, the
// leftmost of equals, which is the order the library's heap pops in. The
// rank of each adjacent pair is kept, so a merge looks up only the two
// pairs it changes.
func (h *HF) bpeSmall(out []int, word string) []int {
	var symBuf, rankBuf, idBuf [cachedWord]int32
	n := len(word)
	sym, rank, id := symBuf[:n], rankBuf[:n-1], idBuf[:n-1]
	for i := 0; i < n; i++ {
		sym[i] = h.byteID[word[i]]
	}
	pair := func(i int) {
		if m, ok := h.merges[pairKey(sym[i], sym[i+1])]; ok {
			rank[i], id[i] = m.rank, m.id
		} else {
			rank[i] = noMerge
		}
	}
	for i := range rank {
		m := h.bytePairs[int(word[i])<<8|int(word[i+1])]
		rank[i], id[i] = m.rank, m.id
	}
	for len(sym) > 1 {
		best := 0
		for i := 1; i < len(rank); i++ {
			if rank[i] < rank[best] {
				best = i
			}
		}
		if rank[best] == noMerge {
			break
		}
		sym[best] = id[best]
		sym = append(sym[:best+1], sym[best+2:]...)
		rank = append(rank[:best], rank[best+1:]...)
		id = append(id[:best], id[best+1:]...)
		if best > 0 {
			pair(best - 1)
		}
		if best < len(rank) {
			pair(best)
		}
	}
	for _, s := range sym {
		out = append(out, int(s))
	}
	return out
}

// bpeHeap is the library's algorithm for long words: a min-heap of
// candidate merges by (rank, position) over a linked list of symbols,
// stale entries skipped.
func (h *HF) bpeHeap(out []int, word string) []int {
	n := len(word)
	sym := make([]int32, n)
	next := make([]int32, n)
	prev := make([]int32, n)
	alive := make([]bool, n)
	q := &mergeQueue{}
	for i := 0; i < n; i++ {
		sym[i], next[i], prev[i], alive[i] = h.byteID[word[i]], int32(i+1), int32(i-1), true
	}
	next[n-1] = -1
	push := func(pos int32) {
		if nx := next[pos]; nx >= 0 {
			if m, ok := h.merges[pairKey(sym[pos], sym[nx])]; ok {
				heap.Push(q, cand{rank: m.rank, pos: pos, id: m.id})
			}
		}
	}
	for i := int32(0); i < int32(n-1); i++ {
		push(i)
	}
	for q.Len() > 0 {
		c := heap.Pop(q).(cand)
		if !alive[c.pos] || next[c.pos] < 0 {
			continue
		}
		r := next[c.pos]
		if m, ok := h.merges[pairKey(sym[c.pos], sym[r])]; !ok || m.id != c.id {
			continue
		}
		sym[c.pos] = c.id
		alive[r] = false
		next[c.pos] = next[r]
		if next[r] >= 0 {
			prev[next[r]] = c.pos
		}
		if p := prev[c.pos]; p >= 0 {
			push(p)
		}
		push(c.pos)
	}
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, int(sym[i]))
	}
	return out
}

type cand struct{ rank, pos, id int32 }

type mergeQueue []cand

func (q mergeQueue) Len() int { return len(q) }
func (q mergeQueue) Less(i, j int) bool {
	return q[i].rank < q[j].rank || q[i].rank == q[j].rank && q[i].pos < q[j].pos
}
func (q mergeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mergeQueue) Push(x any)   { *q = append(*q, x.(cand)) }
func (q *mergeQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}

// byteToRune is GPT-2's byte-level alphabet: printable bytes stand for
// themselves, the others for U+0100 onwards, in byte order.
var byteToRune, runeToByte = func() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	r2b := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xa1 && b <= 0xac || b >= 0xae {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
		r2b[b2r[b]] = byte(b)
	}
	return b2r, r2b
}()

// ByteLevel writes raw bytes in the byte-level alphabet, as a byte-level
// BPE's tokenizer.json spells its vocabulary and merges.
func ByteLevel(raw []byte) string {
	r := make([]rune, len(raw))
	for i, b := range raw {
		r[i] = byteToRune[b]
	}
	return string(r)
}

// fromByteLevel maps a token written in the byte-level alphabet to its
// bytes; ok is false when a character is outside the alphabet.
func fromByteLevel(tok string) ([]byte, bool) {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := runeToByte[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}

// validUTF8 replaces each maximal ill-formed subpart with U+FFFD (the
// WHATWG and Unicode recommendation that TextDecoder and Python follow).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || w > 1 {
			b.WriteString(s[i : i+w])
			i += w
			continue
		}
		b.WriteRune(utf8.RuneError)
		i += illFormedLen(s[i:])
	}
	return b.String()
}

// illFormedLen is the length of the maximal ill-formed subpart at the
// start of s: a lead byte and the continuation bytes that could still
// begin a well-formed sequence after it.
func illFormedLen(s string) int {
	lo, hi, need := byte(0x80), byte(0xbf), 0
	switch c := s[0]; {
	case c >= 0xc2 && c <= 0xdf:
		need = 1
	case c == 0xe0:
		lo, need = 0xa0, 2
	case c == 0xed:
		hi, need = 0x9f, 2
	case c >= 0xe1 && c <= 0xef:
		need = 2
	case c == 0xf0:
		lo, need = 0x90, 3
	case c == 0xf4:
		hi, need = 0x8f, 3
	case c >= 0xf1 && c <= 0xf3:
		need = 3
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(s); n++ {
		if s[n] < lo || s[n] > hi {
			break
		}
		lo, hi = 0x80, 0xbf
	}
	return n
}
