package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	if v := Version("v1.2.3"); v != "v1.2.3" {
		t.Fatalf("set version: %q", v)
	}
	if v := Version(""); v != "dev" && !strings.HasPrefix(v, "dev-") && !strings.HasPrefix(v, "v") {
		t.Fatalf("unset version: %q", v)
	}
	if g := Go(); g != runtime.Version() {
		t.Fatalf("go %q, want %q", g, runtime.Version())
	}
}
