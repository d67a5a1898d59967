package tokenizer

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	json "github.com/goccy/go-json"
)

// File is the name of the tokenizer in a Hugging Face model directory.
const File = "tokenizer.json"

// LoadDir reads dir/tokenizer.json, a Hugging Face tokenizer.
func LoadDir(dir string) (*HF, error) {
	path := filepath.Join(dir, File)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w (a Hugging Face model directory holds %s)", err, File)
	}
	h, err := ParseHF(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// object is one JSON object, its keys checked against what t1 implements.
type object map[string]json.RawMessage

func (o object) refuseOthers(where string, known ...string) error {
	var extra []string
	for k := range o {
		if !slices.Contains(known, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Errorf("%s: field %s is not supported", where, strings.Join(extra, ", "))
	}
	return nil
}

func (o object) isNull(k string) bool {
	v, ok := o[k]
	return !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

func (o object) get(where, k string, v any) error {
	raw, ok := o[k]
	if !ok {
		return fmt.Errorf("%s: missing field %s", where, k)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s.%s: %w", where, k, err)
	}
	return nil
}

// optional reads k into v when it is present and not null.
func (o object) optional(where, k string, v any) error {
	if o.isNull(k) {
		return nil
	}
	return o.get(where, k, v)
}

func (o object) typ(where string) (string, error) {
	var t string
	err := o.get(where, "type", &t)
	return t, err
}

func parseObject(where string, raw json.RawMessage) (object, error) {
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return o, nil
}

type addedJSON struct {
	ID         *int   `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// ParseHF reads a Hugging Face tokenizer.json. It implements byte-level
// BPE (GPT-2, Qwen2, Llama 3 and their kin) and refuses, naming it, any
// feature it does not implement exactly.
//
// A large file parsed a moment ago is not parsed again: every checkpoint
// of a run carries the same tokenizer.json (Qwen3's is 11 MB, a third of a
// second to parse), and a process loads one per policy version. Callers
// share the *HF, which nothing changes once it is made (its word cache has
// locks of its own).
func ParseHF(b []byte) (*HF, error) {
	if len(b) < recentMin {
		return parseHF(b)
	}
	sum := sha256.Sum256(b)
	if h := recent.get(sum); h != nil {
		return h, nil
	}
	h, err := parseHF(b)
	if err == nil {
		recent.put(sum, h)
	}
	return h, err
}

// recentMin is the size from which a tokenizer.json is worth remembering.
const recentMin = 1 << 20

// recent holds the last two large tokenizers parsed, by their file's
// SHA-256.
var recent recentHF

type recentHF struct {
	mu   sync.Mutex
	sums [2][sha256.Size]byte
	hfs  [2]*HF
	next int
}

func (r *recentHF) get(sum [sha256.Size]byte) *HF {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, h := range r.hfs {
		if h != nil && r.sums[i] == sum {
			return h
		}
	}
	return nil
}

func (r *recentHF) put(sum [sha256.Size]byte, h *HF) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sums[r.next], r.hfs[r.next] = sum, h
	r.next = (r.next + 1) % len(r.hfs)
}

func parseHF(b []byte) (*HF, error) {
	top, err := parseObject("tokenizer.json", b)
	if err != nil {
		return nil, err
	}
	if err := top.refuseOthers("tokenizer.json", "version", "truncation", "padding", "added_tokens", "normalizer",
		"pre_tokenizer", "post_processor", "decoder", "model"); err != nil {
		return nil, err
	}
	for _, k := range []string{"truncation", "padding"} {
		if !top.isNull(k) {
			return nil, fmt.Errorf("tokenizer.json: %s is set; t1 encodes without %s (set it to null)", k, k)
		}
	}
	h := &HF{}
	vocab, err := h.parseModel(top)
	if err != nil {
		return nil, err
	}
	if err := h.parseNormalizer(top); err != nil {
		return nil, err
	}
	if err := h.parsePreTokenizer(top); err != nil {
		return nil, err
	}
	if err := h.parsePostProcessor(top); err != nil {
		return nil, err
	}
	if err := h.parseDecoder(top); err != nil {
		return nil, err
	}
	if err := h.parseAdded(top, vocab); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *HF) parseModel(top object) (map[string]int, error) {
	raw, ok := top["model"]
	if !ok {
		return nil, errors.New("tokenizer.json: missing field model")
	}
	m, err := parseObject("model", raw)
	if err != nil {
		return nil, err
	}
	if t, err := m.typ("model"); err != nil {
		return nil, err
	} else if t != "BPE" {
		return nil, fmt.Errorf("model: type %q is not supported (t1 implements byte-level BPE)", t)
	}
	if err := m.refuseOthers("model", "type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
		"fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"); err != nil {
		return nil, err
	}
	var dropout float64
	if err := m.optional("model", "dropout", &dropout); err != nil {
		return nil, err
	}
	if dropout != 0 {
		return nil, fmt.Errorf("model: dropout %g is not supported (BPE dropout samples; t1 encodes deterministically)", dropout)
	}
	for _, k := range []string{"continuing_subword_prefix", "end_of_word_suffix"} {
		var s string
		if err := m.optional("model", k, &s); err != nil {
			return nil, err
		}
		if s != "" {
			return nil, fmt.Errorf("model: %s %q is not supported", k, s)
		}
	}
	var byteFallback bool
	if err := m.optional("model", "byte_fallback", &byteFallback); err != nil {
		return nil, err
	}
	if byteFallback {
		return nil, errors.New("model: byte_fallback is not supported (it belongs to SentencePiece-style BPE, not byte-level)")
	}
	if err := m.optional("model", "ignore_merges", &h.ignoreMerges); err != nil {
		return nil, err
	}
	var vocab map[string]int
	if err := m.get("model", "vocab", &vocab); err != nil {
		return nil, err
	}
	var all json.RawMessage
	if err := m.get("model", "merges", &all); err != nil {
		return nil, err
	}
	// Merges as pairs (Qwen's files) decode in one call: each element
	// alone would cost a call of its own, and the same pair is what each
	// would decode to. Anything else (strings, a mix) takes the path that
	// reads element by element and names the one it refuses.
	var pairs [][2]string
	if json.Unmarshal(all, &pairs) == nil {
		return vocab, h.buildModel(vocab, len(pairs), func(i int) ([2]string, error) { return pairs[i], nil })
	}
	var merges []json.RawMessage
	if err := m.get("model", "merges", &merges); err != nil {
		return nil, err
	}
	return vocab, h.buildModel(vocab, len(merges), func(i int) ([2]string, error) { return mergeAt(i, merges[i]) })
}

// mergeAt reads merge i, written "a b" or ["a", "b"].
func mergeAt(i int, raw json.RawMessage) ([2]string, error) {
	var pair [2]string
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return pair, fmt.Errorf("model.merges[%d]: %w", i, err)
		}
		parts := strings.Split(s, " ")
		if len(parts) != 2 {
			return pair, fmt.Errorf("model.merges[%d]: %q is not two tokens separated by one space", i, s)
		}
		return [2]string{parts[0], parts[1]}, nil
	}
	if err := json.Unmarshal(raw, &pair); err != nil {
		return pair, fmt.Errorf("model.merges[%d]: want \"a b\" or [\"a\", \"b\"]: %w", i, err)
	}
	return pair, nil
}

func (h *HF) buildModel(vocab map[string]int, n int, mergeAt func(int) ([2]string, error)) error {
	maxID := -1
	for tok, id := range vocab {
		if id < 0 {
			return fmt.Errorf("model.vocab: token %q has negative id %d", tok, id)
		}
		maxID = max(maxID, id)
	}
	h.tokens = make([][]byte, maxID+1)
	h.known = make([]bool, maxID+1)
	h.byteLevel = make(map[string]int, len(vocab))
	for tok, id := range vocab {
		if h.known[id] {
			return fmt.Errorf("model.vocab: id %d is given to two tokens", id)
		}
		h.known[id] = true
		if raw, ok := fromByteLevel(tok); ok {
			h.tokens[id] = raw
			h.byteLevel[string(raw)] = id
		} else {
			// Hugging Face's ByteLevel decoder writes such a token as its
			// UTF-8; no byte-level input can produce it.
			h.tokens[id] = []byte(tok)
		}
	}
	for b := 0; b < 256; b++ {
		id, ok := vocab[string(byteToRune[b])]
		if !ok {
			return fmt.Errorf("model.vocab: no token for byte 0x%02x (%q): not a byte-level BPE vocabulary", b, byteToRune[b])
		}
		h.byteID[b] = int32(id)
	}
	h.merges = make(map[uint64]merge, n)
	for i := range n {
		pair, err := mergeAt(i)
		if err != nil {
			return err
		}
		a, okA := vocab[pair[0]]
		c, okB := vocab[pair[1]]
		n, okN := vocab[pair[0]+pair[1]]
		switch {
		case !okA:
			return fmt.Errorf("model.merges[%d]: token %q is not in the vocabulary", i, pair[0])
		case !okB:
			return fmt.Errorf("model.merges[%d]: token %q is not in the vocabulary", i, pair[1])
		case !okN:
			return fmt.Errorf("model.merges[%d]: merged token %q is not in the vocabulary", i, pair[0]+pair[1])
		}
		// A repeated pair takes its last rank, as the Rust library's map does.
		h.merges[pairKey(int32(a), int32(c))] = merge{rank: int32(i), id: int32(n)}
	}
	h.bytePairs = make([]merge, 256*256)
	for a := range 256 {
		for b := range 256 {
			m, ok := h.merges[pairKey(h.byteID[a], h.byteID[b])]
			if !ok {
				m.rank = noMerge
			}
			h.bytePairs[a<<8|b] = m
		}
	}
	return nil
}

func (h *HF) parseNormalizer(top object) error {
	if top.isNull("normalizer") {
		return nil
	}
	n, err := parseObject("normalizer", top["normalizer"])
	if err != nil {
		return err
	}
	t, err := n.typ("normalizer")
	if err != nil {
		return err
	}
	if t != "NFC" {
		return fmt.Errorf("normalizer: type %q is not supported (t1 implements NFC)", t)
	}
	h.nfc = true
	return n.refuseOthers("normalizer", "type")
}

func (h *HF) parsePreTokenizer(top object) error {
	if top.isNull("pre_tokenizer") {
		return errors.New("pre_tokenizer: missing; a byte-level BPE needs a ByteLevel pre-tokenizer")
	}
	p, err := parseObject("pre_tokenizer", top["pre_tokenizer"])
	if err != nil {
		return err
	}
	t, err := p.typ("pre_tokenizer")
	if err != nil {
		return err
	}
	steps := []object{p}
	if t == "Sequence" {
		if err := p.refuseOthers("pre_tokenizer", "type", "pretokenizers"); err != nil {
			return err
		}
		var raws []json.RawMessage
		if err := p.get("pre_tokenizer", "pretokenizers", &raws); err != nil {
			return err
		}
		steps = steps[:0]
		for i, raw := range raws {
			s, err := parseObject(fmt.Sprintf("pre_tokenizer.pretokenizers[%d]", i), raw)
			if err != nil {
				return err
			}
			steps = append(steps, s)
		}
	}
	for i, s := range steps {
		where := fmt.Sprintf("pre_tokenizer step %d", i)
		t, err := s.typ(where)
		if err != nil {
			return err
		}
		last := i == len(steps)-1
		switch t {
		case "Split":
			if last {
				return fmt.Errorf("%s: Split comes last; a byte-level BPE ends with ByteLevel", where)
			}
			pat, err := parseSplit(where, s)
			if err != nil {
				return err
			}
			h.splits = append(h.splits, pat)
		case "ByteLevel":
			if !last {
				return fmt.Errorf("%s: ByteLevel is followed by another pre-tokenizer, which t1 does not implement", where)
			}
			if err := s.refuseOthers(where, "type", "add_prefix_space", "trim_offsets", "use_regex"); err != nil {
				return err
			}
			var prefix bool
			if err := s.optional(where, "add_prefix_space", &prefix); err != nil {
				return err
			}
			if prefix {
				return fmt.Errorf("%s: add_prefix_space true is not supported", where)
			}
			useRegex := true // the Rust library's default
			if err := s.optional(where, "use_regex", &useRegex); err != nil {
				return err
			}
			if useRegex {
				h.splits = append(h.splits, patternGPT2)
			}
		default:
			return fmt.Errorf("%s: type %q is not supported (t1 implements Split with a known pattern, then ByteLevel)", where, t)
		}
	}
	return nil
}

// The Split patterns t1 implements, by their exact text. Each has a
// hand-written scanner, as Go's regexp has no lookahead for \s+(?!\S).
var splitPatterns = map[string]pattern{
	`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`:                                          patternGPT2,
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`:      patternQwen2,
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: patternCL100K,
	ByteClassPattern: patternByteClass,
}

func parseSplit(where string, s object) (pattern, error) {
	if err := s.refuseOthers(where, "type", "pattern", "behavior", "invert"); err != nil {
		return 0, err
	}
	var pat map[string]string
	if err := s.get(where, "pattern", &pat); err != nil {
		return 0, err
	}
	re, ok := pat["Regex"]
	if !ok || len(pat) != 1 {
		return 0, fmt.Errorf("%s: pattern %v is not supported (t1 implements known Regex patterns)", where, pat)
	}
	p, ok := splitPatterns[re]
	if !ok {
		return 0, fmt.Errorf("%s: Split pattern %q is not supported (t1 implements the GPT-2, Qwen2, cl100k/Llama 3 and its own byte-class patterns)", where, re)
	}
	var behavior string
	var invert bool
	if err := s.get(where, "behavior", &behavior); err != nil {
		return 0, err
	}
	if err := s.optional(where, "invert", &invert); err != nil {
		return 0, err
	}
	if behavior != "Isolated" || invert {
		return 0, fmt.Errorf("%s: Split behavior %q (invert %v) is not supported (t1 implements Isolated)", where, behavior, invert)
	}
	return p, nil
}

func (h *HF) parsePostProcessor(top object) error {
	if top.isNull("post_processor") {
		return nil
	}
	p, err := parseObject("post_processor", top["post_processor"])
	if err != nil {
		return err
	}
	t, err := p.typ("post_processor")
	if err != nil {
		return err
	}
	if t != "ByteLevel" {
		return fmt.Errorf("post_processor: type %q is not supported (t1 implements ByteLevel, which changes offsets only)", t)
	}
	return p.refuseOthers("post_processor", "type", "add_prefix_space", "trim_offsets", "use_regex")
}

func (h *HF) parseDecoder(top object) error {
	if top.isNull("decoder") {
		return errors.New("decoder: missing; a byte-level BPE needs the ByteLevel decoder")
	}
	d, err := parseObject("decoder", top["decoder"])
	if err != nil {
		return err
	}
	t, err := d.typ("decoder")
	if err != nil {
		return err
	}
	if t != "ByteLevel" {
		return fmt.Errorf("decoder: type %q is not supported (t1 implements ByteLevel)", t)
	}
	return d.refuseOthers("decoder", "type", "add_prefix_space", "trim_offsets", "use_regex")
}

func (h *HF) parseAdded(top object, vocab map[string]int) error {
	var list []addedJSON
	if err := top.optional("tokenizer.json", "added_tokens", &list); err != nil {
		return err
	}
	h.addedID = map[string]int{}
	var raw, norm []string
	for i, a := range list {
		where := fmt.Sprintf("added_tokens[%d] %q", i, a.Content)
		switch {
		case a.ID == nil || *a.ID < 0:
			return fmt.Errorf("%s: missing or negative id", where)
		case a.Content == "":
			return fmt.Errorf("%s: empty content", where)
		case a.SingleWord, a.LStrip, a.RStrip:
			return fmt.Errorf("%s: single_word, lstrip and rstrip are not supported", where)
		}
		if _, dup := h.addedID[a.Content]; dup {
			return fmt.Errorf("%s: listed twice", where)
		}
		id := *a.ID
		if vid, inVocab := vocab[a.Content]; inVocab && vid != id {
			return fmt.Errorf("%s: id %d, but the vocabulary has it as %d", where, id, vid)
		} else if !inVocab && id < len(h.known) && h.known[id] {
			return fmt.Errorf("%s: id %d belongs to another token", where, id)
		}
		for id >= len(h.tokens) {
			h.tokens = append(h.tokens, nil)
			h.known = append(h.known, false)
		}
		h.known[id] = true
		h.tokens[id] = []byte(a.Content)
		h.addedID[a.Content] = id
		if a.Special {
			if h.special == nil {
				h.special = map[int]bool{}
			}
			h.special[id] = true
		}
		if a.Normalized && h.nfc {
			norm = append(norm, nfc(a.Content))
			h.addedID[nfc(a.Content)] = id
		} else if a.Normalized {
			norm = append(norm, a.Content)
		} else {
			raw = append(raw, a.Content)
		}
	}
	h.rawAdded = newMatcher(raw)
	h.normAdded = newMatcher(norm)
	return nil
}
