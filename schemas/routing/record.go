package routing

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Limits on a record's shape. They bound what a decoder allocates for
// untrusted input and keep every index inside an int on 32-bit hosts.
const (
	MaxExperts = 1 << 16
	MaxTopK    = 64
	MaxLayers  = 4096
	// MaxRawBytes bounds T×L×k×width of one record (one chunk).
	MaxRawBytes = 1 << 31
)

// Record holds the expert ids a router selected for every token × MoE layer
// × top-k slot of one chunk.
//
// IDs is one contiguous little-endian buffer laid out [T][L][k]: element
// (t, l, j) sits at index (t*L+l)*k+j, as uint8 when Experts ≤ 256 and as
// uint16 otherwise (Width bytes each). Within each (t, l) set the ids are
// strictly ascending and below Experts. A GPU consumer views it without a
// copy, e.g. numpy.frombuffer(IDs, dtype).reshape(T, L, k).
type Record struct {
	Tokens  int
	Layers  int
	TopK    int
	Experts int
	IDs     []byte
}

// Width is the byte width of one expert id for a model with experts
// experts: 1 up to 256, else 2.
func Width(experts int) int {
	if experts <= 256 {
		return 1
	}
	return 2
}

// DType is the numpy dtype string of the IDs buffer ("<u1" or "<u2").
func DType(experts int) string {
	if Width(experts) == 1 {
		return "<u1"
	}
	return "<u2"
}

// checkShape validates the dimensions and returns the raw byte size.
func checkShape(tokens, layers, topK, experts int) (int, error) {
	switch {
	case experts < 1 || experts > MaxExperts:
		return 0, fmt.Errorf("routing: expert count %d outside [1, %d]", experts, MaxExperts)
	case topK < 1 || topK > MaxTopK:
		return 0, fmt.Errorf("routing: top_k %d outside [1, %d]", topK, MaxTopK)
	case topK > experts:
		return 0, fmt.Errorf("routing: top_k %d exceeds the expert count %d", topK, experts)
	case layers < 1 || layers > MaxLayers:
		return 0, fmt.Errorf("routing: layer count %d outside [1, %d]", layers, MaxLayers)
	case tokens < 0:
		return 0, fmt.Errorf("routing: negative token count %d", tokens)
	}
	per := uint64(layers) * uint64(topK) * uint64(Width(experts))
	if uint64(tokens) > MaxRawBytes/per {
		return 0, fmt.Errorf("routing: %d tokens × %d layers × top-%d exceed %d bytes", tokens, layers, topK, MaxRawBytes)
	}
	return tokens * int(per), nil
}

// NewRecord allocates a zeroed record of the given shape. A zeroed record
// is not valid (its sets repeat id 0) until every set is filled.
func NewRecord(tokens, layers, topK, experts int) (*Record, error) {
	n, err := checkShape(tokens, layers, topK, experts)
	if err != nil {
		return nil, err
	}
	return &Record{Tokens: tokens, Layers: layers, TopK: topK, Experts: experts, IDs: make([]byte, n)}, nil
}

// RawBytes is the size of the packed id buffer, T×L×k×Width.
func (r *Record) RawBytes() int { return r.Tokens * r.Layers * r.TopK * Width(r.Experts) }

// At returns id j of the set of token t at layer l.
func (r *Record) At(t, l, j int) int {
	i := (t*r.Layers+l)*r.TopK + j
	if Width(r.Experts) == 1 {
		return int(r.IDs[i])
	}
	return int(binary.LittleEndian.Uint16(r.IDs[2*i:]))
}

// Set stores the experts of token t at layer l, sorting them ascending. It
// rejects a set of the wrong size, a duplicate id or an id ≥ Experts.
func (r *Record) Set(t, l int, ids []int) error {
	if t < 0 || t >= r.Tokens || l < 0 || l >= r.Layers {
		return fmt.Errorf("routing: set (token %d, layer %d) outside %d tokens × %d layers", t, l, r.Tokens, r.Layers)
	}
	if len(ids) != r.TopK {
		return fmt.Errorf("routing: token %d layer %d: %d ids, want top_k %d", t, l, len(ids), r.TopK)
	}
	s := slices.Clone(ids)
	slices.Sort(s)
	for j, e := range s {
		if e < 0 || e >= r.Experts {
			return fmt.Errorf("routing: token %d layer %d: expert id %d outside [0, %d)", t, l, e, r.Experts)
		}
		if j > 0 && s[j-1] == e {
			return fmt.Errorf("routing: token %d layer %d: expert id %d selected twice", t, l, e)
		}
	}
	base := (t*r.Layers + l) * r.TopK
	for j, e := range s {
		if Width(r.Experts) == 1 {
			r.IDs[base+j] = byte(e)
		} else {
			binary.LittleEndian.PutUint16(r.IDs[2*(base+j):], uint16(e))
		}
	}
	return nil
}

// Validate checks the shape, the buffer length and that every set is
// strictly ascending with ids below Experts. The error names the first bad
// (token, layer) set.
func (r *Record) Validate() error {
	n, err := checkShape(r.Tokens, r.Layers, r.TopK, r.Experts)
	if err != nil {
		return err
	}
	if len(r.IDs) != n {
		return fmt.Errorf("routing: id buffer holds %d bytes, want %d (%d tokens × %d layers × top-%d × %d)",
			len(r.IDs), n, r.Tokens, r.Layers, r.TopK, Width(r.Experts))
	}
	sets := r.Tokens * r.Layers
	k := r.TopK
	if Width(r.Experts) == 1 {
		// Fast pass: strictly ascending within each set and the last id
		// below Experts. Only a failing set is re-checked for the message.
		ids, hi := r.IDs, r.Experts
		ok := true
		for s := 0; s+k <= len(ids); s += k {
			set := ids[s : s+k]
			bad := int(set[k-1]) >= hi
			for j := 1; j < len(set); j++ {
				bad = bad || set[j] <= set[j-1]
			}
			if bad {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		for s := range sets {
			if err := checkSet8(r.IDs[s*k:(s+1)*k], r.Experts); err != nil {
				return fmt.Errorf("routing: token %d layer %d: %w", s/r.Layers, s%r.Layers, err)
			}
		}
		return nil
	}
	for s := range sets {
		if err := checkSet16(r.IDs[2*s*k:2*(s+1)*k], r.Experts); err != nil {
			return fmt.Errorf("routing: token %d layer %d: %w", s/r.Layers, s%r.Layers, err)
		}
	}
	return nil
}

func checkSet8(set []byte, experts int) error {
	prev := -1
	for _, b := range set {
		e := int(b)
		if err := checkNext(prev, e, experts); err != nil {
			return err
		}
		prev = e
	}
	return nil
}

func checkSet16(set []byte, experts int) error {
	prev := -1
	for i := 0; i < len(set); i += 2 {
		e := int(binary.LittleEndian.Uint16(set[i:]))
		if err := checkNext(prev, e, experts); err != nil {
			return err
		}
		prev = e
	}
	return nil
}

func checkNext(prev, e, experts int) error {
	switch {
	case e >= experts:
		return fmt.Errorf("expert id %d outside [0, %d)", e, experts)
	case e == prev:
		return fmt.Errorf("expert id %d selected twice", e)
	case e < prev:
		return fmt.Errorf("ids not ascending (%d after %d); sort each set", e, prev)
	}
	return nil
}

// Equal reports whether two records have the same shape and ids.
func (r *Record) Equal(o *Record) bool {
	return r.Tokens == o.Tokens && r.Layers == o.Layers && r.TopK == o.TopK && r.Experts == o.Experts &&
		string(r.IDs) == string(o.IDs)
}
