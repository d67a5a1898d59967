package harbor

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", "golden", name)
	if *update {
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, got, 0o644))
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the golden file:\n%s", name, got)
	}
}

// TestGoldenCanonicalConfig pins the canonical layout of an edited
// task.toml and of a built one.
func TestGoldenCanonicalConfig(t *testing.T) {
	for _, name := range samples {
		task := sample(t, name)
		task.Config.Metadata.Tags = append(task.Config.Metadata.Tags, "edited")
		out, err := task.Config.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		golden(t, name+".edited.toml", out)
	}
	out, err := buildSample(t).Config.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "csv-dedupe.built.toml", out)
}
