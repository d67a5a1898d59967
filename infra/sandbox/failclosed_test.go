package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/t1pipe/t1/infra/sandbox"
)

// The attack: on a host without a working bubblewrap, a policy's command
// reads a root-only host file. auto used to fall back to the process
// backend with a warning and run it; now no backend is chosen without
// isolation unless that was asked for, and the error says what to install.
func TestNoFallbackToUnisolated(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir()) // no bwrap to be found
	for _, name := range []string{"auto", "bwrap", ""} {
		be, err := sandbox.ByName(name, false)
		if err == nil {
			sb, err := be.Start(context.Background(), sandbox.Spec{})
			if err == nil {
				res, _ := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"cat", secret}})
				sb.Close()
				t.Fatalf("backend %q ran a command without bubblewrap: %q", name, res.Stdout)
			}
			t.Fatalf("backend %q chosen without bubblewrap", name)
		}
		if !strings.Contains(err.Error(), "install bubblewrap") {
			t.Errorf("backend %q: the error does not say what to install: %v", name, err)
		}
	}
	if _, err := sandbox.ByName("process", false); !errors.Is(err, sandbox.ErrUnisolated) || !strings.Contains(err.Error(), "allow_unisolated") {
		t.Errorf("process without the allow option: %v", err)
	}
	if be, err := sandbox.ByName("process", true); err != nil || be.Name() != "process" {
		t.Errorf("process with the allow option: %v, %v", be, err)
	}
}
