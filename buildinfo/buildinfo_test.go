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

func TestInfo(t *testing.T) {
	var b strings.Builder
	Info{Go: "go1.26", Version: "v1"}.WriteText(&b)
	if b.String() != "t1 v1 (go1.26)\n" {
		t.Fatalf("%q", b.String())
	}
	if i := Of("v2"); i.Version != "v2" || i.Go != Go() {
		t.Fatalf("%+v", i)
	}
}
