package moe

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
)

// safetensors layout (https://github.com/huggingface/safetensors):
//
//	+---------+----------------------------+-------------------------------+
//	| u64 LE  | JSON header, N bytes,      | tensor data, little endian,   |
//	| N       | space-padded to 8 bytes    | each at its data_offsets      |
//	+---------+----------------------------+-------------------------------+
//
// header: {"__metadata__":{"k":"v"}, "name":{"dtype":"F32","shape":[..],
// "data_offsets":[begin,end]}, …}, offsets relative to the data start.

// maxHeader bounds the JSON header a reader accepts (100 MB, as upstream).
const maxHeader = 100 << 20

type stEntry struct {
	DType   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// WriteSafetensors writes tensors (F32) in the given order with metadata.
func WriteSafetensors(w io.Writer, tensors []*Tensor, meta map[string]string) error {
	header := map[string]any{}
	if len(meta) > 0 {
		header["__metadata__"] = meta
	}
	var off int64
	for _, t := range tensors {
		if _, dup := header[t.Name]; dup || t.Name == "__metadata__" {
			return fmt.Errorf("safetensors: tensor name %q repeated or reserved", t.Name)
		}
		n := int64(4 * len(t.Data))
		header[t.Name] = stEntry{DType: "F32", Shape: t.Shape, Offsets: [2]int64{off, off + n}}
		off += n
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("safetensors: header: %w", err)
	}
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	buf := make([]byte, 8, 8+len(hb)+int(off))
	binary.LittleEndian.PutUint64(buf, uint64(len(hb)))
	buf = append(buf, hb...)
	for _, t := range tensors {
		for _, v := range t.Data {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
	}
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	return nil
}

// dtypeSize is the width of each element type ReadSafetensors reads:
// float32, and the half-precision types a model is shipped in, which are
// widened to float32 exactly (training keeps float32).
var dtypeSize = map[string]int64{"F32": 4, "BF16": 2, "F16": 2}

// ReadSafetensors parses a whole safetensors file. It reads F32, BF16 and
// F16 tensors into float32 and refuses any other dtype by name; it checks that every tensor's offsets match its shape, lie inside
// the data and that tensors neither overlap nor leave holes.
func ReadSafetensors(b []byte) (map[string]*Tensor, map[string]string, error) {
	if len(b) < 8 {
		return nil, nil, fmt.Errorf("safetensors: %d bytes, shorter than the 8-byte header length", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > maxHeader || n > uint64(len(b)-8) {
		return nil, nil, fmt.Errorf("safetensors: header length %d exceeds the file (%d bytes) or the %d limit", n, len(b), maxHeader)
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b[8 : 8+n]))
	if err := dec.Decode(&raw); err != nil {
		return nil, nil, fmt.Errorf("safetensors: header json: %w", err)
	}
	data := b[8+n:]
	var meta map[string]string
	out := map[string]*Tensor{}
	type span struct {
		lo, hi int64
		name   string
	}
	var spans []span
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &meta); err != nil {
				return nil, nil, fmt.Errorf("safetensors: __metadata__: %w", err)
			}
			continue
		}
		var e stEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		size, ok := dtypeSize[e.DType]
		if !ok {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: dtype %q: t1 reads F32, BF16 and F16 weights", name, e.DType)
		}
		count := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && count > math.MaxInt32/int64(d)) {
				return nil, nil, fmt.Errorf("safetensors: tensor %q: bad shape %v", name, e.Shape)
			}
			count *= int64(d)
		}
		lo, hi := e.Offsets[0], e.Offsets[1]
		if lo < 0 || hi < lo || hi > int64(len(data)) || hi-lo != size*count {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: offsets [%d,%d) do not hold shape %v of %s within %d data bytes", name, lo, hi, e.Shape, e.DType, len(data))
		}
		t := &Tensor{Name: name, Shape: e.Shape, Data: make([]float32, count)}
		src := data[lo:hi]
		for i := range t.Data {
			switch e.DType {
			case "F32":
				t.Data[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
			case "BF16":
				t.Data[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
			case "F16":
				t.Data[i] = halfToFloat(binary.LittleEndian.Uint16(src[2*i:]))
			}
		}
		out[name] = t
		spans = append(spans, span{lo, hi, name})
	}
	sort.Slice(spans, func(i, j int) bool {
		return spans[i].lo < spans[j].lo || (spans[i].lo == spans[j].lo && spans[i].hi < spans[j].hi)
	})
	var at int64
	for _, s := range spans {
		if s.lo != at {
			return nil, nil, fmt.Errorf("safetensors: tensor %q starts at %d, expected %d (overlap or hole)", s.name, s.lo, at)
		}
		at = s.hi
	}
	if at != int64(len(data)) {
		return nil, nil, fmt.Errorf("safetensors: %d trailing data bytes after the last tensor", int64(len(data))-at)
	}
	return out, meta, nil
}

// halfToFloat widens an IEEE 754 binary16 value exactly.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // infinity, NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
	case frac == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: frac · 2⁻²⁴, exact in float32.
	v := float32(frac) / (1 << 24)
	if sign != 0 {
		v = -v
	}
	return v
}

// loadTensors copies named tensors into w, requiring exactly w's names and
// shapes. With tied embeddings a checkpoint may also hold lm_head.weight,
// if it equals the embedding (some writers keep both).
func loadTensors(w *Weights, got map[string]*Tensor, cfg Config) error {
	if lm, ok := got["lm_head.weight"]; ok && cfg.TieEmbeddings && w.LMHead == nil && w.Score == nil {
		if e := got["model.embed_tokens.weight"]; e == nil || !slices.Equal(e.Data, lm.Data) {
			return errors.New("tensor \"lm_head.weight\" differs from the embedding, but the config ties them (tie_word_embeddings)")
		}
		got = maps.Clone(got)
		delete(got, "lm_head.weight")
	}
	var missing []string
	for _, t := range w.Tensors {
		g, ok := got[t.Name]
		if !ok {
			missing = append(missing, t.Name)
			continue
		}
		if !slices.Equal(g.Shape, t.Shape) {
			return fmt.Errorf("tensor %q: shape %v, the config needs %v", t.Name, g.Shape, t.Shape)
		}
		copy(t.Data, g.Data)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%d tensors missing: %s", len(missing), strings.Join(firstN(missing, 5), ", "))
	}
	if len(got) != len(w.Tensors) {
		var extra []string
		for name := range got {
			if w.Tensor(name) == nil {
				extra = append(extra, name)
			}
		}
		slices.Sort(extra)
		return fmt.Errorf("%d tensors are not part of the model: %s", len(extra), strings.Join(firstN(extra, 5), ", "))
	}
	return nil
}

// firstN lists up to n names, saying how many more there are.
func firstN(names []string, n int) []string {
	if len(names) <= n {
		return names
	}
	return append(slices.Clone(names[:n]), fmt.Sprintf("and %d more", len(names)-n))
}
