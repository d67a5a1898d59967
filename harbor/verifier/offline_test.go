package verifier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/harbor"
)

func TestNetworkInstalls(t *testing.T) {
	cases := map[string][]string{
		"apt-get update\napt-get install -y curl\n":                                   {"apt", "apt"},
		"curl -LsSf https://astral.sh/uv/0.9.7/install.sh | sh\n":                     {"curl"},
		"uvx \\\n  --with pytest==8.4.1 \\\n  pytest /tests/test_outputs.py\n":        {"uv"},
		"python3 -m pip install --no-cache-dir requests\n":                            {"pip"},
		"uv pip install --system numpy\n":                                             {"uv"},
		"if ! command -v wget; then exit 1; fi; wget -q http://x/y\n":                 {"wget"},
		"git clone https://example.com/r.git && npm ci\n":                             {"git"},
		"# curl https://example.com is only mentioned here\npython3 -m pytest x.py\n": nil,
		"pip list\napt-cache policy curl\nuv --version\n":                             nil,
		"echo done # apt-get install later\n":                                         nil,
		"/usr/bin/curl -o /tmp/x https://example.com\n":                               {"curl"},
	}
	for script, want := range cases {
		var got []string
		for _, u := range NetworkInstalls([]byte(script)) {
			got = append(got, u.Tool)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: tools %v, want %v", script, got, want)
		}
	}
	uses := NetworkInstalls([]byte("set -e\n\nuvx \\\n  -w pytest \\\n  pytest /tests/t.py\n"))
	if len(uses) != 1 || uses[0].Line != 3 || !strings.HasPrefix(uses[0].Text, "uvx") {
		t.Fatalf("%+v", uses)
	}
}

func loadSample(t *testing.T, name string) *harbor.Task {
	t.Helper()
	task, err := harbor.Load(filepath.Join("..", "testdata", "tasks", name))
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// appPath matches /app as a path ("/app", "/app/x"), not "/app.log".
var appPath = regexp.MustCompile(`/app([/\s"';)]|$)`)

// hostRun runs a task script as a host process with /app and
// /logs/verifier moved under root (t1's sandbox does the same with binds).
func hostRun(t *testing.T, root string, script []byte, env ...string) int {
	t.Helper()
	s := strings.ReplaceAll(string(script), "/logs/verifier", filepath.Join(root, "logs"))
	s = appPath.ReplaceAllString(s, filepath.Join(root, "app")+"$1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", s)
	cmd.Dir = filepath.Join(root, "app")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return 0
}

func needPytest(t *testing.T) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-m", "pytest", "--version").Run(); err != nil {
		t.Skipf("no local pytest (Debian python3-pytest): %v", err)
	}
}

