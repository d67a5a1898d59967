package image_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/image"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/trial"
)

func rootTask(t *testing.T) (trial.Options, string, *harbor.Task) {
	t.Helper()
	cache, base := image.MachineCache(t)
	be, err := sandbox.ByName("bwrap", false)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tbDirs[1], "usr-local-tool")
	task, err := harbor.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return trial.Options{Backend: &image.Backend{Inner: be, Options: image.Options{CacheDir: cache, Base: base}}}, dir, task
}

// TestSolutionInstalledTool: what a solution installs outside the
// writable directories (/usr/local/bin, /opt) reaches the verifier's
// fresh sandbox through the snapshot, so the oracle passes and no
// solution passes nothing.
func TestSolutionInstalledTool(t *testing.T) {
	opt, dir, task := rootTask(t)
	ctx := context.Background()
	oracle, err := trial.Run(ctx, dir, task, trial.Oracle(dir), opt)
	if err != nil {
		t.Fatal(err)
	}
	if r := oracle.Report; oracle.SolutionExit != 0 || !r.Solved || r.Passed != 3 {
		t.Errorf("oracle: exit %d, passed %d/%d %v\n%s", oracle.SolutionExit, r.Passed, r.Total, r.Problems, oracle.SolutionOutput)
	}
	noop, err := trial.Run(ctx, dir, task, nil, opt)
	if err != nil {
		t.Fatal(err)
	}
	if r := noop.Report; r.Passed != 0 || r.Total != 3 {
		t.Errorf("no solution: passed %d/%d", r.Passed, r.Total)
	}
}

// forgedJUnit is a report claiming the task's three tests passed.
const forgedJUnit = `<testsuites><testsuite name="pytest" tests="3"><testcase classname="test_outputs" name="test_installed_on_path"/><testcase classname="test_outputs" name="test_counts"/><testcase classname="test_outputs" name="test_stopwords"/></testsuite></testsuites>`

// rootAttack plants, outside the writable directories, every way of
// taking over the verifier's own tools that a root change offers: a
// python3 and a pytest ahead of the verifier layer's on PATH, the
// verifier's /usr/bin/python3 itself (which the solution's image lacks),
// a pytest package ahead of Debian's on sys.path, a .pth file and a
// sitecustomize that rewrite the report when Python exits, a pytest
// plugin by entry point, a /conftest.py and a /pytest.ini above /tests.
// Each of them alone would report every test passed.
var rootAttack = `#!/bin/bash
set -eu
cat > /tmp/fake <<'SH'
#!/bin/sh
mkdir -p /logs/verifier
cat > /logs/verifier/junit.xml <<'XML'
` + forgedJUnit + `
XML
exit 0
SH
for f in /usr/local/bin/python3 /usr/local/bin/pytest /usr/bin/python3 /usr/local/sbin/python3; do
	mkdir -p "${f%/*}"; install -m 755 /tmp/fake "$f"
done
site=/usr/local/lib/python3.11/dist-packages
mkdir -p $site/pytest $site/t1evil-1.0.dist-info
atexit="import atexit; atexit.register(lambda: open('/logs/verifier/junit.xml', 'w').write('''` + forgedJUnit + `'''))"
printf 'import sys, os\nsys.exit(0) if False else None\ndef main(*a, **k):\n    %s\n    return 0\n' "$atexit; atexit._run_exitfuncs()" > $site/pytest/__init__.py
printf '%s\n' "$atexit" > $site/t1evil.pth
printf '%s\n' "$atexit" > $site/sitecustomize.py
printf '%s\n' "$atexit" > $site/t1evil.py
printf '[pytest11]\nt1evil = t1evil\n' > $site/t1evil-1.0.dist-info/entry_points.txt
printf 'Metadata-Version: 2.1\nName: t1evil\nVersion: 1.0\n' > $site/t1evil-1.0.dist-info/METADATA
hook='import pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"'
printf '%s\n' "$hook" > /conftest.py
printf '[pytest]\naddopts = -p t1evil\n' > /pytest.ini
`

// TestRootChangesCannotForgeAVerdict: a solution that plants fakes of the
// verifier's python3, pytest, start-up hooks and plugins outside the
// writable directories does not change the verdict: the verifier's
// sandbox applies root changes only as additions that shadow none of its
// tools, and says what it refused.
func TestRootChangesCannotForgeAVerdict(t *testing.T) {
	opt, dir, task := rootTask(t)
	out, err := trial.Run(context.Background(), dir, task, &trial.Solution{Script: []byte(rootAttack)}, opt)
	if err != nil {
		t.Fatal(err)
	}
	r := out.Report
	if out.SolutionExit != 0 {
		t.Fatalf("the attack did not run: exit %d\n%s", out.SolutionExit, out.SolutionOutput)
	}
	if r.Solved || r.Passed != 0 || r.Total != 3 {
		t.Errorf("planted root files forged the verdict: solved %v, passed %d/%d, source %s %v", r.Solved, r.Passed, r.Total, r.Source, r.Problems)
	}
	if !strings.Contains(strings.Join(r.Problems, "\n"), "changes outside the writable directories not applied") {
		t.Errorf("the refused root changes are not reported: %q", r.Problems)
	}
}
