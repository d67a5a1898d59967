package sandbox_test

import (
	"os/exec"
	"testing"

	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/infra/sandbox/sandboxtest"
)

func TestBubblewrapConformance(t *testing.T) {
	bw := &sandbox.Bubblewrap{}
	if err := bw.Available(); err != nil {
		if _, lookErr := exec.LookPath("bwrap"); lookErr != nil {
			t.Skipf("bubblewrap is not installed (make setup installs it): %v", err)
		}
		t.Fatalf("bwrap is installed but cannot build a sandbox here: %v", err)
	}
	sandboxtest.Run(t, bw)
}

func TestPlainConformance(t *testing.T) {
	sandboxtest.Run(t, &sandbox.Plain{})
}
