package routing

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// FormatVersion is the first byte of every encoded record. A decoder
// rejects any other value.
const FormatVersion = 1

// Encoding selects how the sets of a record are stored after the header.
type Encoding byte

const (
	// Packed stores the raw id buffer as is.
	Packed Encoding = 0
	// PackedZstd stores the raw id buffer compressed with zstd.
	PackedZstd Encoding = 1
	// Rank stores each sorted set as its combinatorial rank in
	// ceil(log2 C(E, k)) bits: the exact size of a uniform k-subset.
	Rank Encoding = 2
	// Delta stores token 0 as ranks and every later set as its difference
	// from the same layer's set one token earlier: the number r of
	// replaced experts (prefix-coded) and one mixed-radix number for which
	// r of the previous experts left and which r of the others came in.
	Delta Encoding = 3

	// Auto picks Rank or Delta, whichever is smaller for this record
	// (both sizes are known exactly before writing; when the first 32
	// tokens already favour Rank, Rank is taken without the full count),
	// or PackedZstd when ranks do not fit 63 bits (very large C(E, k)).
	Auto Encoding = 255
)

func (e Encoding) String() string {
	switch e {
	case Packed:
		return "packed"
	case PackedZstd:
		return "packed+zstd"
	case Rank:
		return "rank"
	case Delta:
		return "delta"
	case Auto:
		return "auto"
	}
	return fmt.Sprintf("encoding(%d)", byte(e))
}

// ZstdLevel is the zstd level of PackedZstd. The library's fastest level
// barely compresses id bytes; "better" (≈ zstd 7) does.
const ZstdLevel = zstd.SpeedBetterCompression

var crcTable = crc32.MakeTable(crc32.Castagnoli)

var (
	zencOnce sync.Once
	zenc     *zstd.Encoder
	zdec     *zstd.Decoder
)

func zstdCodecs() (*zstd.Encoder, *zstd.Decoder) {
	zencOnce.Do(func() {
		var err error
		zenc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(ZstdLevel), zstd.WithEncoderConcurrency(1))
		if err != nil {
			panic(err)
		}
		zdec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxMemory(MaxRawBytes))
		if err != nil {
			panic(err)
		}
	})
	return zenc, zdec
}

// Rankable reports whether Rank and Delta can encode sets of topK out of
// experts: every binomial they use must fit 63 bits.
func Rankable(topK, experts int) bool {
	// k == E has a single set (rank width 0); packing handles it.
	if topK < 1 || experts <= topK || experts > MaxExperts || topK > MaxTopK {
		return false
	}
	return getCombin(experts, topK).ok
}

// Encode appends the encoding of r to dst and returns it. r must be valid
// (see Record.Validate); the error names the first bad set otherwise.
func Encode(dst []byte, r *Record, enc Encoding) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return dst, err
	}
	rankable := Rankable(r.TopK, r.Experts)
	var hist []uint64
	if enc == Auto {
		enc = PackedZstd
		if rankable {
			enc = Rank
			if r.Tokens > 1 && deltaMayWin(r) {
				hist = deltaHistogram(r)
				if deltaBits(r, hist) < uint64(r.Tokens*r.Layers)*uint64(rankWidth(r)) {
					enc = Delta
				}
			}
		}
	}
	if (enc == Rank || enc == Delta) && !rankable {
		return dst, fmt.Errorf("routing: %s encoding: ranks of %d-of-%d sets do not fit 63 bits", enc, r.TopK, r.Experts)
	}
	start := len(dst)
	dst = append(dst, FormatVersion, byte(enc))
	dst = binary.AppendUvarint(dst, uint64(r.Tokens))
	dst = binary.AppendUvarint(dst, uint64(r.Layers))
	dst = binary.AppendUvarint(dst, uint64(r.TopK))
	dst = binary.AppendUvarint(dst, uint64(r.Experts))
	switch enc {
	case Packed:
		dst = append(dst, r.IDs...)
	case PackedZstd:
		z, _ := zstdCodecs()
		dst = z.EncodeAll(r.IDs, dst)
	case Rank:
		dst = encodeRank(dst, r)
	case Delta:
		if hist == nil {
			hist = deltaHistogram(r)
		}
		dst = encodeDelta(dst, r, hist)
	default:
		return dst[:start], fmt.Errorf("routing: unknown encoding %d", byte(enc))
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crcTable)), nil
}

