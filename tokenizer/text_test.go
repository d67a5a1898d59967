package tokenizer

import (
	"bytes"
	"slices"
	"testing"
)

func TestParseIDs(t *testing.T) {
	ids, err := ParseIDs("[1, 2,3]\n 40\t5")
	if err != nil || !slices.Equal(ids, []int{1, 2, 3, 40, 5}) {
		t.Fatalf("%v %v", ids, err)
	}
	if _, err := ParseIDs("1 x"); err == nil || err.Error() != `decode: "x" is not a token id` {
		t.Fatalf("bad id: %v", err)
	}
}

func TestWriteTokens(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTokens(&b, []int{7, 12}, []string{"a", " \n"}); err != nil {
		t.Fatal(err)
	}
	if want := "#  ID  PIECE\n0  7   \"a\"\n1  12  \" \\n\"\n"; b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}

// bytesTok stands each byte for its own id.
type bytesTok struct{ Tokenizer }

func (bytesTok) Encode(text string) []int {
	ids := make([]int, len(text))
	for i := range len(text) {
		ids[i] = int(text[i])
	}
	return ids
}

func (bytesTok) TokenBytes(id int) ([]byte, error) { return []byte{byte(id)}, nil }

func (t bytesTok) Decode(ids []int) (string, error) {
	var b []byte
	for _, id := range ids {
		b = append(b, byte(id))
	}
	return string(b), nil
}

func TestTokenizeDecode(t *testing.T) {
	toks, err := Tokenize(bytesTok{}, "", "hé")
	if err != nil || !slices.Equal(toks.IDs, []int{'h', 0xc3, 0xa9}) || toks.Pieces[1] != "\xc3" {
		t.Fatalf("%+v %v", toks, err)
	}
	d, err := Decode(bytesTok{}, toks.IDs[:2])
	if err != nil || d.Text != "h\xc3" || d.UTF8 {
		t.Fatalf("%+v %v", d, err)
	}
	var b bytes.Buffer
	if err := d.WriteText(&b); err != nil || b.String() != "h\xc3" {
		t.Fatalf("%q %v", b.String(), err)
	}
}
