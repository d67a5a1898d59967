package trial

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/internal/testinfra"
)

// BenchmarkVerifyOffline is one verifier run of the uvx-ctrf task (a fresh
// sandbox, the tests uploaded, test.sh) on its stand-ins for apt-get,
// curl | sh, uvx and pytest-json-ctrf, against the same tests run by a
// test.sh that calls the local pytest directly.
func BenchmarkVerifyOffline(b *testing.B) {
	be := testinfra.Bubblewrap(b)
	// The embedded S3 gateway moves the working directory.
	src := filepath.Join(testinfra.WorkDir(), "testdata", "tb", "uvx-ctrf")
	local := filepath.Join(b.TempDir(), "uvx-ctrf")
	if out, err := exec.Command("cp", "-r", src, local).CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(local, "tests", "test.sh"), []byte("#!/bin/bash\npython3 -I -m pytest -p no:cacheprovider --junitxml=/logs/verifier/junit.xml /tests/test_outputs.py -rA\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name, dir string
		mode      Offline
	}{{"stand-ins", src, OfflineAuto}, {"local-pytest", local, OfflineNever}} {
		b.Run(c.name, func(b *testing.B) {
			dir := c.dir
			tk, err := harbor.Load(dir)
			if err != nil {
				b.Fatal(err)
			}
			opt := Options{Backend: be, Offline: c.mode}
			for i := 0; i < b.N; i++ {
				rep, _, offline, err := VerifyLayer(context.Background(), nil, dir, tk, opt)
				if err != nil || rep.Total != 3 || offline != (c.mode == OfflineAuto) {
					b.Fatalf("%v %+v", err, rep)
				}
			}
		})
	}
}
