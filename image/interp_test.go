package image_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/image"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/trial"
)

// shadowPytest is a solution that leaves the task undone and plants an
// /app/pytest package whose __main__ writes a JUnit report of 40 passed
// tests where pytest was told to write its own.
const shadowPytest = `#!/bin/bash
mkdir -p /app/pytest
touch /app/pytest/__init__.py
cat > /app/pytest/__main__.py <<'PY'
import os, sys
path = "/logs/verifier/junit.xml"
for a in sys.orig_argv:
    if a.startswith("--junitxml="):
        path = a.split("=", 1)[1]
os.makedirs(os.path.dirname(path), exist_ok=True)
cases = "".join('<testcase classname="forged" name="test_%d"/>' % i for i in range(40))
with open(path, "w") as f:
    f.write('<testsuites><testsuite name="forged" tests="40">%s</testsuite></testsuites>' % cases)
PY
`

// On an image, a test.sh that runs pytest through the interpreter's full
// path from the work directory gets the verifier's guard too: the image's
// /usr/bin/python3 (the verifier layer's) is the guard for test.sh's
// command, so the agent's /app/pytest is not imported, and the honest
// solution still passes.
func TestVerifierInterpreterGuardOnImage(t *testing.T) {
	cache, base := image.MachineCache(t)
	be, err := sandbox.ByName("bwrap", false)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, content := range map[string]string{
		"task.toml":              "version = \"1.0\"\n\n[verifier]\ntimeout_sec = 300.0\n\n[agent]\ntimeout_sec = 300.0\n",
		"instruction.md":         "Write hello to /app/greeting.txt.\n",
		"environment/Dockerfile": "FROM debian:bookworm\n\nWORKDIR /app\n",
		"solution/solve.sh":      "#!/bin/bash\necho hello > /app/greeting.txt\n",
		"tests/test.sh":          "#!/bin/bash\napt-get update\napt-get install -y python3 python3-pytest\ncd /app && /usr/bin/python3 -m pytest -q -p no:cacheprovider --junitxml=/logs/verifier/junit.xml /tests/test_outputs.py\n",
		"tests/test_outputs.py":  "def test_greeting():\n    assert open('/app/greeting.txt').read().strip() == 'hello'\n\n\ndef test_runs():\n    assert True\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	task, err := harbor.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	opt := trial.Options{Backend: &image.Backend{Inner: be, Options: image.Options{CacheDir: cache, Base: base}}}
	ctx := context.Background()
	oracle, err := trial.Run(ctx, dir, task, trial.Oracle(dir), opt)
	if err != nil {
		t.Fatal(err)
	}
	if r := oracle.Report; !r.Solved || r.Passed != 2 || r.Total != 2 {
		t.Fatalf("oracle: passed %d/%d %v\n%s", r.Passed, r.Total, r.Problems, oracle.SolutionOutput)
	}
	forged, err := trial.Run(ctx, dir, task, &trial.Solution{Script: []byte(shadowPytest)}, opt)
	if err != nil {
		t.Fatal(err)
	}
	if r := forged.Report; r.Solved || r.Total != 2 || r.Passed > 1 {
		t.Errorf("verifier fooled by /app/pytest: solved %v, passed %d/%d (source %v) %v", r.Solved, r.Passed, r.Total, r.Source, r.Problems)
	}
}
