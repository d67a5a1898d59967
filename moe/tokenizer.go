package moe

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/t1pipe/t1/tokenizer"
)

// Default special tokens. They take ids 256.. in this order; merges follow.
const (
	TokPad       = "<|pad|>"
	TokSystem    = "<|system|>"
	TokUser      = "<|user|>"
	TokAssistant = "<|assistant|>"
	TokTool      = "<|tool|>"
	TokEnd       = "<|end|>"
)

// DefaultSpecials is the special-token list of DefaultTokenizer.
var DefaultSpecials = []string{TokPad, TokSystem, TokUser, TokAssistant, TokTool, TokEnd}

// Tokenizer is a byte-level BPE tokenizer.
//
// Ids 0-255 are the raw bytes, ids 256..256+len(Specials)-1 the special
// tokens, and every further id the result of one merge, in training order.
// Any byte string encodes, and Decode(Encode(s)) == s exactly, including
// invalid UTF-8. A special token's text is always encoded as that one token.
// Decode accepts any id sequence, so a sampler may produce non-canonical
// tokenisations (e.g. "h","e" instead of "he") that Encode would not; the
// text round-trips but the ids need not.
//
// A checkpoint saves it as a Hugging Face tokenizer (HFFiles), which
// Hugging Face's library reads to the same ids for any valid UTF-8 text;
// MarshalJSON's private form is what earlier checkpoints hold.
//
// A Tokenizer is immutable after construction and safe for concurrent use.
type Tokenizer struct {
	specials  []string
	merges    [][2]int
	vocab     [][]byte       // id -> bytes it decodes to
	ranks     map[[2]int]int // pair -> merge index (lower merges first)
	specialID map[string]int
}

var _ tokenizer.Tokenizer = (*Tokenizer)(nil)

// NewTokenizer builds a tokenizer from its specials and merges, checking
// that every merge refers only to earlier ids.
func NewTokenizer(specials []string, merges [][2]int) (*Tokenizer, error) {
	t := &Tokenizer{specials: append([]string(nil), specials...), merges: append([][2]int(nil), merges...),
		ranks: map[[2]int]int{}, specialID: map[string]int{}}
	for i := 0; i < 256; i++ {
		t.vocab = append(t.vocab, []byte{byte(i)})
	}
	for i, s := range specials {
		if !strings.HasPrefix(s, "<|") || !strings.HasSuffix(s, "|>") || len(s) < 5 {
			return nil, fmt.Errorf("tokenizer: special token %d %q must look like <|name|>", i, s)
		}
		if _, dup := t.specialID[s]; dup {
			return nil, fmt.Errorf("tokenizer: special token %q listed twice", s)
		}
		t.specialID[s] = len(t.vocab)
		t.vocab = append(t.vocab, []byte(s))
	}
	firstMerge := len(t.vocab)
	for i, m := range merges {
		id := firstMerge + i
		for _, p := range m {
			if p < 0 || p >= id || (p >= 256 && p < firstMerge) {
				return nil, fmt.Errorf("tokenizer: merge %d (%d,%d) refers to id %d, which is not a byte or an earlier merge", i, m[0], m[1], p)
			}
		}
		if _, dup := t.ranks[m]; dup {
			return nil, fmt.Errorf("tokenizer: merge %d (%d,%d) repeats an earlier merge", i, m[0], m[1])
		}
		t.ranks[m] = i
		t.vocab = append(t.vocab, append(append([]byte(nil), t.vocab[m[0]]...), t.vocab[m[1]]...))
	}
	return t, nil
}

// VocabSize is the number of ids (bytes + specials + merges).
func (t *Tokenizer) VocabSize() int { return len(t.vocab) }

// AddedTokens are the special tokens in id order (tokenizer.Tokenizer).
func (t *Tokenizer) AddedTokens() []string { return t.Specials() }

// Specials returns the special tokens in id order.
func (t *Tokenizer) Specials() []string { return append([]string(nil), t.specials...) }

// SpecialID returns the id of a special token such as "<|end|>".
func (t *Tokenizer) SpecialID(s string) (int, bool) {
	id, ok := t.specialID[s]
	return id, ok
}

