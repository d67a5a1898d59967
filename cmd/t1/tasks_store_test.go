package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/keys"
)

func TestTasksImportExport(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	cfg := writeConfig(t, "run: {id: imp}\n")
	out, err := t1(t, "tasks", "import", "--data", data, "--config", cfg, "../../harbor/testdata/tasks")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, keys.Bundle("imp", "t1--log-rotate")) {
		t.Fatalf("%s", out)
	}
	dest := filepath.Join(t.TempDir(), "out")
	out, err = t1(t, "tasks", "export", "--data", data, "--config", cfg, "--out", dest)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, name := range []string{"disk-report", "t1--log-rotate", "word-freq"} {
		back, err := harbor.Load(filepath.Join(dest, name))
		if err != nil {
			t.Fatal(err)
		}
		orig, _ := harbor.Load(filepath.Join("../../harbor/testdata/tasks", strings.TrimPrefix(name, "t1--")))
		h1, _ := back.Hash()
		h2, _ := orig.Hash()
		if h1 != h2 || h1 == "" {
			t.Fatalf("%s changed in an import/export round trip", name)
		}
	}
	if _, err := t1(t, "tasks", "import", "--data", data, "--config", cfg, "../../harbor/testdata/hostile/bad-toml"); err == nil {
		t.Fatal("a bad task was imported")
	}
}
