package trial

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/sandbox"
)

// hostileDockerfile is the greeting task's environment with ENV lines
// real Terminal-Bench images carry: uv's ~/.local/bin on PATH, the work
// directory on PYTHONPATH, ~/.bashrc sourced by non-interactive bash. Each
// names a place the agent can write.
const hostileDockerfile = `FROM python:3.11-slim
WORKDIR /app
ENV PATH=/root/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENV PYTHONPATH=/app
ENV BASH_ENV=/root/.bashrc
RUN mkdir -p /app/data && echo t1 > /app/data/name.txt
`

// The two ways a verifier runs: the task's own test.sh (from the image's
// work directory, as Harbor runs it), and the offline pytest t1 runs in
// place of a test.sh that fetches its tools.
var verifierModes = map[string]string{
	"test.sh": "#!/bin/bash\ncd /app && python3 -m pytest -q -p no:cacheprovider --junitxml=/logs/verifier/junit.xml /tests/test_outputs.py\n",
	"offline": networkTestSh,
}

// forgePy, run inside the verifier's Python, writes a JUnit report of 40
// passed tests where pytest was told to write its own and exits before
// any test runs: a binary reward of 1 and a count reward 20 times the
// task's two assertions, without doing the task.
const forgePy = `import os, sys
def forge():
    path = "/logs/verifier/junit.xml"
    for a in sys.orig_argv:
        if a.startswith("--junitxml="):
            path = a.split("=", 1)[1]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    cases = "".join('<testcase classname="forged" name="test_%d"/>' % i for i in range(40))
    with open(path, "w") as f:
        f.write('<testsuites><testsuite name="forged" tests="40">%s</testsuite></testsuites>' % cases)
    os._exit(0)
if any("pytest" in a for a in sys.orig_argv):
    forge()
`

// forgeSh is forgePy for shell-level attacks: it writes the report and
// exits the calling shell. It names commands by absolute path, as they are
// the ones it shadows.
const forgeSh = `t1_forge() { /bin/mkdir -p /logs/verifier; { printf '<testsuites><testsuite name="forged" tests="40">'; for i in {1..40}; do printf '<testcase classname="forged" name="test_%s"/>' $i; done; printf '</testsuite></testsuites>'; } > /logs/verifier/junit.xml; exit 0; }
`

// userSite finds the sandbox user's site-packages the way Python does.
const userSite = `site=$(/usr/bin/python3 -c 'import site; print(site.getusersitepackages())'); mkdir -p "$site"
`

// Each attack is a solution that leaves the task undone and plants what
// would make the verifier report it solved.
var attacks = map[string]string{
	// ~/.local/lib/python3.*/site-packages/usercustomize.py runs in every
	// Python that imports site with the user site enabled.
	"usercustomize": userSite + "cat > \"$site/usercustomize.py\" <<'EOF'\n" + forgePy + "EOF\n",
	// sitecustomize.py on PYTHONPATH comes before the system's own.
	"sitecustomize": "cat > /app/sitecustomize.py <<'EOF'\n" + forgePy + "EOF\n",
	// A .pth file's import lines run at start-up.
	"pth": userSite + "cat > \"$site/t1forge.py\" <<'EOF'\n" + forgePy + "EOF\necho 'import t1forge' > \"$site/t1forge.pth\"\n",
	// A pytest plugin that pytest loads by its entry point from the user
	// site-packages.
	"plugin": userSite + "cat > \"$site/t1forge_plugin.py\" <<'EOF'\n" + forgePy + "EOF\nmkdir -p \"$site/t1forge-1.0.dist-info\"\nprintf 'Metadata-Version: 2.1\\nName: t1forge\\nVersion: 1.0\\n' > \"$site/t1forge-1.0.dist-info/METADATA\"\nprintf '[pytest11]\\nt1forge = t1forge_plugin\\n' > \"$site/t1forge-1.0.dist-info/entry_points.txt\"\n",
	// python3 -m pytest from /app imports /app/pytest before the real one.
	"pytest-shadow": "mkdir -p /app/pytest\ncat > /app/pytest/__main__.py <<'EOF'\n" + forgePy + "forge()\nEOF\ntouch /app/pytest/__init__.py\n",
	// Shims in ~/.local/bin, which the image puts first on PATH, for every
	// command a verifier starts with.
	"path-shim": "mkdir -p /root/.local/bin\nfor c in python3 python pytest env mkdir; do { echo '#!/bin/bash'; echo " + shellSingle(forgeSh) + "; echo t1_forge; } > /root/.local/bin/$c; chmod +x /root/.local/bin/$c; done\n",
	// Stand-ins of its own where the offline verifier keeps its stand-ins
	// for network installers, and uv's env file pointing there.
	"verifier-shims": "mkdir -p /tmp/t1-verifier/shims /root/.local/bin\nfor c in uvx uv curl wget pytest python3 python pip apt-get sh; do { echo '#!/bin/bash'; echo " + shellSingle(forgeSh) + "; echo t1_forge; } > /tmp/t1-verifier/shims/$c; chmod +x /tmp/t1-verifier/shims/$c; done\necho 'export PATH=/tmp/t1-verifier/shims:$PATH' > /root/.local/bin/env\n",
	// ~/.bashrc, which BASH_ENV makes every non-interactive bash source:
	// a function and an alias shadow the commands the verifier runs.
	"rc-function": "cat >> /root/.bashrc <<'EOF'\n" + forgeSh + "python3() { t1_forge; }\nmkdir() { t1_forge; }\nshopt -s expand_aliases\nalias python3=t1_forge\nEOF\n",
	// conftest.py in every directory pytest might collect one from: the
	// work directory, the tests directory and every other writable one.
	"conftest": "for d in /app /app/out /tests /tmp /root /logs /var/tmp /; do mkdir -p $d 2>/dev/null; cat > $d/conftest.py <<'EOF' 2>/dev/null\n" + conftestPy + "EOF\ndone\n" +
		"printf '[pytest]\\naddopts = -p no:terminal\\n' > /app/pytest.ini; true\n",
}

