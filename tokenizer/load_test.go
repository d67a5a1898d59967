package tokenizer

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// tiny is a minimal byte-level BPE tokenizer.json: the 256 byte symbols,
// the merges "h e" and "he llo"-style chains, and one special token.
func tiny(t testing.TB, edit func(top, model map[string]any)) []byte {
	t.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	vocab["he"], vocab["ll"], vocab["hell"] = 256, 257, 258
	model := map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
		"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
		"vocab": vocab, "merges": []any{[]string{"h", "e"}, "l l", []string{"he", "ll"}}}
	bl := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true}
	top := map[string]any{"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens": []any{map[string]any{"id": 259, "content": "<|end|>", "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true}},
		"normalizer": map[string]any{"type": "NFC"}, "pre_tokenizer": bl, "post_processor": bl, "decoder": bl, "model": model}
	if edit != nil {
		edit(top, model)
	}
	b, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTinyEncodes(t *testing.T) {
	h, err := ParseHF(tiny(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.Encode("hello<|end|>"), []int{258, 'o', 259}; !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	if h.VocabSize() != 260 {
		t.Errorf("VocabSize %d", h.VocabSize())
	}
}

// Each feature t1 does not implement exactly is refused, by name.
func TestRefusesUnsupported(t *testing.T) {
	for _, c := range []struct {
		name, want string
		edit       func(top, model map[string]any)
	}{
		{"unigram", `type "Unigram"`, func(_, m map[string]any) { m["type"] = "Unigram" }},
		{"dropout", "dropout", func(_, m map[string]any) { m["dropout"] = 0.1 }},
		{"byte fallback", "byte_fallback", func(_, m map[string]any) { m["byte_fallback"] = true }},
		{"subword prefix", "continuing_subword_prefix", func(_, m map[string]any) { m["continuing_subword_prefix"] = "##" }},
		{"unknown model field", "field extra", func(_, m map[string]any) { m["extra"] = 1 }},
		{"unknown top field", "field extra", func(top, _ map[string]any) { top["extra"] = 1 }},
		{"truncation", "truncation", func(top, _ map[string]any) { top["truncation"] = map[string]any{"max_length": 8} }},
		{"padding", "padding", func(top, _ map[string]any) { top["padding"] = map[string]any{} }},
		{"nfkc", `type "NFKC"`, func(top, _ map[string]any) { top["normalizer"] = map[string]any{"type": "NFKC"} }},
		{"metaspace", `type "Metaspace"`, func(top, _ map[string]any) { top["pre_tokenizer"] = map[string]any{"type": "Metaspace"} }},
		{"prefix space", "add_prefix_space", func(top, _ map[string]any) {
			top["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "add_prefix_space": true}
		}},
		{"unknown regex", "Split pattern", func(top, _ map[string]any) {
			top["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\w+`}, "behavior": "Isolated", "invert": false},
				map[string]any{"type": "ByteLevel", "use_regex": false}}}
		}},
		{"split behaviour", "behavior", func(top, _ map[string]any) {
			top["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`}, "behavior": "Removed", "invert": false},
				map[string]any{"type": "ByteLevel", "use_regex": false}}}
		}},
		{"template", `type "TemplateProcessing"`, func(top, _ map[string]any) {
			top["post_processor"] = map[string]any{"type": "TemplateProcessing"}
		}},
		{"wordpiece decoder", `type "WordPiece"`, func(top, _ map[string]any) { top["decoder"] = map[string]any{"type": "WordPiece"} }},
		{"lstrip", "lstrip", func(top, _ map[string]any) {
			top["added_tokens"] = []any{map[string]any{"id": 259, "content": "<mask>", "lstrip": true}}
		}},
		{"missing byte", "byte 0x41", func(_, m map[string]any) { delete(m["vocab"].(map[string]int), "A") }},
		{"merge out of vocabulary", `merged token "lle"`, func(_, m map[string]any) { m["merges"] = []any{"ll e"} }},
		{"bad merge", "two tokens", func(_, m map[string]any) { m["merges"] = []any{"a b c"} }},
		{"added id taken", "belongs to another token", func(top, _ map[string]any) {
			top["added_tokens"] = []any{map[string]any{"id": 65, "content": "<|x|>"}}
		}},
	} {
		_, err := ParseHF(tiny(t, c.edit))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.name, err, c.want)
		}
	}
}

func TestIllFormedUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"a\xe2\x82b":           "a\ufffdb",
		"\xed\xa0\x80":         "\ufffd\ufffd\ufffd",
		"\xf0\x9f\x98":         "\ufffd",
		"\xc0\xaf":             "\ufffd\ufffd",
		"\xf4\x90\x80\x80\xff": "\ufffd\ufffd\ufffd\ufffd\ufffd",
		"ok":                   "ok",
	} {
		if got := validUTF8(in); got != want {
			t.Errorf("validUTF8(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParseHF holds the tokenizer.json reader to refusing, never
// panicking on, whatever bytes a model directory holds.
func FuzzParseHF(f *testing.F) {
	good := tiny(f, nil)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":1},"merges":[["a","a"]]}}`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":[],"merges":{}}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHF(b)
		if err == nil {
			h.Decode(h.Encode("hello<|end|> wörld"))
		}
	})
}

// A large tokenizer.json parsed again is the tokenizer parsed before; one
// that differs by a byte is parsed anew.
func TestParseHFRemembersLargeFiles(t *testing.T) {
	raw, err := fixture()
	if err != nil {
		t.Skipf("Qwen3's tokenizer.json: %v", err)
	}
	a, err := ParseHF(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseHF(bytes.Clone(raw))
	if err != nil || b != a {
		t.Fatalf("the same file parsed again: %p, %v; first %p", b, err, a)
	}
	edited := bytes.Replace(raw, []byte(`"<|im_start|>"`), []byte(`"<|im_begin|>"`), 1)
	if bytes.Equal(edited, raw) {
		t.Fatal("the edit changed nothing")
	}
	c, err := ParseHF(edited)
	if err != nil || c == a {
		t.Fatalf("an edited file: %p, %v; first %p", c, err, a)
	}
	if _, ok := c.SpecialID("<|im_begin|>"); !ok {
		t.Fatal("the edited file's token is missing")
	}
}