// IsSpecial reports whether id is a special token.
func (t *Tokenizer) IsSpecial(id int) bool { return id >= 256 && id < 256+len(t.specials) }

// TokenBytes returns the bytes id decodes to.
func (t *Tokenizer) TokenBytes(id int) ([]byte, error) {
	if id < 0 || id >= len(t.vocab) {
		return nil, fmt.Errorf("tokenizer: id %d outside the vocabulary [0,%d)", id, len(t.vocab))
	}
	return t.vocab[id], nil
}

// Encode tokenises text (any bytes). Special-token texts become their ids.
func (t *Tokenizer) Encode(text string) []int {
	var out []int
	for len(text) > 0 {
		pos, sp := t.nextSpecial(text)
		for _, c := range chunks(text[:pos]) {
			out = t.encodeChunk(out, c)
		}
		if sp == "" {
			break
		}
		out = append(out, t.specialID[sp])
		text = text[pos+len(sp):]
	}
	return out
}

// nextSpecial finds the first special token in s, returning its offset and
// text, or (len(s), "") when there is none. At one offset the longest
// special wins.
func (t *Tokenizer) nextSpecial(s string) (int, string) {
	off := 0
	for {
		i := strings.Index(s[off:], "<|")
		if i < 0 {
			return len(s), ""
		}
		at := off + i
		best := ""
		for _, sp := range t.specials {
			if len(sp) > len(best) && strings.HasPrefix(s[at:], sp) {
				best = sp
			}
		}
		if best != "" {
			return at, best
		}
		off = at + 1
	}
}

// encodeChunk applies merges to one pre-token, lowest merge rank first.
func (t *Tokenizer) encodeChunk(out []int, c string) []int {
	sym := make([]int, len(c))
	for i := 0; i < len(c); i++ {
		sym[i] = int(c[i])
	}
	for len(sym) > 1 {
		best, bestRank := [2]int{}, -1
		for i := 0; i+1 < len(sym); i++ {
			p := [2]int{sym[i], sym[i+1]}
			if r, ok := t.ranks[p]; ok && (bestRank < 0 || r < bestRank) {
				best, bestRank = p, r
			}
		}
		if bestRank < 0 {
			break
		}
		sym = mergePair(sym, best, t.mergeID(bestRank))
	}
	return append(out, sym...)
}

func (t *Tokenizer) mergeID(rank int) int { return 256 + len(t.specials) + rank }

// mergePair replaces every non-overlapping occurrence of p (left to right)
// with id, in place.
func mergePair(sym []int, p [2]int, id int) []int {
	w := 0
	for i := 0; i < len(sym); i++ {
		if i+1 < len(sym) && sym[i] == p[0] && sym[i+1] == p[1] {
			sym[w] = id
			i++
		} else {
			sym[w] = sym[i]
		}
		w++
	}
	return sym[:w]
}

// Decode concatenates the bytes of ids. It fails only on an id outside the
// vocabulary.
func (t *Tokenizer) Decode(ids []int) (string, error) {
	var b strings.Builder
	for i, id := range ids {
		if id < 0 || id >= len(t.vocab) {
			return "", fmt.Errorf("tokenizer: token %d: id %d outside the vocabulary [0,%d)", i, id, len(t.vocab))
		}
		b.Write(t.vocab[id])
	}
	return b.String(), nil
}

// byte classes for pre-tokenisation.
const (
	clsLetter = iota // ASCII letters and every byte >= 0x80 (keeps UTF-8 words whole)
	clsDigit
	clsSpace // ' '
	clsBreak // other ASCII whitespace and control bytes
	clsPunct
)

func class(b byte) int {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b == '_', b >= 0x80:
		return clsLetter
	case b >= '0' && b <= '9':
		return clsDigit
	case b == ' ':
		return clsSpace
	case b < 0x20 || b == 0x7f:
		return clsBreak
	}
	return clsPunct
}

