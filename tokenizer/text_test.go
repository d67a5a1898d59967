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
