package moe

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestDefaultTokenizer(t *testing.T) {
	tok, err := DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != DefaultConfig().Vocab {
		t.Fatalf("vocab %d, want %d", tok.VocabSize(), DefaultConfig().Vocab)
	}
	// Training is deterministic.
	again, err := TrainTokenizer(Corpus(), DefaultConfig().Vocab, DefaultSpecials)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(tok)
	b, _ := json.Marshal(again)
	if string(a) != string(b) {
		t.Fatal("two trainings on the same corpus differ")
	}
	// It compresses the text it was trained on.
	ids := tok.Encode(Corpus())
	if r := float64(len(Corpus())) / float64(len(ids)); r < 2 {
		t.Errorf("%.2f bytes per token on the training corpus", r)
	}
}

func TestTokenizerSpecialsAreAtomic(t *testing.T) {
	tok, err := DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	user, _ := tok.SpecialID(TokUser)
	end, _ := tok.SpecialID(TokEnd)
	ids := tok.Encode("<|user|>ls -la<|end|><|nope|>")
	if ids[0] != user || !slices.Contains(ids, end) {
		t.Fatalf("specials not recognised: %v", ids)
	}
	if !tok.IsSpecial(user) || tok.IsSpecial(int('a')) {
		t.Fatal("IsSpecial")
	}
	// "<|nope|>" is not special: it is plain bytes.
	for _, id := range ids[slices.Index(ids, end)+1:] {
		if tok.IsSpecial(id) {
			t.Fatalf("unknown <|nope|> produced special %d", id)
		}
	}
}

func TestTokenizerRoundTrip(t *testing.T) {
	tok, err := DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "a", " ", "  x", "hello, world\n", "\xff\xfe\x00<|end", "<|end|><|end|>", "日本語 テキスト", "tab\there\r\n", Corpus()} {
		got, err := tok.Decode(tok.Encode(s))
		if err != nil || got != s {
			t.Errorf("round trip of %q gave %q, %v", s, got, err)
		}
	}
	if _, err := tok.Decode([]int{tok.VocabSize()}); err == nil {
		t.Error("out-of-range id decoded")
	}
}

// TestNonCanonicalTokenisation: a sampler may emit ids that decode to text
// whose encoding is different (shorter) ids; the text still round-trips.
func TestNonCanonicalTokenisation(t *testing.T) {
	tok, err := DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	canon := tok.Encode(" the")
	if len(canon) != 1 {
		t.Fatalf("\" the\" is %d tokens; the test wants one merged token", len(canon))
	}
	bytewise := []int{' ', 't', 'h', 'e'}
	text, err := tok.Decode(bytewise)
	if err != nil || text != " the" {
		t.Fatalf("decode %v = %q, %v", bytewise, text, err)
	}
	if re := tok.Encode(text); slices.Equal(re, bytewise) || !slices.Equal(re, canon) {
		t.Fatalf("re-encoding gave %v; want the canonical %v, not %v", re, canon, bytewise)
	}
}

func TestTokenizerJSON(t *testing.T) {
	tok, err := TrainTokenizer("aaab aab ab ab abc abc", 270, []string{"<|end|>"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(tok)
	if err != nil {
		t.Fatal(err)
	}
	var back Tokenizer
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Encode("ab abc aab"), tok.Encode("ab abc aab")) || back.VocabSize() != tok.VocabSize() {
		t.Fatal("tokenizer changed through JSON")
	}
	for _, bad := range []string{
		`{"type":"other","specials":[],"merges":[]}`,
		`{"type":"t1-byte-bpe-v1","merges":[]}`,
		`{"type":"t1-byte-bpe-v1","specials":["plain"],"merges":[]}`,
		`{"type":"t1-byte-bpe-v1","specials":[],"merges":[[300,1]]}`,
		`{"type":"t1-byte-bpe-v1","specials":[],"merges":[[1,2],[1,2]]}`,
		`{"type":"t1-byte-bpe-v1","specials":["<|a|>"],"merges":[[256,2]]}`,
		`not json`,
	} {
		var x Tokenizer
		if err := json.Unmarshal([]byte(bad), &x); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if _, err := TrainTokenizer("x", 100, nil); err == nil || !strings.Contains(err.Error(), "vocab size") {
		t.Errorf("vocab below 256: %v", err)
	}
}

func TestTrainTieBreak(t *testing.T) {
	// "ab" and "cd" occur equally often: the pair with the smaller left id
	// ('a' < 'c') merges first.
	tok, err := TrainTokenizer("cd\nab\ncd\nab", 258, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.merges[0]; got != [2]int{'a', 'b'} {
		t.Fatalf("first merge %v, want (a,b)", got)
	}
}

func FuzzTokenizerRoundTrip(f *testing.F) {
	tok, err := DefaultTokenizer()
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"", "<|user|>hi<|end|>", "\x80\xff", "git status && ls", "<|", "|>", "a  b\n\n c"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ids := tok.Encode(string(b))
		got, err := tok.Decode(ids)
		if err != nil || got != string(b) {
			t.Fatalf("round trip of %q gave %q, %v", b, got, err)
		}
		for _, id := range ids {
			if id < 0 || id >= tok.VocabSize() {
				t.Fatalf("id %d out of range", id)
			}
		}
		ord := tok.EncodeOrdinary(string(b))
		if got, _ := tok.Decode(ord); got != string(b) || slices.ContainsFunc(ord, tok.IsSpecial) {
			t.Fatalf("ordinary encoding of %q: %v", b, ord)
		}
		// Decoding any ids and re-encoding round-trips the text.
		for i := 0; i+1 < len(b); i += 2 {
			ids = append(ids, (int(b[i])<<8|int(b[i+1]))%tok.VocabSize())
		}
		text, err := tok.Decode(ids)
		if err != nil {
			t.Fatal(err)
		}
		if back, _ := tok.Decode(tok.Encode(text)); back != text {
			t.Fatalf("text %q did not round-trip", text)
		}
	})
}
