package sandbox_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/infra/sandbox/sandboxtest"
)

// requireBwrap returns a working bubblewrap backend or skips the test with
// the reason. With T1_REQUIRE_BWRAP=1 (CI sets it once make setup has
// installed bubblewrap) a missing or broken bwrap fails instead.
func requireBwrap(t *testing.T) *sandbox.Bubblewrap {
	t.Helper()
	bw := &sandbox.Bubblewrap{}
	err := bw.Available()
	if err == nil {
		err = sandbox.Cgroups()
	}
	if err == nil {
		return bw
	}
	if os.Getenv("T1_REQUIRE_BWRAP") == "1" {
		t.Fatalf("T1_REQUIRE_BWRAP=1 but: %v", err)
	}
	if _, lookErr := exec.LookPath("bwrap"); lookErr != nil {
		t.Skipf("skipping the bubblewrap sandbox tests: bwrap is not installed (make setup installs it): %v", err)
	}
	t.Skipf("skipping the bubblewrap sandbox tests: bwrap is installed but cannot confine a sandbox here (user namespaces disabled or restricted, or no cgroup this process may create?): %v", err)
	return nil
}

func TestBubblewrapConformance(t *testing.T) {
	sandboxtest.Run(t, requireBwrap(t))
}

func TestPlainConformance(t *testing.T) {
	sandboxtest.Run(t, &sandbox.Plain{})
}

// TestHarborSampleTasks builds the repository's sample Harbor tasks (both
// environment kinds) in the isolated backend.
func TestHarborSampleTasks(t *testing.T) {
	t.Parallel()
	bw := requireBwrap(t)
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