// Info is an encoded record's header.
type Info struct {
	Encoding                      Encoding
	Tokens, Layers, TopK, Experts int
}

// ReadInfo parses the header of an encoded record without decoding it or
// checking its checksum.
func ReadInfo(b []byte) (Info, error) {
	info, _, err := readHeader(b)
	return info, err
}

// ErrCorrupt is wrapped by every decoding error caused by the bytes.
var ErrCorrupt = errors.New("routing: corrupt record")

func corrupt(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, a...))
}

func readHeader(b []byte) (Info, int, error) {
	var info Info
	if len(b) < 2 {
		return info, 0, corrupt("%d bytes, shorter than a header", len(b))
	}
	if b[0] != FormatVersion {
		return info, 0, corrupt("format version %d, this decoder reads %d", b[0], FormatVersion)
	}
	info.Encoding = Encoding(b[1])
	if info.Encoding > Delta {
		return info, 0, corrupt("unknown encoding %d", b[1])
	}
	p := 2
	var dims [4]int
	for i, name := range []string{"tokens", "layers", "top_k", "experts"} {
		v, n := binary.Uvarint(b[p:])
		if n <= 0 || v > 1<<31 {
			return info, 0, corrupt("bad %s field in header", name)
		}
		dims[i] = int(v)
		p += n
	}
	info.Tokens, info.Layers, info.TopK, info.Experts = dims[0], dims[1], dims[2], dims[3]
	if _, err := checkShape(info.Tokens, info.Layers, info.TopK, info.Experts); err != nil {
		return info, 0, fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	return info, p, nil
}

// Decode decodes one encoded record. The returned record's IDs is a fresh
// contiguous buffer (see Record). Any damage to b gives an error wrapping
// ErrCorrupt; Decode never panics on arbitrary input.
func Decode(b []byte) (*Record, error) {
	if len(b) < 4 {
		return nil, corrupt("%d bytes, shorter than a checksum", len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, crcTable); got != sum {
		return nil, corrupt("checksum %08x, stored %08x", got, sum)
	}
	info, p, err := readHeader(body)
	if err != nil {
		return nil, err
	}
	payload := body[p:]
	raw := info.Tokens * info.Layers * info.TopK * Width(info.Experts)
	r := &Record{Tokens: info.Tokens, Layers: info.Layers, TopK: info.TopK, Experts: info.Experts}
	switch info.Encoding {
	case Packed:
		if len(payload) != raw {
			return nil, corrupt("packed payload of %d bytes, want %d", len(payload), raw)
		}
		r.IDs = append(make([]byte, 0, raw), payload...)
	case PackedZstd:
		_, z := zstdCodecs()
		var h zstd.Header
		// The destination's capacity caps what DecodeAll may produce, so a
		// frame cannot make the decoder allocate more than the header says.
		if err := h.Decode(payload); err != nil || (h.HasFCS && h.FrameContentSize != uint64(raw)) {
			return nil, corrupt("zstd frame header does not match %d raw bytes", raw)
		}
		r.IDs, err = z.DecodeAll(payload, make([]byte, 0, raw))
		if err != nil {
			return nil, corrupt("zstd: %v", err)
		}
		if len(r.IDs) != raw {
			return nil, corrupt("zstd payload decodes to %d bytes, want %d", len(r.IDs), raw)
		}
	case Rank, Delta:
		// Ranks decode to valid sets by construction; packed ids do not.
		if !Rankable(info.TopK, info.Experts) {
			return nil, corrupt("%s encoding of %d-of-%d sets is impossible", info.Encoding, info.TopK, info.Experts)
		}
		// Every set costs at least one bit, which bounds the allocation
		// by the input size.
		if uint64(info.Tokens)*uint64(info.Layers) > uint64(len(payload))*8+uint64(info.Layers)*64 {
			return nil, corrupt("%d-byte payload cannot hold %d sets", len(payload), info.Tokens*info.Layers)
		}
		r.IDs = make([]byte, raw)
		if info.Encoding == Rank {
			err = decodeRank(payload, r)
		} else {
			err = decodeDelta(payload, r)
		}
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return r, nil
}

// rankWidth is the bit width of one set's rank.
func rankWidth(r *Record) int { return getCombin(r.Experts, r.TopK).rankBits(r.Experts, r.TopK) }

// loadSet reads set s of r into out as ints.
func loadSet(r *Record, s int, out []int) {
	k := len(out)
	if Width(r.Experts) == 1 {
		for j, b := range r.IDs[s*k : s*k+k] {
			out[j] = int(b)
		}
		return
	}
	for j := range out {
		out[j] = int(binary.LittleEndian.Uint16(r.IDs[2*(s*k+j):]))
	}
}

func storeSet(r *Record, s int, in []int) {
	k := len(in)
	if Width(r.Experts) == 1 {
		dst := r.IDs[s*k : s*k+k]
		for j, e := range in {
			dst[j] = byte(e)
		}
		return
	}
	for j, e := range in {
		binary.LittleEndian.PutUint16(r.IDs[2*(s*k+j):], uint16(e))
	}
}

func encodeRank(dst []byte, r *Record) []byte {
	c := getCombin(r.Experts, r.TopK)
	nb := c.rankBits(r.Experts, r.TopK)
	w := bitWriter{buf: dst}
	k := r.TopK
	sets := r.Tokens * r.Layers
	if Width(r.Experts) == 1 {
		stride := r.Experts + 1
		for s := range sets {
			var v uint64
			for j, b := range r.IDs[s*k : s*k+k] {
				v += c.tab[(j+1)*stride+int(b)]
			}
			w.put(v, nb)
		}
		return w.flush()
	}
	set := make([]int, k)
	for s := range sets {
		loadSet(r, s, set)
		w.put(c.rank(set), nb)
	}
	return w.flush()
}

// rank is the combinatorial rank Σ C(set[j], j+1) of an ascending set.
func (c *combin) rank(set []int) uint64 {
	var v uint64
	w := c.n + 1
	for j, e := range set {
		v += c.tab[(j+1)*w+e]
	}
	return v
}

func decodeRank(payload []byte, r *Record) error {
	c := getCombin(r.Experts, r.TopK)
	nb := c.rankBits(r.Experts, r.TopK)
	limit := c.at(r.Experts, r.TopK)
	br := newBitReader(payload)
	k := r.TopK
	set := make([]int, k)
	sets := r.Tokens * r.Layers
	if uint64(sets)*uint64(nb) > br.end || br.end-uint64(sets)*uint64(nb) >= 8 {
		return corrupt("rank payload of %d bytes, want %d", len(payload), (uint64(sets)*uint64(nb)+7)/8)
	}
	w8 := Width(r.Experts) == 1
	s0 := 0
	if w8 {
		var vs [4]uint64
		for ; s0+4 <= sets; s0 += 4 {
			for j := range vs {
				v, err := br.get(nb)
				if err != nil {
					return corrupt("set %d: %v", s0+j, err)
				}
				if v >= limit {
					return corrupt("token %d layer %d: rank %d out of range", (s0+j)/r.Layers, (s0+j)%r.Layers, v)
				}
				vs[j] = v
			}
			c.unrank8x4(vs, k, r.IDs[s0*k:(s0+4)*k])
		}
	}
	for s := s0; s < sets; s++ {
		v, err := br.get(nb)
		if err != nil {
			return corrupt("set %d: %v", s, err)
		}
		if v >= limit {
			return corrupt("token %d layer %d: rank %d out of range", s/r.Layers, s%r.Layers, v)
		}
		if w8 {
			c.unrank8(v, r.IDs[s*k:s*k+k])
			continue
		}
		c.unrank(v, k, r.Experts, set)
		storeSet(r, s, set)
	}
	return checkEnd(&br)
}

// deltaHistogram counts, over every set after token 0, how many experts
// changed from the same layer one token earlier.
func deltaHistogram(r *Record) []uint64 {
	if Width(r.Experts) == 1 {
		return deltaHistogram8(r)
	}
	k, L := r.TopK, r.Layers
	hist := make([]uint64, k+1)
	prev, cur := make([]int, k), make([]int, k)
	for s := L; s < r.Tokens*L; s++ {
		loadSet(r, s-L, prev)
		loadSet(r, s, cur)
		hist[k-overlap(prev, cur)]++
	}
	return hist
}

// overlap counts the common elements of two ascending sets.
func overlap(a, b []int) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			n++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return n
}

// diffBits is the width of the mixed-radix number of a set with r
// replaced experts: bitlen(C(k, r)·C(E−k, r) − 1).
func diffBits(c *combin, k, e, r int) int {
	hi, lo := bits.Mul64(c.at(k, r), c.at(e-k, r))
	if hi != 0 {
		return 64 // cannot happen for rankable shapes: Σ_r C(k,r)C(E−k,r) = C(E,k)
	}
	if lo <= 1 {
		return 0
	}
	return bits.Len64(lo - 1)
}

// deltaMayWin estimates Delta against Rank on the first tokens only, so
// that Auto skips the full histogram for routing without temporal
// correlation (where Delta costs slightly more than Rank).
func deltaMayWin(r *Record) bool {
	const sample = 32
	if r.Tokens <= 2*sample {
		return true
	}
	head := &Record{Tokens: sample, Layers: r.Layers, TopK: r.TopK, Experts: r.Experts,
		IDs: r.IDs[:sample*r.Layers*r.TopK*Width(r.Experts)]}
	return deltaBits(head, deltaHistogram(head)) < uint64(sample*r.Layers)*uint64(rankWidth(r))
}

func deltaBits(r *Record, hist []uint64) uint64 {
	c := getCombin(r.Experts, r.TopK)
	lens := huffmanLengths(hist, maxCodeLen)
	total := uint64(r.Layers) * uint64(rankWidth(r))
	total += uint64(len(hist)) * 8
	for x, n := range hist {
		total += n * uint64(int(lens[x])+diffBits(c, r.TopK, r.Experts, x))
	}
	return total
}

func encodeDelta(dst []byte, r *Record, hist []uint64) []byte {
	c := getCombin(r.Experts, r.TopK)
	k, L, E := r.TopK, r.Layers, r.Experts
	lens := huffmanLengths(hist, maxCodeLen)
	dst = append(dst, lens...)
	codes := canonicalCodes(lens)
	nb := c.rankBits(E, k)
	w := bitWriter{buf: dst}
	if Width(E) == 1 {
		encodeDelta8(&w, c, r, lens, codes)
		return w.flush()
	}
	prev, cur := make([]int, k), make([]int, k)
	dropped, added := make([]int, 0, k), make([]int, 0, k)
	for s := range r.Tokens * L {
		loadSet(r, s, cur)
		if s < L {
			w.put(c.rank(cur), nb)
			continue
		}
		loadSet(r, s-L, prev)
		dropped, added = dropped[:0], added[:0]
		// Walk both ascending sets: a previous expert missing from cur is
		// dropped (by position); a new expert is added, indexed among the
		// experts not in prev.
		i, j := 0, 0
		for i < k || j < k {
			switch {
			case j == k || (i < k && prev[i] < cur[j]):
				dropped = append(dropped, i)
				i++
			case i == k || cur[j] < prev[i]:
				added = append(added, cur[j]-i) // i previous experts lie below cur[j]
				j++
			default:
				i++
				j++
			}
		}
		x := len(dropped)
		w.put(uint64(codes[x]), int(lens[x]))
		if x == 0 {
			continue
		}
		v := c.rank(dropped)*c.at(E-k, x) + c.rank(added)
		w.put(v, diffBits(c, k, E, x))
	}
	return w.flush()
}

func decodeDelta(payload []byte, r *Record) error {
	c := getCombin(r.Experts, r.TopK)
	k, L, E := r.TopK, r.Layers, r.Experts
	if len(payload) < k+1 {
		return corrupt("delta payload of %d bytes lacks its %d code lengths", len(payload), k+1)
	}
	lens := payload[:k+1]
	dec, err := newPrefixDecoder(lens)
	if err != nil {
		return corrupt("delta code lengths: %v", err)
	}
	br := newBitReader(payload[k+1:])
	nb := c.rankBits(E, k)
	limit := c.at(E, k)
	prev, cur := make([]int, k), make([]int, k)
	dropped, added := make([]int, k), make([]int, k)
	if Width(E) == 1 {
		for s := range min(L, r.Tokens*L) {
			v, err := br.get(nb)
			if err != nil {
				return corrupt("token 0 layer %d: %v", s, err)
			}
			if v >= limit {
				return corrupt("token 0 layer %d: rank %d out of range", s, v)
			}
			c.unrank8(v, r.IDs[s*k:s*k+k])
		}
		if err := decodeDelta8(&br, dec, c, r); err != nil {
			return err
		}
		return checkEnd(&br)
	}
	for s := range r.Tokens * L {
		if s < L {
			v, err := br.get(nb)
			if err != nil {
				return corrupt("token 0 layer %d: %v", s, err)
			}
			if v >= limit {
				return corrupt("token 0 layer %d: rank %d out of range", s, v)
			}
			c.unrank(v, k, E, cur)
			storeSet(r, s, cur)
			continue
		}
		x, err := dec.next(&br)
		if err != nil {
			return corrupt("token %d layer %d: %v", s/L, s%L, err)
		}
		loadSet(r, s-L, prev)
		if x == 0 {
			storeSet(r, s, prev)
			continue
		}
		v, err := br.get(diffBits(c, k, E, x))
		if err != nil {
			return corrupt("token %d layer %d: %v", s/L, s%L, err)
		}
		na := c.at(E-k, x)
		vd, va := v/na, v%na
		if vd >= c.at(k, x) {
			return corrupt("token %d layer %d: difference %d out of range", s/L, s%L, v)
		}
		c.unrank(vd, x, k, dropped[:x])
		c.unrank(va, x, E-k, added[:x])
		// Merge the kept previous experts with the added ones, mapping
		// each added index back to an expert id past the previous set.
		var mask uint64
		for _, d := range dropped[:x] {
			mask |= 1 << uint(d)
		}
		n, i, q := 0, 0, 0
		for _, a := range added[:x] {
			e := a + q
			for q < k && prev[q] <= e {
				q++
				e = a + q
			}
			for i < k && prev[i] < e {
				if mask&(1<<uint(i)) == 0 {
					cur[n] = prev[i]
					n++
				}
				i++
			}
			cur[n] = e
			n++
		}
		for ; i < k; i++ {
			if mask&(1<<uint(i)) == 0 {
				cur[n] = prev[i]
				n++
			}
		}
		storeSet(r, s, cur)
	}
	return checkEnd(&br)
}

// checkEnd rejects a bit stream with more than its zero padding left.
func checkEnd(br *bitReader) error {
	if left := br.end - br.pos; left >= 8 || (left > 0 && br.peek56()&(1<<left-1) != 0) {
		return corrupt("%d bits left after the last set", left)
	}
	return nil
}
