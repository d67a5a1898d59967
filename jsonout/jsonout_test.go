package jsonout

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestWideIntegersAreStringsAndTextIsUnescaped(t *testing.T) {
	v := struct {
		Seed    uint64         `json:"seed"`
		Small   int64          `json:"small"`
		Neg     int64          `json:"neg"`
		Edge    int64          `json:"edge"`
		Ratio   float64        `json:"ratio"`
		Command string         `json:"command"`
		Nested  map[string]any `json:"nested"`
	}{18446744073709551615, 42, -9007199254740993, 9007199254740992, 1.5e300, `echo "<command>" & 12345678901234567890`,
		map[string]any{"ids": []int64{1, 9007199254740993}}}
	b, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"seed":"18446744073709551615","small":42,"neg":"-9007199254740993","edge":9007199254740992,"ratio":1.5e+300,` +
		`"command":"echo \"<command>\" & 12345678901234567890","nested":{"ids":[1,"9007199254740993"]}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var buf bytes.Buffer
	if err := Write(&buf, v); err != nil || !json.Valid(buf.Bytes()) || !strings.Contains(buf.String(), "\n  \"seed\": \"18446744073709551615\",") {
		t.Fatalf("%v\n%s", err, buf.String())
	}
}

// FuzzQuoteWide: whatever JSON goes in, valid JSON with the same strings
// comes out.
func FuzzQuoteWide(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[9007199254740993,-1e5,"x\"9007199254740993"]`, `{"k":-99999999999999999999}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		out := QuoteWide([]byte(s))
		if !json.Valid(out) {
			t.Fatalf("%s became invalid: %s", s, out)
		}
	})
}