// conftestPy turns every test's report into a pass.
const conftestPy = `import pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
`

func shellSingle(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// A solution or an agent cannot make the verifier pass a task it left
// undone through the state it leaves: every attack is written out below
// and run against both ways a verifier runs. The real tests run (two of
// them) and the greeting test fails. The honest solution still passes with
// the same environment.
func TestVerifierNotFooledByAgentState(t *testing.T) {
	if testing.Short() {
		t.Skip("long scenario: skipped with -short (make test runs it)")
	}
	be := backend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for mode, testSh := range verifierModes {
		t.Run(mode, func(t *testing.T) {
			dir, tk := writeTaskIn(t, testSh, hostileDockerfile)
			out, err := Run(ctx, dir, tk, Oracle(dir), Options{Backend: be})
			if err != nil {
				t.Fatal(err)
			}
			if !out.Report.Solved || out.Report.Passed != 2 || out.Offline != (mode == "offline") {
				t.Fatalf("oracle: offline %v, %+v, solution output %q", out.Offline, out.Report, out.SolutionOutput)
			}
			for name, script := range attacks {
				t.Run(name, func(t *testing.T) {
					sol := &Solution{Script: []byte("#!/bin/bash\n" + script)}
					out, err := Run(ctx, dir, tk, sol, Options{Backend: be})
					if err != nil {
						t.Fatal(err)
					}
					checkNotFooled(t, out.Report.Solved, out.Report.Passed, out.Report.Total, out.Report.Source, out.SolutionOutput)
				})
			}
		})
	}
}

// absoluteTestSh runs pytest through the interpreter's full path from
// the work directory, as some Terminal-Bench test.sh files do: PATH, where
// the verifier's python3 guard sits, is not consulted.
const absoluteTestSh = "#!/bin/bash\ncd /app && /usr/bin/python3 -m pytest -q -p no:cacheprovider --junitxml=/logs/verifier/junit.xml /tests/test_outputs.py\n"

// The agent's /app/pytest is not imported by a test.sh that names the
// interpreter by its full path: the verifier's guard stands in for the
// interpreter file itself, not only for python3 on PATH. The honest
// solution still passes.
func TestVerifierNotFooledThroughTheInterpretersPath(t *testing.T) {
	if testing.Short() {
		t.Skip("two trials: skipped with -short (make test runs it)")
	}
	be := backend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, tk := writeTaskIn(t, absoluteTestSh, hostileDockerfile)
	out, err := Run(ctx, dir, tk, Oracle(dir), Options{Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Report.Solved || out.Report.Passed != 2 {
		t.Fatalf("oracle: %+v, solution output %q", out.Report, out.SolutionOutput)
	}
	sol := &Solution{Script: []byte("#!/bin/bash\n" + attacks["pytest-shadow"])}
	out, err = Run(ctx, dir, tk, sol, Options{Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	checkNotFooled(t, out.Report.Solved, out.Report.Passed, out.Report.Total, out.Report.Source, out.SolutionOutput)
}

func checkNotFooled(t *testing.T, solved bool, passed, total int, source any, detail string) {
	t.Helper()
	if solved || total != 2 || passed > 1 {
		t.Fatalf("verifier fooled: solved %v, %d of %d passed (source %v); solution output %q", solved, passed, total, source, detail)
	}
}

// A job the agent left running in its shell, rewriting the tests into 40
// that pass and planting a conftest.py beside them, is not alive when the
// verifier runs.
func TestVerifierOutlivesNoAgentProcess(t *testing.T) {
	t.Parallel()
	be := backend(t)
	for mode, testSh := range verifierModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dir, tk := writeTaskIn(t, testSh, hostileDockerfile)
			opt := Options{Backend: be}
			sb, err := opt.Start(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			sh, err := sb.Shell(ctx, sandbox.ShellOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer sh.Close()
			rewriter := `mkdir -p /tmp/.r; for i in $(seq 40); do printf 'def test_forged_%s():\n    pass\n' $i; done > /tmp/.r/t.py
printf 'import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    (yield).get_result().outcome = "passed"\n' > /tmp/.r/conftest.py
nohup bash -c 'while :; do grep -qs forged /tests/test_outputs.py || cp /tmp/.r/t.py /tests/test_outputs.py 2>/dev/null; [ -f /tests/conftest.py ] || cp /tmp/.r/conftest.py /tests/ 2>/dev/null; sleep 0.005; done' >/dev/null 2>&1 &
echo started`
			if res, err := sh.Run(ctx, rewriter, sandbox.RunOptions{Timeout: 10 * time.Second}); err != nil || res.ExitCode != 0 {
				t.Fatalf("start rewriter: %v %+v", err, res)
			}
			rep, _, _, err := Verify(ctx, sb, dir, tk, opt)
			if err != nil {
				t.Fatal(err)
			}
			checkNotFooled(t, rep.Solved, rep.Passed, rep.Total, rep.Source, "")
		})
	}
}