// chunks splits s into pre-tokens that merges never cross: runs of one byte
// class, where a single space preceding a letter, digit or punctuation run
// joins that run (" word"), as in GPT-2. It covers every byte of s.
// tokenizer.ByteClassPattern is the same cut as a regex, for the
// tokenizer.json a checkpoint holds: changing one means changing both
// (TestHFLibraryAgrees compares them through Hugging Face's library).
func chunks(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := i
		c := class(s[i])
		if c == clsSpace && i+1 < len(s) && isWordish(class(s[i+1])) {
			j = i + 1
			c = class(s[j])
		}
		for j < len(s) && class(s[j]) == c {
			j++
		}
		if c == clsSpace && j < len(s) && j-i > 1 && isWordish(class(s[j])) {
			j-- // leave the last space to the word that follows
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}

func isWordish(c int) bool { return c == clsLetter || c == clsDigit || c == clsPunct }

// TrainTokenizer learns merges from corpus until the vocabulary has
// vocabSize ids or no pair occurs twice. Each step merges the most frequent
// adjacent pair within pre-tokens; ties go to the pair with the smaller
// left id, then the smaller right id, so training is deterministic.
func TrainTokenizer(corpus string, vocabSize int, specials []string) (*Tokenizer, error) {
	base := 256 + len(specials)
	if vocabSize < base {
		return nil, fmt.Errorf("tokenizer: vocab size %d is below the %d byte and special ids", vocabSize, base)
	}
	if _, err := NewTokenizer(specials, nil); err != nil {
		return nil, err
	}
	// Special-token texts in the corpus are atomic, never merged into.
	t0, _ := NewTokenizer(specials, nil)
	freq := map[string]int{}
	for len(corpus) > 0 {
		pos, sp := t0.nextSpecial(corpus)
		for _, c := range chunks(corpus[:pos]) {
			freq[c]++
		}
		if sp == "" {
			break
		}
		corpus = corpus[pos+len(sp):]
	}
	type word struct {
		sym []int
		n   int
	}
	keys := make([]string, 0, len(freq))
	for k := range freq {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	words := make([]word, 0, len(keys))
	for _, k := range keys {
		w := word{n: freq[k]}
		for i := 0; i < len(k); i++ {
			w.sym = append(w.sym, int(k[i]))
		}
		words = append(words, w)
	}
	var merges [][2]int
	for base+len(merges) < vocabSize {
		counts := map[[2]int]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.sym); i++ {
				counts[[2]int{w.sym[i], w.sym[i+1]}] += w.n
			}
		}
		best, bestN := [2]int{}, 1
		for p, n := range counts {
			if n > bestN || (n == bestN && bestN > 1 && (p[0] < best[0] || (p[0] == best[0] && p[1] < best[1]))) {
				best, bestN = p, n
			}
		}
		if bestN < 2 {
			break
		}
		id := base + len(merges)
		merges = append(merges, best)
		for i := range words {
			words[i].sym = mergePair(words[i].sym, best, id)
		}
	}
	return NewTokenizer(specials, merges)
}

// tokenizerJSON is t1's private serialised form, the tokenizer.json of
// checkpoints written before they held Hugging Face's (HFFiles).
type tokenizerJSON struct {
	Type     string   `json:"type"`
	Specials []string `json:"specials"`
	Merges   [][2]int `json:"merges"`
}

const tokenizerType = "t1-byte-bpe-v1"

// MarshalJSON writes {"type":"t1-byte-bpe-v1","specials":[…],"merges":[[a,b],…]}.
func (t *Tokenizer) MarshalJSON() ([]byte, error) {
	return json.Marshal(tokenizerJSON{Type: tokenizerType, Specials: t.specials, Merges: t.merges})
}

// UnmarshalJSON reads the form MarshalJSON writes and validates it.
func (t *Tokenizer) UnmarshalJSON(b []byte) error {
	var j tokenizerJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("tokenizer json: %w", err)
	}
	if j.Type != tokenizerType {
		return fmt.Errorf("tokenizer json: type %q, want %q", j.Type, tokenizerType)
	}
	if j.Specials == nil {
		return errors.New("tokenizer json: missing field specials")
	}
	nt, err := NewTokenizer(j.Specials, j.Merges)
	if err != nil {
		return err
	}
	*t = *nt
	return nil
}
