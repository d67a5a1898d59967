package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
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
// writable directories, or edits them in place, does not change the
// verdict: the verifier's sandbox applies no root change that replaces,
// shadows or configures its tools, and says what it refused.
func TestRootChangesCannotForgeAVerdict(t *testing.T) {
	opt, dir, task := rootTask(t)
	for _, name := range []string{"planted", "linked", "edited"} {
		attack := map[string]string{"planted": rootAttack, "linked": linkAttack, "edited": editAttack}[name]
		out, err := trial.Run(context.Background(), dir, task, &trial.Solution{Script: []byte(attack)}, opt)
		if err != nil {
			t.Fatal(err)
		}
		r := out.Report
		if out.SolutionExit != 0 {
			t.Fatalf("%s: the attack did not run: exit %d\n%s", name, out.SolutionExit, out.SolutionOutput)
		}
		if r.Solved || r.Passed != 0 || r.Total != 3 {
			t.Errorf("%s: root files forged the verdict: solved %v, passed %d/%d, source %s %v", name, r.Solved, r.Passed, r.Total, r.Source, r.Problems)
		}
		if !strings.Contains(strings.Join(r.Problems, "\n"), "changes outside the writable directories not applied") {
			t.Errorf("%s: the refused root changes are not reported: %q", name, r.Problems)
		}
		t.Logf("%s: %s", name, r.Problems)
	}
}

// linkAttack makes a Python module directory on sys.path a link into
// /app, where the layer's files go unchecked: a .pth there would rewrite
// the report when Python exits, and a pytest package would shadow
// Debian's. The verifier layer's python3 has the directory, so it is
// refused as an existing name; on an image without it, as a link where
// PATH or sys.path look.
var linkAttack = `#!/bin/bash
set -eu
mkdir -p /app/site/pytest /usr/local/lib/python3.11
printf '%s\n' "import atexit; atexit.register(lambda: open('/logs/verifier/junit.xml', 'w').write('''` + forgedJUnit + `'''))" > /app/site/t1evil.pth
cp /app/site/t1evil.pth /app/site/pytest/__init__.py
rm -rf /usr/local/lib/python3.11/dist-packages
ln -s /app/site /usr/local/lib/python3.11/dist-packages
`

// editAttack changes files the verifier's image has outside /app, which
// Restore applies where they are configuration or data: Debian's
// /etc/python3.11/sitecustomize.py (which /usr/lib/python3.11's links to
// and every python3 runs at start-up, -I included), replaced to rewrite
// the report when Python exits, and the verifier layer's own pytest
// package, rewritten in place. The solution's image has neither, so in
// its snapshot they are additions; in the verifier's sandbox they are
// edits of the image's files.
var editAttack = `#!/bin/bash
set -eu
mkdir -p /etc/python3.11 /usr/lib/python3/dist-packages/pytest
cat > /etc/python3.11/sitecustomize.py <<'PY'
import atexit
atexit.register(lambda: open('/logs/verifier/junit.xml', 'w').write('''` + forgedJUnit + `'''))
PY
cat > /usr/lib/python3/dist-packages/pytest/__init__.py <<'PY'
def main(*a, **k):
    open('/logs/verifier/junit.xml', 'w').write('''` + forgedJUnit + `''')
    return 0
PY
`

// TestSnapshotCarriesRootChanges: an image sandbox's layer holds its
// changes outside the writable directories in OCI form: files, links
// stored as links (never read through), whiteouts of deletions and the
// opaque mark of a directory that replaced the image's.
func TestSnapshotCarriesRootChanges(t *testing.T) {
	opt, dir, _ := rootTask(t)
	ctx := context.Background()
	sb, err := opt.Backend.Start(ctx, sandbox.Spec{TaskDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(ctx, sandbox.Cmd{Script: "set -e; rm /usr/bin/tac; rm -rf /usr/share/doc; mkdir /usr/share/doc; echo new > /usr/share/doc/new; " +
		"mkdir -p /usr/local/x; echo tool > /usr/local/x/tool; ln -s /etc/shadow /usr/local/x/shadow; echo app > /app/a"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	var layer bytes.Buffer
	if err := sb.Snapshot(ctx, &layer); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(layer.Bytes()))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		got[h.Name] = string(h.Typeflag) + ":" + h.Linkname + string(data)
	}
	want := map[string]string{
		"usr/bin/.wh.tac":            "0:",
		"usr/share/doc/":             "5:",
		"usr/share/doc/.wh..wh..opq": "0:",
		"usr/share/doc/new":          "0:new\n",
		"usr/local/x/tool":           "0:tool\n",
		"usr/local/x/shadow":         "2:/etc/shadow",
		"app/a":                      "0:app\n",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("layer entry %s = %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if strings.HasPrefix(k, "proc") || strings.HasPrefix(k, "dev/") || strings.HasPrefix(k, "run/t1") || strings.HasPrefix(k, ".image") {
			t.Errorf("layer holds %s, a mount point or the overlay's own directory", k)
		}
	}
	// Restored into a fresh sandbox: the additions are there, the
	// deletions are not applied (the opaque directory's new file is an
	// addition), and the link is a link.
	fresh, err := opt.Backend.Start(ctx, sandbox.Spec{TaskDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.Restore(ctx, bytes.NewReader(layer.Bytes())); err != nil {
		t.Fatal(err)
	}
	r, err := fresh.Exec(ctx, sandbox.Cmd{Script: "cat /usr/local/x/tool /app/a; readlink /usr/local/x/shadow; test -e /usr/bin/tac && echo tac; test -e /usr/share/doc/new && echo new"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stdout != "tool\napp\n/etc/shadow\ntac\nnew\n" {
		t.Errorf("restored: %q %q", r.Stdout, r.Stderr)
	}
	if notes := strings.Join(fresh.Info().Notes, "\n"); !strings.Contains(notes, "usr/bin/.wh.tac") {
		t.Errorf("notes do not name the deletion left out: %q", notes)
	}
}
