package moe

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/tokenizer"
)

// hfCases are texts that exercise every branch of pre-tokenisation: the
// corpus line by line and whole, special tokens (whole, partial, nested),
// non-ASCII letters, digits, punctuation runs, space runs before words,
// line breaks and the end, tabs and control bytes.
func hfCases() []string {
	cases := []string{
		corpus,
		"<|system|>You are a terminal agent.<|end|><|user|>List /tmp.<|end|><|assistant|>ls -la /tmp<|end|>",
		"<|end <|end|>> <|<|user|>|> <|pad|><|pad|> x<|tool|>y <|unknown|> <| |> <|end|",
		" <|end|> \n<|user|>  <|assistant|>\t",
		"héllo wörld naïve café Ωmega Привет мир 日本語のテキスト 我们今天 안녕하세요 العربية",
		"👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ x🙂y e\u0301 A\u030a",
		"a\u00a0b\u3000c\u2028d\u2029e\u0085f\ufeffg \u00a0 h",
		"3.14159 1,000,000 12abc a1b2 007 ١٢٣ ½ x2 2x 1e-9",
		"!!! ?!... ---> <<= :: ;; ${HOME} $(ls) && || >> 2>&1 | grep -v '^#' \"q\" `c` ~/.x @y [z] {w} ^ %",
		"x  y   z    w     ",
		"  leading two",
		" one",
		"trailing   ",
		"   ",
		"a  \nb \n\n  \n c\n\n\n",
		"line one\r\nline two  \r\n\r\n\tindented\r\n",
		"\t\t\tx\t\t y \t z\t",
		"\x00a\x01b\x07\x1b[31mred\x1b[0m\x7f end",
		"snake_case_name __init__ _x x_ _ __",
		"def f(x):\n    if x:\n        return [a**2 for a in x]  # squares\n",
		strings.Repeat(" ", 300) + "x" + strings.Repeat("ab", 200) + strings.Repeat("\n", 50),
		"",
	}
	for _, l := range strings.SplitAfter(corpus, "\n") {
		if l != "" {
			cases = append(cases, l)
		}
	}
	return append(cases, randomTexts(300)...)
}

// randomTexts are valid UTF-8 strings drawn from pieces that meet at every
// class boundary, with fragments of special tokens.
func randomTexts(n int) []string {
	pieces := []string{" ", " ", "  ", "\n", "\t", "\r\n", "a", "Z", "_", "word", "é", "日本", "👍", "\u00a0",
		"0", "42", ".", "!", "--", "<|", "|>", "<|end|>", "<|user|>", "<|pad", "end|>", "\x00", "\x7f", "'s", "~"}
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for range r.IntN(24) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		out[i] = b.String()
	}
	return out
}

