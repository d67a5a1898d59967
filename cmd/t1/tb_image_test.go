package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/t1pipe/t1/image"
	"github.com/t1pipe/t1/trial"
)

// imageConfig is a configuration that runs every sandbox on the image of
// its task's Dockerfile, with the layer cache the image package's tests
// share on this machine (image's testBase names it), so the Debian base
// and the tasks' layers are built once per machine.
func imageConfig(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds task images from the Debian mirror: not in -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("building images needs root (overlayfs, debootstrap)")
	}
	needBwrap(t)
	b, err := image.HostBase("")
	if err != nil {
		t.Skip(err)
	}
	h := sha256.Sum256([]byte(b.Mirror + "\x00" + b.Suite))
	cache := filepath.Join(os.TempDir(), "t1-image-base-"+hex.EncodeToString(h[:8]))
	return writeConfig(t, fmt.Sprintf("sandbox:\n  backend: bwrap\n  image: dockerfile\n  image_cache: %s\n", cache))
}

// In image mode the oracle replayed turn by turn through the harness
// (t1 rollout --policy oracle) gets the verdict tasks check's solve.sh
// run gets, on every Terminal-Bench shape, those only an image runs
// included (trial/testdata/tb-image: Debian packages installed by the
// Dockerfile, a tool the solution installs under /usr/local/bin).
func TestRolloutOracleAgreesWithTasksCheckOnImages(t *testing.T) {
	// Last in the package, when the Debian base it needs, built once per
	// machine for this package and image's, has had longest to be made.
	t.Parallel()
	cfg := imageConfig(t)
	seen := 0
	for _, d := range []string{tbTasks, "../../trial/testdata/tb-image"} {
		out, err := t1(t, "--config", cfg, "tasks", "check", "--json", d)
		var rs []trial.CheckResult
		if jerr := json.Unmarshal([]byte(out), &rs); jerr != nil {
			t.Fatalf("%s: %v %v\n%s", d, err, jerr, out)
		}
		for _, r := range rs {
			seen++
			ro, err := t1(t, "--config", cfg, "rollout", "--policy", "oracle", "--task", filepath.Join(d, r.Task))
			if err != nil {
				t.Fatalf("%s: %v\n%s", r.Task, err, ro)
			}
			want := fmt.Sprintf("passed %d/%d, solved %t", r.Passed, r.Total, r.Solved)
			if !strings.Contains(ro, want) || !strings.Contains(ro, "=== task_complete after") {
				t.Errorf("%s: tasks check says %q, the oracle rollout:\n%s", r.Task, want, ro)
			}
			// build-tool's image has no compiler: both fail it alike.
			if r.Task != "build-tool" && (!r.Solved || r.Total == 0) {
				t.Errorf("%s: tasks check on its image: %+v", r.Task, r)
			}
		}
	}
	if seen != 7 {
		t.Errorf("%d tasks checked, want 7", seen)
	}
}
