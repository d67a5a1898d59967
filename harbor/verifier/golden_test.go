package verifier

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestGoldenReports pins the report (as JSON, the shape stored with each
// reward) for each sample verifier output.
func TestGoldenReports(t *testing.T) {
	cases := map[string]struct {
		files Files
		exit  int
	}{
		"ctrf":        {Files{CTRFFile: read(t, "ctrf-word-freq.json"), RewardTxtFile: []byte("0\n")}, 1},
		"junit-mixed": {Files{JUnitFile: read(t, "junit-mixed.xml")}, 1},
		"reward-json": {Files{CTRFFile: []byte("{"), RewardJSONFile: []byte(`{"reward": 1, "accuracy": 0.9}`)}, 0},
		"exit-code":   {Files{}, 137},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := json.MarshalIndent(Build(c.files, c.exit), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			p := filepath.Join("testdata", "golden", name+".report.json")
			if *update {
				os.MkdirAll(filepath.Dir(p), 0o755)
				must(t, os.WriteFile(p, got, 0o644))
			}
			want, err := os.ReadFile(p)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("report differs from %s:\n%s", p, got)
			}
		})
	}
}
