package routing

import (
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/layout.golden")

// goldenRecords are small fixed records whose encodings pin the byte
// layout: any change to the format shows up as a diff of the golden file.
func goldenRecords(t *testing.T) map[string]*Record {
	sets := map[string]struct {
		T, L, k, E int
		ids        [][]int
	}{
		"u8":  {3, 2, 3, 16, [][]int{{0, 5, 15}, {1, 2, 3}, {0, 5, 9}, {1, 2, 3}, {4, 5, 9}, {2, 3, 14}}},
		"u16": {2, 2, 2, 300, [][]int{{0, 299}, {7, 256}, {0, 298}, {7, 256}}},
	}
	out := map[string]*Record{}
	for name, s := range sets {
		r, err := NewRecord(s.T, s.L, s.k, s.E)
		if err != nil {
			t.Fatal(err)
		}
		for i, set := range s.ids {
			if err := r.Set(i/s.L, i%s.L, set); err != nil {
				t.Fatal(err)
			}
		}
		out[name] = r
	}
	return out
}

func TestGoldenLayout(t *testing.T) {
	var b strings.Builder
	recs := goldenRecords(t)
	for _, name := range []string{"u8", "u16"} {
		r := recs[name]
		fmt.Fprintf(&b, "# %s: %d tokens x %d layers x top-%d of %d experts\n", name, r.Tokens, r.Layers, r.TopK, r.Experts)
		fmt.Fprintf(&b, "ids %s\n", hex.EncodeToString(r.IDs))
		for _, enc := range []Encoding{Packed, PackedZstd, Rank, Delta} {
			e, err := Encode(nil, r, enc)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(e)
			if err != nil || !got.Equal(r) {
				t.Fatalf("%s %s: %v", name, enc, err)
			}
			fmt.Fprintf(&b, "%-12s %s\n", enc, hex.EncodeToString(e))
		}
	}
	path := filepath.Join("testdata", "layout.golden")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if b.String() != string(want) {
		t.Fatalf("encoding differs from %s (a format change needs a new FormatVersion):\n%s", path, b.String())
	}
}