// TestHFLibraryAgrees writes the default tokenizer as Hugging Face files
// and has Hugging Face's Rust tokenizers (its Node binding, which the
// tests of package tokenizer pin) encode and decode hfCases: every text
// must give Encode's ids and decode back to itself. Invalid UTF-8 is left
// out: the library takes strings, never bytes, so such text reaches it
// with U+FFFD in place of the bad bytes and cannot keep them, where t1
// encodes the bytes themselves.
func TestHFLibraryAgrees(t *testing.T) {
	dir := filepath.Join(testinfra.WorkDir(), "..", "tokenizer", "testdata")
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed; it runs Hugging Face's tokenizers (make setup)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "tokenizers")); err != nil {
		t.Skip("the tokenizers Node binding is not installed in ../tokenizer/testdata (make setup)")
	}
	tok, err := DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	files, err := tok.HFFiles()
	if err != nil {
		t.Fatal(err)
	}
	texts := hfCases()
	var ids [][]int
	for _, s := range texts {
		if !utf8.ValidString(s) {
			t.Fatalf("case %q is not valid UTF-8", s)
		}
		ids = append(ids, append([]int{}, tok.Encode(s)...))
	}
	// Non-canonical sequences a sampler may produce decode too.
	ids = append(ids, []int{'h', 'e', 'l', 'l', 'o'}, []int{256, 'x', 261, 258}, []int{0xc3, 0xa9})
	in, err := json.Marshal(map[string]any{"tokenizer": string(files[TokenizerFile]), "texts": texts, "ids": ids})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "t1-reference.mjs")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node t1-reference.mjs: %v\n%s", err, stderr.String())
	}
	var got struct {
		IDs     [][]int  `json:"ids"`
		Decoded []string `json:"decoded"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.IDs) != len(texts) || len(got.Decoded) != len(ids) {
		t.Fatalf("the library answered %d encodings and %d decodings, want %d and %d", len(got.IDs), len(got.Decoded), len(texts), len(ids))
	}
	bad := 0
	for i, s := range texts {
		if !slices.Equal(got.IDs[i], ids[i]) {
			if bad++; bad <= 5 {
				t.Errorf("%q: the library encodes %v, t1 %v", short(s), got.IDs[i], ids[i])
			}
		}
	}
	for i, list := range ids {
		want, _ := tok.Decode(list)
		if got.Decoded[i] != want {
			if bad++; bad <= 10 {
				t.Errorf("%v: the library decodes %q, t1 %q", list, got.Decoded[i], want)
			}
		}
	}
}

// short is s cut for an error message.
func short(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// hfLoaded is the default tokenizer and its Hugging Face files read back
// through package tokenizer, as any Hugging Face model's are read.
func hfLoaded(tb testing.TB) (*Tokenizer, *tokenizer.HF) {
	tb.Helper()
	tok, err := DefaultTokenizer()
	if err != nil {
		tb.Fatal(err)
	}
	files, err := tok.HFFiles()
	if err != nil {
		tb.Fatal(err)
	}
	h, err := tokenizer.ParseHF(files[TokenizerFile])
	if err != nil {
		tb.Fatal(err)
	}
	return tok, h
}

// agreeOn checks that h encodes s as tok does, with and without special
// tokens, and decodes it back.
func agreeOn(tb testing.TB, tok *Tokenizer, h *tokenizer.HF, s string) {
	tb.Helper()
	if a, b := tok.Encode(s), h.Encode(s); !slices.Equal(a, b) {
		tb.Fatalf("%q: Encode %v, want %v", s, b, a)
	}
	if a, b := tok.EncodeOrdinary(s), h.EncodeOrdinary(s); !slices.Equal(a, b) {
		tb.Fatalf("%q: EncodeOrdinary %v, want %v", s, b, a)
	}
	if d, err := h.Decode(h.Encode(s)); err != nil || d != s {
		tb.Fatalf("%q decodes to %q (%v)", s, d, err)
	}
}

// TestHFLoaderAgrees reads the Hugging Face files through package
// tokenizer and checks the result tokenises exactly as the Tokenizer it
// was written from.
func TestHFLoaderAgrees(t *testing.T) {
	tok, h := hfLoaded(t)
	if h.VocabSize() != tok.VocabSize() || !slices.Equal(h.AddedTokens(), tok.AddedTokens()) {
		t.Fatalf("vocab %d, added %q; want %d, %q", h.VocabSize(), h.AddedTokens(), tok.VocabSize(), tok.AddedTokens())
	}
	for id := range tok.VocabSize() {
		a, _ := tok.TokenBytes(id)
		b, err := h.TokenBytes(id)
		if err != nil || !bytes.Equal(a, b) || h.IsSpecial(id) != tok.IsSpecial(id) {
			t.Fatalf("id %d: %q special %v, want %q special %v (%v)", id, b, h.IsSpecial(id), a, tok.IsSpecial(id), err)
		}
	}
	for _, s := range tok.Specials() {
		a, _ := tok.SpecialID(s)
		if b, ok := h.SpecialID(s); !ok || a != b {
			t.Fatalf("%s: id %d, want %d", s, b, a)
		}
	}
	for _, s := range hfCases() {
		agreeOn(t, tok, h, s)
	}
	for _, s := range randomTexts(3000) {
		agreeOn(t, tok, h, s)
	}
}

// FuzzHFLoaderAgrees is TestHFLoaderAgrees on any valid UTF-8 text (the
// loader, like the library, reads invalid UTF-8 with U+FFFD).
func FuzzHFLoaderAgrees(f *testing.F) {
	tok, h := hfLoaded(f)
	for _, s := range hfCases()[1:40] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if utf8.ValidString(s) {
			agreeOn(t, tok, h, s)
		}
	})
}

// TestHFFilesLoadAsOwn: the files HFFiles writes load back as the
// Tokenizer itself, as the private format does and still does; edited
// files load as the Hugging Face tokenizer they describe.
func TestHFFilesLoadAsOwn(t *testing.T) {
	tok, err := DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	files, err := tok.HFFiles()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadTokenizer(files)
	if err != nil {
		t.Fatal(err)
	}
	own, ok := got.(*Tokenizer)
	if !ok {
		t.Fatalf("read as %T, want *Tokenizer", got)
	}
	if !slices.Equal(own.merges, tok.merges) || !slices.Equal(own.specials, tok.specials) {
		t.Fatal("read back with other merges or specials")
	}
	again, err := TokenizerFilesOf(own)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if !bytes.Equal(again[name], b) {
			t.Fatalf("%s changes on a second save", name)
		}
	}
	old, _ := json.Marshal(tok)
	if got, err := ReadTokenizer(map[string][]byte{TokenizerFile: old}); err != nil {
		t.Fatal(err)
	} else if _, ok := got.(*Tokenizer); !ok {
		t.Fatalf("the private format reads as %T", got)
	}
	edit := func(name, from, to string) map[string][]byte {
		out := map[string][]byte{}
		for k, v := range files {
			out[k] = v
		}
		out[name] = bytes.Replace(out[name], []byte(from), []byte(to), 1)
		if bytes.Equal(out[name], files[name]) {
			t.Fatalf("%s has no %q", name, from)
		}
		return out
	}
	for what, f := range map[string]map[string][]byte{
		"another template": edit(TokenizerConfigFile, `{% endfor %}`, `{{ '\n' }}{% endfor %}`),
		"another eos":      edit(TokenizerConfigFile, `"eos_token": "<|end|>"`, `"eos_token": "<|pad|>"`),
		"bare tokenizer":   {TokenizerFile: files[TokenizerFile]},
	} {
		got, err := ReadTokenizer(f)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if _, ok := got.(*HFTokenizer); !ok {
			t.Fatalf("%s: read as %T, want *HFTokenizer", what, got)
		}
		if !slices.Equal(got.Encode(corpus), tok.Encode(corpus)) {
			t.Fatalf("%s: other ids", what)
		}
	}
}

// TestHFFilesRefuseDuplicateText: merges that spell one text twice have no
// Hugging Face vocabulary; such a tokenizer saves in the private format.
func TestHFFilesRefuseDuplicateText(t *testing.T) {
	// "abc" as (a,bc) and as (ab,c).
	tok, err := NewTokenizer(DefaultSpecials, [][2]int{{'b', 'c'}, {'a', 'b'}, {'a', 262}, {263, 'c'}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tok.HFFiles(); err == nil || !strings.Contains(err.Error(), "both decode to") {
		t.Fatalf("err %v", err)
	}
	files, err := TokenizerFilesOf(tok)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || !ownFormat(files[TokenizerFile]) {
		t.Fatalf("saved as %d files", len(files))
	}
}

// BenchmarkReadTokenizer is the cost of reading the tokenizer a checkpoint
// holds: the private format, and the Hugging Face files, which are parsed,
// rebuilt and compared with what t1 writes (tokenizerFromHF) to load as
// *Tokenizer.
func BenchmarkReadTokenizer(b *testing.B) {
	tok, err := DefaultTokenizer()
	if err != nil {
		b.Fatal(err)
	}
	old, _ := json.Marshal(tok)
	files, err := tok.HFFiles()
	if err != nil {
		b.Fatal(err)
	}
	for name, f := range map[string]map[string][]byte{"private": {TokenizerFile: old}, "hf": files} {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				if _, err := ReadTokenizer(f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeHF compares Encode of the corpus by t1's Tokenizer and by
// the Hugging Face loader reading its files.
func BenchmarkEncodeHF(b *testing.B) {
	tok, h := hfLoaded(b)
	for name, enc := range map[string]tokenizer.Tokenizer{"moe": tok, "hf": h} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(corpus)))
			for range b.N {
				enc.Encode(corpus)
			}
		})
	}
}
