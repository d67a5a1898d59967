package config

import (
	"os"
	"path/filepath"
	"testing"
)

// Every example configuration parses and validates, and so does each of
// its variants, each of its setups and each setup's variants: a file or a
// setup the docs tell one to run must run.
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
		configs := []Config{c}
		for _, n := range c.SetupNames() {
			s, err := c.Setup(n)
			if err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			configs = append(configs, s)
		}
		for _, c := range configs {
			for _, n := range c.VariantNames() {
				if _, err := c.Variant(n); err != nil {
					t.Errorf("%s: %s: %v", f, c.Run.ID, err)
				}
			}
		}
	}
}
