package sandbox_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os/exec"
	"path/filepath"
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

// TestHarborSampleTasks builds the repository's sample Harbor tasks (both
// environment kinds) in the isolated backend.
func TestHarborSampleTasks(t *testing.T) {
	bw := &sandbox.Bubblewrap{}
	if err := bw.Available(); err != nil {
		t.Skipf("bubblewrap unavailable: %v", err)
	}
	tasks, _ := filepath.Glob("../../harbor/testdata/tasks/*/environment")
	if len(tasks) == 0 {
		t.Skip("no sample tasks in harbor/testdata/tasks")
	}
	for _, env := range tasks {
		dir := filepath.Dir(env)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			sb := sandboxtest.Start(t, bw, sandbox.Spec{TaskDir: dir})
			r, err := sb.Exec(context.Background(), sandbox.Cmd{Script: "find /app -mindepth 1 | head -1"})
			if err != nil || r.ExitCode != 0 || r.Stdout == "" {
				t.Errorf("built /app is empty or unreadable: %+v %v", r, err)
			}
			var layer bytes.Buffer
			if err := sb.Snapshot(context.Background(), &layer); err != nil {
				t.Fatal(err)
			}
			if n := tarEntries(t, layer.Bytes()); n != 0 {
				t.Errorf("a fresh sandbox's snapshot has %d entries, want none", n)
			}
		})
	}
}

func tarEntries(t *testing.T, b []byte) int {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	n := 0
	for {
		if _, err := tr.Next(); err == io.EOF {
			return n
		} else if err != nil {
			t.Fatal(err)
		}
		n++
	}
}
