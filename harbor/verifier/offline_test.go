package verifier

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
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

func TestOfflinePlan(t *testing.T) {
	wf := loadSample(t, "word-freq")
	need, uses := NeedsOffline(wf)
	if !need || len(uses) != 4 {
		t.Fatalf("word-freq: need %v, uses %+v", need, uses)
	}
	plan, err := OfflinePytest(wf, PytestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Isolated Python, conftest.py discovery stopped at the tests, run
	// from the tests directory, never the agent's work directory.
	wantArgv := []string{"/usr/bin/python3", "-I", "-B", "-m", "pytest", "--rootdir=/tests", "--confcutdir=/tests", "-p", "no:cacheprovider", "--junitxml=/logs/verifier/junit.xml", "-rA", "/tests/test_outputs.py"}
	if !reflect.DeepEqual(plan.Argv, wantArgv) || plan.Dir != "/tests" || plan.ReportPath != "/logs/verifier/junit.xml" || len(plan.Missing) != 0 {
		t.Fatalf("plan %+v", plan)
	}
	wantEnv := strings.Join(Env(wf, Home), " ")
	for _, kv := range []string{"PATH=" + Path, "HOME=/tmp/t1-verifier/home", "BASH_ENV=", "PYTHONNOUSERSITE=1", "PYTHONPATH="} {
		if !slices.Contains(plan.Env, kv) {
			t.Fatalf("env %q lacks %s", plan.Env, kv)
		}
	}
	if plan.Script != "mkdir -p /logs/verifier && cd /tests && exec /usr/bin/env "+wantEnv+" "+strings.Join(wantArgv, " ") {
		t.Fatalf("script %q", plan.Script)
	}

	lr := loadSample(t, "log-rotate")
	if need, _ := NeedsOffline(lr); need {
		t.Fatal("log-rotate's test.sh fetches nothing")
	}
	plan, err = OfflinePytest(lr, PytestOptions{TestsDir: "/mnt/t", WorkDir: "/srv"})
	if err != nil {
		t.Fatal(err)
	}
	// The task's [verifier] env comes first; the hardened variables win.
	if !reflect.DeepEqual(plan.Targets, []string{"/mnt/t/test_rotate.py"}) || plan.Dir != "/srv" || !reflect.DeepEqual(plan.Env, append([]string{"KEEP=3"}, hardened(Home)...)) {
		t.Fatalf("plan %+v", plan)
	}

	if _, err := OfflinePytest(loadSample(t, "disk-report"), PytestOptions{}); err == nil || !strings.Contains(err.Error(), "no pytest files") {
		t.Fatalf("disk-report: %v", err)
	}

	// Extra packages the original installed are reported, versions dropped.
	extra, err := harbor.From(wf).TestScript("#!/bin/bash\npip install numpy==2.1 'pandas>=2' -r /tests/requirements.txt --index-url https://pypi.org/simple\nuvx --with pytest==8.4.1 --with=PyYAML -w pytest-json-ctrf==0.3.5 pytest --ctrf /logs/verifier/ctrf.json -k 'not slow' /tests/test_outputs.py::test_five_lines -rA\n").Build()
	if err != nil {
		t.Fatal(err)
	}
	plan, err = OfflinePytest(extra, PytestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tg, miss := pytestTargets([]byte("uvx \\\n  -p 3.13 \\\n  -w pytest==8.4.1 \\\n  -w pytest-json-ctrf==0.3.5 \\\n  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA\n")); !reflect.DeepEqual(tg, []string{"/tests/test_outputs.py"}) || len(miss) != 0 {
		t.Fatalf("uvx -p form: targets %v missing %v", tg, miss)
	}
	if !reflect.DeepEqual(plan.Missing, []string{"numpy", "pandas", "pyyaml"}) || !reflect.DeepEqual(plan.Targets, []string{"/tests/test_outputs.py::test_five_lines"}) {
		t.Fatalf("missing %v targets %v", plan.Missing, plan.Targets)
	}
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

// runPlan runs an offline plan the way a sandbox would, as a host process.
func runPlan(t *testing.T, plan *PytestPlan, env ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, plan.Argv[0], plan.Argv[1:]...)
	cmd.Dir = plan.Dir
	cmd.Env = append(append(os.Environ(), plan.Env...), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Logf("pytest exit %d:\n%s", ee.ExitCode(), out)
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

func TestOfflinePytestWordFreq(t *testing.T) {
	needPytest(t)
	task := loadSample(t, "word-freq")
	root := stage(t, task)
	app := filepath.Join(root, "app")
	// The Dockerfile's COPY.
	must(t, os.WriteFile(filepath.Join(app, "corpus.txt"), task.Files["environment/corpus.txt"].Data, 0o644))
	plan, err := OfflinePytest(task, PytestOptions{TestsDir: filepath.Join(root, "tests"), LogsDir: filepath.Join(root, "logs"), WorkDir: app})
	if err != nil {
		t.Fatal(err)
	}
	appEnv := "APP_DIR=" + app

	// Before the agent: nothing to find.
	exit := runPlan(t, plan, appEnv)
	r := Parse(filepath.Join(root, "logs"), exit)
	if r.Source != SourceJUnit || r.Total != 5 || r.Passed != 1 || r.Solved || exit == 0 {
		t.Fatalf("unsolved: exit %d, %+v", exit, r)
	}

	// The reference solution solves it.
	if code := hostRun(t, root, task.Files[harbor.SolutionPath].Data); code != 0 {
		t.Fatalf("solve.sh exit %d", code)
	}
	exit = runPlan(t, plan, appEnv)
	r = Parse(filepath.Join(root, "logs"), exit)
	if r.Source != SourceJUnit || r.Total != 5 || r.Passed != 5 || !r.Solved || exit != 0 {
		t.Fatalf("solved: exit %d, %+v", exit, r)
	}
	for _, a := range r.Assertions {
		if !strings.Contains(a.Name, "test_outputs::test_") {
			t.Fatalf("assertion name %q", a.Name)
		}
	}

	// One wrong count: one assertion fails, with pytest's message.
	must(t, os.WriteFile(filepath.Join(app, "top5.txt"), []byte("the 7\nfox 5\ndog 4\nover 4\nquick 2\n"), 0o644))
	exit = runPlan(t, plan, appEnv)
	r = Parse(filepath.Join(root, "logs"), exit)
	if r.Passed != 4 || r.Failed != 1 || r.Solved || !strings.HasSuffix(r.Assertions[3].Name, "test_outputs::test_counts_and_order") ||
		!strings.Contains(r.Assertions[3].Message, "quick 2") {
		t.Fatalf("wrong count: %+v", r)
	}
	f, _ := NewRewardFunc(ModeCount, 0.1)
	if s := f.Score(r); s.Value < 0.4-1e-9 || s.Value > 0.4+1e-9 {
		t.Fatalf("score %+v", s)
	}
}

func TestOfflinePytestLogRotate(t *testing.T) {
	needPytest(t)
	task := loadSample(t, "log-rotate")
	root := stage(t, task)
	app := filepath.Join(root, "app")
	// The Dockerfile: COPY the two files, RUN mkdir and chmod.
	must(t, os.MkdirAll(filepath.Join(app, "logs"), 0o755))
	must(t, os.MkdirAll(filepath.Join(app, "archive"), 0o755))
	must(t, os.WriteFile(filepath.Join(app, "rotate.conf"), task.Files["environment/files/rotate.conf"].Data, 0o644))
	must(t, os.WriteFile(filepath.Join(app, "logs", "app.log"), task.Files["environment/files/app.log"].Data, 0o640))
	if code := hostRun(t, root, task.Files[harbor.SolutionPath].Data); code != 0 {
		t.Fatalf("solve.sh exit %d", code)
	}
	plan, err := OfflinePytest(task, PytestOptions{TestsDir: filepath.Join(root, "tests"), LogsDir: filepath.Join(root, "logs"), WorkDir: app})
	if err != nil {
		t.Fatal(err)
	}
	exit := runPlan(t, plan, "APP_DIR="+app)
	r := Parse(filepath.Join(root, "logs"), exit)
	if r.Source != SourceJUnit || r.Total != 5 || r.Passed != 5 || !r.Solved {
		t.Fatalf("exit %d, %+v", exit, r)
	}
}

func TestDiskReportRewardTxt(t *testing.T) {
	task := loadSample(t, "disk-report")
	root := stage(t, task)
	if code := hostRun(t, root, task.Files[harbor.SetupScriptPath].Data); code != 0 {
		t.Fatalf("setup.sh exit %d", code)
	}
	// Unsolved: test.sh writes 0 and exits 1.
	exit := hostRun(t, root, task.Files[harbor.TestScriptPath].Data)
	r := Parse(filepath.Join(root, "logs"), exit)
	if r.Source != SourceRewardTxt || r.Solved || !r.Fallback || r.Reward == nil || *r.Reward != 0 || exit != 1 {
		t.Fatalf("unsolved: exit %d %+v", exit, r)
	}
	if code := hostRun(t, root, task.Files[harbor.SolutionPath].Data); code != 0 {
		t.Fatalf("solve.sh exit %d", code)
	}
	large, _ := os.ReadFile(filepath.Join(root, "app", "large.txt"))
	if string(large) != "cache/blob.bin\ndocs/big notes.txt\nlogs/app.log\n" {
		t.Fatalf("solution output %q", large)
	}
	exit = hostRun(t, root, task.Files[harbor.TestScriptPath].Data)
	r = Parse(filepath.Join(root, "logs"), exit)
	if r.Source != SourceRewardTxt || !r.Solved || *r.Reward != 1 || exit != 0 {
		t.Fatalf("solved: exit %d %+v", exit, r)
	}
	f, _ := NewRewardFunc(ModeCount, 0.25)
	if s := f.Score(r); s.Value != 0.25 || !s.Fallback {
		t.Fatalf("a solved fallback task scores %+v", s)
	}
}
