package inference

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/t1pipe/t1/moe"
)

// decodeVLLMRouting reads vLLM's routed experts for a prompt of prompt
// tokens and out generated ones into [prompt+out−1, L, K], each set
// ascending; nil when the server sent none (null or absent: the server
// runs without --enable-return-routed-experts, or a stop string ended
// the request). Two encodings:
//
//   - vLLM 0.21.0 (vllm/entrypoints/openai/completion/serving.py): the
//     choice's routed_experts is nested lists [gen, L, K], gen normally
//     out−1 (the last token is never fed back), and the response's
//     prompt_routed_experts [prompt, L, K];
//   - vLLM 0.34.0: the choice's routed_experts is base64 of np.save bytes
//     (allow_pickle=False) of shape (tokens−1−routed_experts_prompt_start,
//     L, K), dtype uint8 up to 256 experts, else uint16 (int32 allowed);
//     t1 asks for routed_experts_prompt_start 0.
//
// A base64 string that is not a .npy is read as SGLang's raw int32.
// layers and topK, when positive, must match what was sent.
func decodeVLLMRouting(gen, prompt json.RawMessage, promptTokens, out, layers, topK int) (*moe.Routing, error) {
	gen = bytes.TrimSpace(gen)
	if len(gen) == 0 || string(gen) == "null" {
		return nil, nil
	}
	tokens := promptTokens + out - 1
	check := func(r moe.Routing) (*moe.Routing, error) {
		if r.Tokens != tokens {
			return nil, fmt.Errorf("routed experts cover %d tokens, want prompt %d + output %d − 1 = %d", r.Tokens, promptTokens, out, tokens)
		}
		if layers > 0 && r.Layers != layers || topK > 0 && r.TopK != topK {
			return nil, fmt.Errorf("routed experts have %d layers, top_k %d; the model has %d layers, top_k %d (inference.model or the checkpoint's config.json)",
				r.Layers, r.TopK, layers, topK)
		}
		sortSets(r)
		return &r, nil
	}
	switch gen[0] {
	case '[':
		var g, p [][][]int32
		if err := json.Unmarshal(gen, &g); err != nil {
			return nil, fmt.Errorf("choices[0].routed_experts: %w", err)
		}
		if pb := bytes.TrimSpace(prompt); len(pb) > 0 && string(pb) != "null" {
			if err := json.Unmarshal(pb, &p); err != nil {
				return nil, fmt.Errorf("prompt_routed_experts: %w", err)
			}
		}
		if len(p) != promptTokens {
			return nil, fmt.Errorf("prompt_routed_experts has %d rows for a prompt of %d tokens (vLLM 0.21 sends them beside the choices)", len(p), promptTokens)
		}
		if len(g) < out-1 {
			return nil, fmt.Errorf("choices[0].routed_experts has %d rows for %d generated tokens, want %d", len(g), out, out-1)
		}
		rows := append(p, g[:max(out-1, 0)]...)
		if len(rows) == 0 || len(rows[0]) == 0 {
			return nil, errors.New("routed experts are empty")
		}
		L, K := len(rows[0]), len(rows[0][0])
		r := moe.NewRouting(len(rows), L, K)
		for t, row := range rows {
			if len(row) != L {
				return nil, fmt.Errorf("routed experts row %d has %d layers, row 0 %d", t, len(row), L)
			}
			for l, set := range row {
				if len(set) != K {
					return nil, fmt.Errorf("routed experts row %d layer %d has %d experts, want %d", t, l, len(set), K)
				}
				copy(r.At(t, l), set)
			}
		}
		return check(r)
	case '"':
		var s string
		if err := json.Unmarshal(gen, &s); err != nil {
			return nil, fmt.Errorf("choices[0].routed_experts: %w", err)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("choices[0].routed_experts: %w", err)
		}
		if !bytes.HasPrefix(b, []byte(npyMagic)) {
			r, err := DecodeRoutedExperts(s, tokens, layers, topK)
			if err != nil {
				return nil, fmt.Errorf("choices[0].%w", err)
			}
			return &r, nil
		}
		r, err := decodeNPY(b)
		if err != nil {
			return nil, fmt.Errorf("choices[0].routed_experts: %w", err)
		}
		return check(r)
	}
	return nil, fmt.Errorf("choices[0].routed_experts: want nested lists or a base64 string, got %.40s", gen)
}

const npyMagic = "\x93NUMPY"

var (
	npyDescr   = regexp.MustCompile(`'descr':\s*'([^']*)'`)
	npyFortran = regexp.MustCompile(`'fortran_order':\s*(True|False)`)
	npyShape   = regexp.MustCompile(`'shape':\s*\(([^)]*)\)`)
)

// decodeNPY reads a C-order 3-d integer array written by np.save.
func decodeNPY(b []byte) (moe.Routing, error) {
	if len(b) < 10 {
		return moe.Routing{}, errors.New(".npy too short")
	}
	var hlen, off int
	switch b[6] {
	case 1:
		hlen, off = int(binary.LittleEndian.Uint16(b[8:])), 10
	case 2, 3:
		if len(b) < 12 {
			return moe.Routing{}, errors.New(".npy too short")
		}
		hlen, off = int(binary.LittleEndian.Uint32(b[8:])), 12
	default:
		return moe.Routing{}, fmt.Errorf(".npy format version %d.%d", b[6], b[7])
	}
	if len(b) < off+hlen {
		return moe.Routing{}, errors.New(".npy header truncated")
	}
	hdr, data := string(b[off:off+hlen]), b[off+hlen:]
	d, f, sh := npyDescr.FindStringSubmatch(hdr), npyFortran.FindStringSubmatch(hdr), npyShape.FindStringSubmatch(hdr)
	if d == nil || f == nil || sh == nil {
		return moe.Routing{}, fmt.Errorf(".npy header %q", hdr)
	}
	if f[1] != "False" {
		return moe.Routing{}, errors.New(".npy in Fortran order")
	}
	var dims []int
	for _, p := range strings.Split(sh[1], ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return moe.Routing{}, fmt.Errorf(".npy shape %q", sh[1])
		}
		dims = append(dims, n)
	}
	if len(dims) != 3 {
		return moe.Routing{}, fmt.Errorf(".npy shape %v, want (tokens, layers, top_k)", dims)
	}
	var size int
	var read func(p []byte) int32
	switch d[1] {
	case "|u1":
		size, read = 1, func(p []byte) int32 { return int32(p[0]) }
	case "|i1":
		size, read = 1, func(p []byte) int32 { return int32(int8(p[0])) }
	case "<u2":
		size, read = 2, func(p []byte) int32 { return int32(binary.LittleEndian.Uint16(p)) }
	case "<i2":
		size, read = 2, func(p []byte) int32 { return int32(int16(binary.LittleEndian.Uint16(p))) }
	case "<i4":
		size, read = 4, func(p []byte) int32 { return int32(binary.LittleEndian.Uint32(p)) }
	default:
		return moe.Routing{}, fmt.Errorf(".npy dtype %s (want uint8, uint16 or int32)", d[1])
	}
	r := moe.NewRouting(dims[0], dims[1], dims[2])
	if len(data) != size*len(r.Experts) {
		return moe.Routing{}, fmt.Errorf(".npy holds %d bytes for shape %v of %s", len(data), dims, d[1])
	}
	for i := range r.Experts {
		r.Experts[i] = read(data[size*i:])
	}
	return r, nil
}
