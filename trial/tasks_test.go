package trial

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
)

var tasksDir = filepath.Join("..", "harbor", "testdata", "tasks")

// A dataset root expands to its tasks; each validates to what it is, and a
// broken one to the file and field at fault.
func TestValidate(t *testing.T) {
	dirs := harbor.ExpandDirs([]string{filepath.Join(testinfra.WorkDir(), tasksDir)})
	if len(dirs) != 3 || filepath.Base(dirs[2]) != "word-freq" {
		t.Fatalf("expanded to %v", dirs)
	}
	c := Validate(dirs[2])
	if !c.OK || c.TestFunctions != 5 || c.TestFiles != 1 || !c.NeedsOffline || !strings.HasPrefix(c.ID, "task-") {
		t.Fatalf("%+v", c)
	}
	for dir, want := range map[string]string{"bad-difficulty": "[metadata] difficulty", "missing-test-sh": "tests/test.sh"} {
		c := Validate(filepath.Join(testinfra.WorkDir(), "..", "harbor", "testdata", "hostile", dir))
		if c.OK || !strings.Contains(c.Error, want) {
			t.Errorf("%s: %+v", dir, c)
		}
	}
}

// Each task's reference solution solves it, scored per assertion.
func TestCheck(t *testing.T) {
	t.Parallel()
	opt := Options{Backend: backend(t)}
	rf, err := verifier.NewRewardFunc(verifier.ModeCount, 1)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"word-freq", "disk-report"}
	rs := make([]CheckResult, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			rs[i] = Check(context.Background(), filepath.Join(testinfra.WorkDir(), tasksDir, name), opt, rf, true)
		})
	}
	wg.Wait()
	if !rs[0].Solved || rs[0].Total != 5 || rs[0].Reward != 5 || !rs[0].Offline || !rs[1].Solved || rs[1].Source != "reward.txt" || rs[0].NoOp == nil {
		t.Fatalf("%+v", rs)
	}
}

// Importing stores the bundle and a tasks row under a key-safe id, and
// importing again changes nothing.
func TestImport(t *testing.T) {
	st := testinfra.FreshStore(t)
	dir := filepath.Join(testinfra.WorkDir(), tasksDir, "log-rotate")
	first := Import(context.Background(), st, "imp", dir)
	if first.Error != "" || first.Task != "t1--log-rotate" || first.Bundle != keys.Bundle("imp", "t1--log-rotate") {
		t.Fatalf("%+v", first)
	}
	if again := Import(context.Background(), st, "imp", dir); again.Error != "" || again.Row.SHA256 != first.Row.SHA256 {
		t.Fatalf("a second import: %+v, first %+v", again, first)
	}
	if bad := Import(context.Background(), st, "imp", filepath.Join(testinfra.WorkDir(), "..", "harbor", "testdata", "hostile", "bad-toml")); bad.Error == "" {
		t.Fatal("a bad task was imported")
	}
}
