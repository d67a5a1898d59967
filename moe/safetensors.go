package moe

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
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

// ReadSafetensors parses a whole safetensors file. It accepts F32 tensors
// only and checks that every tensor's offsets match its shape, lie inside
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
		if e.DType != "F32" {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: dtype %q, only F32 is supported", name, e.DType)
		}
		count := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && count > math.MaxInt32/int64(d)) {
				return nil, nil, fmt.Errorf("safetensors: tensor %q: bad shape %v", name, e.Shape)
			}
			count *= int64(d)
		}
		lo, hi := e.Offsets[0], e.Offsets[1]
		if lo < 0 || hi < lo || hi > int64(len(data)) || hi-lo != 4*count {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: offsets [%d,%d) do not hold shape %v of F32 within %d data bytes", name, lo, hi, e.Shape, len(data))
		}
		t := &Tensor{Name: name, Shape: e.Shape, Data: make([]float32, count)}
		for i := range t.Data {
			t.Data[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[lo+4*int64(i):]))
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

// loadTensors copies named tensors into w, requiring exactly w's names and
// shapes.
func loadTensors(w *Weights, got map[string]*Tensor) error {
	for _, t := range w.Tensors {
		g, ok := got[t.Name]
		if !ok {
			return fmt.Errorf("tensor %q missing", t.Name)
		}
		if !slices.Equal(g.Shape, t.Shape) {
			return fmt.Errorf("tensor %q: shape %v, the config needs %v", t.Name, g.Shape, t.Shape)
		}
		copy(t.Data, g.Data)
	}
	if len(got) != len(w.Tensors) {
		for name := range got {
			if w.Tensor(name) == nil {
				return fmt.Errorf("tensor %q is not part of the model", name)
			}
		}
	}
	return nil
}