// stage lays out a task on the host: tests/ copied to root/tests, an empty
// root/app and root/logs.
func stage(t *testing.T, task *harbor.Task) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"app", "logs", "tests"} {
		must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	for _, p := range task.TestFiles() {
		must(t, os.WriteFile(filepath.Join(root, p), task.Files[p].Data, 0o644))
	}
	return root
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// shimmed runs script as a host process the way an offline verifier runs
// test.sh: the stand-ins first on PATH, an empty HOME, /tests, /app and
// /logs/verifier moved under root. It returns the exit code and output.
func shimmed(t *testing.T, root, script string) (int, string) {
	t.Helper()
	shims := filepath.Join(root, "shims")
	must(t, os.MkdirAll(shims, 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "home"), 0o755))
	must(t, WriteShims(shims, false))
	s := strings.ReplaceAll(script, "/tests/", filepath.Join(root, "tests")+"/")
	s = strings.ReplaceAll(s, "/logs/verifier", filepath.Join(root, "logs"))
	s = appPath.ReplaceAllString(s, filepath.Join(root, "app")+"$1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/bash", "--norc", "--noprofile", "-c", s)
	cmd.Dir = filepath.Join(root, "tests")
	cmd.Env = append(os.Environ(), "PATH="+shims+":"+Path, "HOME="+filepath.Join(root, "home"), "PYTHONNOUSERSITE=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return 0, string(out)
}

// word-freq's test.sh as Terminal-Bench writes it (apt-get, uv's
// installer through curl, uvx with pytest and its CTRF plugin) runs whole
// on the stand-ins: one CTRF result per test, and its last step, the
// reward file, is kept.
func TestShimsRunTestScript(t *testing.T) {
	t.Parallel()
	needPytest(t)
	task := loadSample(t, "word-freq")
	root := stage(t, task)
	app := filepath.Join(root, "app")
	must(t, os.WriteFile(filepath.Join(app, "corpus.txt"), task.Files["environment/corpus.txt"].Data, 0o644))
	script := "export APP_DIR=/app\n" + string(task.Files[harbor.TestScriptPath].Data)

	exit, out := shimmed(t, root, script)
	r := Parse(filepath.Join(root, "logs"), exit)
	if r.Source != SourceCTRF || r.Total != 5 || r.Passed != 1 || r.Solved || exit != 0 || r.Reward == nil || *r.Reward != 0 {
		t.Fatalf("unsolved: exit %d, %+v\n%s", exit, r, out)
	}
	if code := hostRun(t, root, task.Files[harbor.SolutionPath].Data); code != 0 {
		t.Fatalf("solve.sh exit %d", code)
	}
	exit, out = shimmed(t, root, script)
	r = Parse(filepath.Join(root, "logs"), exit)
	if r.Source != SourceCTRF || r.Total != 5 || r.Passed != 5 || !r.Solved || r.Reward == nil || *r.Reward != 1 {
		t.Fatalf("solved: exit %d, %+v\n%s", exit, r, out)
	}
	for _, want := range []string{"apt-get update: skipped", "apt-get install: satisfied", "uv installer", "pytest==8.4.1: using the image's pytest"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// Each stand-in succeeds when what it is asked for is on the image and
// otherwise fails with one line naming what is missing.
func TestShimInstalls(t *testing.T) {
	t.Parallel()
	needPytest(t)
	cases := []struct {
		script string
		exit   int
		line   string // the one line of output, when it fails
	}{
		{"apt-get update && apt-get install -y --no-install-recommends bash coreutils=9.1-1 && apt clean", 0, ""},
		{"apt-get install -y bash t1-no-such-package", 100, "apt-get install: not on the verifier's image (no network to install): t1-no-such-package"},
		{"pip install --no-cache-dir 'pytest>=7' && pip3 install pytest==7.2.1", 0, ""},
		{"pip install pytest t1-no-such-dist==1.0", 1, "pip install: not on the verifier's image (no network to install): t1-no-such-dist"},
		{"printf 'pytest\\n# tools\\nt1-no-such-dist\\n' > /tmp/r.txt; python3 -m pip install -r /tmp/r.txt", 1, "python3 -m pip install: not on the verifier's image (no network to install): t1-no-such-dist"},
		{"uv pip install --system pytest", 0, ""},
		{"uvx --with t1-no-such-dist pytest --version", 1, "uvx: not on the verifier's image (no network to install): t1-no-such-dist"},
		{"curl -LsSf https://astral.sh/uv/0.9.7/install.sh | sh && . $HOME/.local/bin/env && uv --version && $HOME/.local/bin/uvx -p 3.13 python3 -c 'print(1)'", 0, ""},
		{"wget -qO- https://astral.sh/uv/install.sh | sh && . $HOME/.cargo/env && uv run --with pytest python -c 'import pytest'", 0, ""},
		{"cd /tmp && rm -rf t1v && mkdir t1v && cd t1v && uv venv && . .venv/bin/activate && python -c 'import pytest'", 0, ""},
		{"uv sync", 0, ""},
		{"uv publish", 2, "uv publish: not available offline"},
	}
	for _, c := range cases {
		root := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(root, "tests"), 0o755))
		script := strings.ReplaceAll(c.script, "/tmp/", root+"/")
		exit, out := shimmed(t, root, script)
		if exit != c.exit {
			t.Errorf("%s: exit %d, want %d\n%s", c.script, exit, c.exit, out)
			continue
		}
		if c.line != "" && out != "t1 offline verifier: "+c.line+"\n" && !strings.HasSuffix(out, "\nt1 offline verifier: "+c.line+"\n") {
			t.Errorf("%s: output %q, want it to end in the one line %q", c.script, out, c.line)
		}
	}
}

// A test file whose import fails is one failed result whose message names
// the missing module, in CTRF (the stand-in's plugin) and in JUnit.
func TestShimCollectionError(t *testing.T) {
	t.Parallel()
	needPytest(t)
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "tests"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "logs"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "tests", "test_outputs.py"), []byte("import t1_missing_module\n\ndef test_a():\n    pass\n"), 0o644))
	exit, out := shimmed(t, root, "uvx -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA")
	r := Parse(filepath.Join(root, "logs"), exit)
	if r.Source != SourceCTRF || r.Total != 1 || r.Solved || !strings.Contains(r.Assertions[0].Message, "No module named 't1_missing_module'") {
		t.Fatalf("ctrf: exit %d, %+v\n%s", exit, r, out)
	}
	must(t, os.Remove(filepath.Join(root, "logs", CTRFFile)))
	exit, out = shimmed(t, root, "python3 -m pytest --junitxml=/logs/verifier/junit.xml /tests/test_outputs.py")
	r = Parse(filepath.Join(root, "logs"), exit)
	if r.Source != SourceJUnit || r.Total != 1 || r.Solved || !strings.Contains(r.Assertions[0].Message, "No module named 't1_missing_module'") {
		t.Fatalf("junit: exit %d, %+v\n%s", exit, r, out)
	}
}

