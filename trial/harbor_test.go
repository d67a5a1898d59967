package trial

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/harbor"
)

// harborTasks is testdata/tb-harbor, absolute: taken before TestMain
// changes directory.
var harborTasks, _ = filepath.Abs(filepath.Join("testdata", "tb-harbor"))

// The tasks of trial/testdata/tb-harbor that run on the host's system
// directories, each failing on a verifier that differed from Harbor's
// (tests run from /tests; PYTHONSAFEPATH inherited by the tests'
// subprocesses; ptrace refused; a test.sh that stops before its tests
// leaving no reason): the oracle passes every test, no solution passes
// none, and verifier-crash's no-op report says why it has no result.
// workspace-dir, service and users need an image (image's TestHarborSemanticsOnImages).
func TestHarborSemantics(t *testing.T) {
	if testing.Short() {
		t.Skip("eight verifier runs of Terminal-Bench test.sh files: not in -short")
	}
	be := backend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, name := range []string{"workdir-relative", "sibling-import", "traceme", "verifier-crash"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(harborTasks, name)
			task, err := harbor.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			opt := Options{Backend: be}
			oracle, err := Run(ctx, dir, task, Oracle(dir), opt)
			if err != nil {
				t.Fatal(err)
			}
			if r := oracle.Report; !r.Solved || r.Passed != r.Total || r.Total == 0 {
				t.Errorf("oracle: %d/%d %v %+v\n%s", r.Passed, r.Total, r.Problems, r.Assertions, oracle.SolutionOutput)
			}
			noop, err := Run(ctx, dir, task, nil, opt)
			if err != nil {
				t.Fatal(err)
			}
			if r := noop.Report; r.Solved || r.Passed != 0 {
				t.Errorf("no solution: %d/%d solved %t", r.Passed, r.Total, r.Solved)
			}
			if name == "verifier-crash" {
				r := noop.Report
				if p := strings.Join(r.Problems, "\n"); r.Total != 0 || !strings.Contains(p, "test.sh exited 127 without writing results") || !strings.Contains(p, "/app/build.sh: No such file or directory") ||
					!strings.Contains(r.Output, "/app/build.sh") {
					t.Errorf("no reason for the verifier's missing result: problems %q, output %q", r.Problems, r.Output)
				}
			}
		})
	}
}
