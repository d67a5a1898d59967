package config

import (
	"os"
	"path/filepath"
	"testing"
)

// Every example configuration parses, validates and builds each of its
// variants: a file the README or BENCHMARKS tells one to run must run.
func TestExamplesParse(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples (%v)", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Parse(f, data)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for _, n := range c.VariantNames() {
			if _, err := c.Variant(n); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
}