// A pin of the test runner or its plugins is noted and used as the image
// has it; a pin of any other distribution fails unless the image's
// version satisfies it. pluggy (pytest's own dependency) is the other
// distribution, at whatever version the image has.
func TestShimVersionPins(t *testing.T) {
	t.Parallel()
	needPytest(t)
	v, err := exec.Command("/usr/bin/python3", "-c", "from importlib import metadata as m; print(m.version('pluggy'))").Output()
	if err != nil {
		t.Fatal(err)
	}
	have := strings.TrimSpace(string(v))
	rel := strings.Split(strings.SplitN(have, "+", 2)[0], ".")
	major := rel[0]
	next := func(s string) string { n := 0; fmt.Sscan(s, &n); return fmt.Sprint(n + 1) }
	cases := []struct {
		spec string
		ok   bool
	}{
		{"pluggy==" + strings.Join(rel, "."), true},
		{"pluggy==" + strings.Join(rel, ".") + ".0", true},
		{"pluggy>=" + major + ",<" + next(major), true},
		{"pluggy~=" + major + ".0", true},
		{"pluggy==" + major + ".*", true},
		{"pluggy!=" + major + ".*", false},
		{"pluggy==" + next(major) + ".1.0", false},
		{"pluggy>" + strings.Join(rel, "."), false},
		{"pluggy<" + major, false},
		{"pluggy<=" + next(major) + ".0.dev1", true},
		{"pluggy>=" + next(major) + ".0a1", false},
		{"pluggy~=" + major + "." + next(rel[1]), false},
	}
	for _, c := range cases {
		root := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(root, "tests"), 0o755))
		exit, out := shimmed(t, root, "pip install '"+c.spec+"'")
		want := "t1 offline verifier: pip install " + c.spec + ": present " + have + ", the sandbox is offline\n"
		if c.ok && exit != 0 || !c.ok && (exit != 1 || out != want) {
			t.Errorf("%s (present %s): exit %d, output %q", c.spec, have, exit, out)
		}
	}
	// The test runner's pins: noted, not enforced.
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "tests"), 0o755))
	exit, out := shimmed(t, root, "pip install pytest==0.0.1 'pytest-json-ctrf==0.3.5' && uvx --with 'pytest>=99' pytest --version")
	if exit != 0 || !strings.Contains(out, "pytest==0.0.1: using the image's pytest") || !strings.Contains(out, "pytest>=99: using the image's pytest") {
		t.Errorf("runner pins: exit %d\n%s", exit, out)
	}
}
