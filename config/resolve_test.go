package config

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Flags win over the environment, which wins over the file; a setup is
// taken before either.
func TestResolve(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	err := os.WriteFile(path, []byte("run: {id: base}\ndata: from-file\nsetups:\n  - name: long\n    set: {run.id: base-long}\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("T1_CONFIG", "")
	t.Setenv("T1_DATA", "from-env")
	cfg, level, err := Resolve(Overrides{Path: path, Setup: "long", LogLevel: "debug", AllowUnisolated: true})
	if err != nil || cfg.Run.ID != "base-long" || cfg.Data != "from-env" || level != slog.LevelDebug || !cfg.Sandbox.AllowUnisolated {
		t.Fatalf("%v: %+v %v", err, cfg.Run, level)
	}
	if cfg, _, _ = Resolve(Overrides{Path: path, Data: "from-flag"}); cfg.Data != "from-flag" {
		t.Fatalf("data %q", cfg.Data)
	}
	if _, _, err := Resolve(Overrides{Path: path, Setup: "short"}); err == nil || !strings.Contains(err.Error(), path+": ") {
		t.Fatalf("unknown setup: %v", err)
	}
	if _, _, err := Resolve(Overrides{Path: path, LogLevel: "loud"}); err == nil {
		t.Fatal("log level loud accepted")
	}
}
