package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/t1pipe/t1/trial"
)

// tbTasks are task directories in the shapes Terminal-Bench tasks take
// (trial/testdata/tb): a python image, a uvx test.sh with a CTRF report,
// a heredoc- and function-heavy solve.sh, a data generator in test.sh, and
// a verifier that looks for a tool the task builds.
const tbTasks = "../../trial/testdata/tb"

func needBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap unavailable (make setup installs it)")
	}
}

// Every shape's reference solution passes every test, and with no
// solution every test fails.
func TestTasksCheckTerminalBenchShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("long scenario: skipped with -short (make test runs it)")
	}
	needBwrap(t)
	out, err := t1(t, "tasks", "check", "--json", tbTasks)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rs []trial.CheckResult
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := map[string]struct {
		tests  int
		source string
	}{"build-tool": {3, "junit"}, "datagen": {4, "ctrf"}, "heredoc-solve": {3, "junit"}, "py-image": {2, "junit"}, "uvx-ctrf": {3, "ctrf"}}
	if len(rs) != len(want) {
		t.Fatalf("%d results: %+v", len(rs), rs)
	}
	for _, r := range rs {
		w := want[r.Task]
		if !r.Solved || r.Passed != w.tests || r.Total != w.tests || r.Source != w.source || !r.Offline || r.NoOp == nil || r.NoOp.Passed != 0 || r.NoOp.Total != w.tests {
			t.Errorf("%s: %+v (no-op %+v)", r.Task, r, r.NoOp)
		}
		// A host with its own python needs no alias.
		_, hostPython := os.Stat("/usr/bin/python")
		if python := strings.Contains(strings.Join(r.Notes, " "), "python runs the host's /usr/bin/python3"); hostPython != nil && python != (r.Task == "py-image") {
			t.Errorf("%s: environment notes %q", r.Task, r.Notes)
		}
	}
}

// copyTask copies a task directory for a test to change.
func copyTask(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if out, err := exec.Command("cp", "-r", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return dst
}

// A failing solution's output is shown; a test that passes with no
// solution, because the host provides what the task should install, is
// warned of.
func TestTasksCheckShowsFailureAndLeaks(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	dir := copyTask(t, filepath.Join(tbTasks, "build-tool"))
	if err := os.WriteFile(filepath.Join(dir, "solution", "solve.sh"), []byte("#!/bin/bash\necho compiling rot13\necho 'cc1: fatal error: rot13.c: no such file' >&2\nexit 4\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "tests", "test_outputs.py"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The task should install gcc; the host's /usr already has it.
	if _, err := f.WriteString("\n\ndef test_compiler_installed():\n    assert shutil.which(\"gcc\")\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, err := t1(t, "tasks", "check", dir)
	if err == nil {
		t.Fatalf("a failing solution was reported solved:\n%s", out)
	}
	for _, want := range []string{"solution exit 4", "    | compiling rot13\n    | cc1: fatal error: rot13.c: no such file\n",
		"WARNING: with no solution 1/4 tests pass (test_outputs::test_compiler_installed)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// The oracle, replayed turn by turn through the harness, passes every test
// of every shape, as tasks check's solve.sh run does.
func TestRolloutOracleTerminalBenchShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("long scenario: skipped with -short (make test runs it)")
	}
	needBwrap(t)
	ents, err := os.ReadDir(tbTasks)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{"build-tool": "3/3", "datagen": "4/4", "heredoc-solve": "3/3", "py-image": "2/2", "uvx-ctrf": "3/3"}
	for _, e := range ents {
		out, err := t1(t, "rollout", "--policy", "oracle", "--task", filepath.Join(tbTasks, e.Name()))
		if err != nil {
			t.Fatalf("%s: %v\n%s", e.Name(), err, out)
		}
		if want := "passed " + tests[e.Name()] + ", solved true"; !strings.Contains(out, "=== task_complete after") || !strings.Contains(out, want) || strings.Contains(out, "[exit status") {
			t.Errorf("%s: transcript lacks %q or a command failed:\n%s", e.Name(), want, out)
		}
	}
}

// A 4.4 KB instruction does not end the oracle's episode before its first
// turn; a context too small for it, or over the model's, is an error that
// says what to pass.
func TestRolloutLongInstruction(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	dir := copyTask(t, filepath.Join(tbTasks, "heredoc-solve"))
	p := filepath.Join(dir, "instruction.md")
	ins, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var long strings.Builder
	long.Write(ins)
	long.WriteString("\n## Details\n\n")
	for i := 0; long.Len() < 4400; i++ {
		long.WriteString("Each line names one file and its word count, and files are taken in the order of their names. ")
	}
	if err := os.WriteFile(p, []byte(long.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := t1(t, "rollout", "--policy", "oracle", "--task", dir)
	if err != nil || !strings.Contains(out, "=== task_complete after") || !strings.Contains(out, "passed 3/3, solved true") {
		t.Fatalf("%v\n%s", err, out)
	}
	out, err = t1(t, "rollout", "--policy", "oracle", "--context", "512", "--task", dir)
	if err == nil || !strings.Contains(err.Error(), "over the context of 512 tokens: pass --context") {
		t.Fatalf("--context 512: %v\n%s", err, out)
	}
	// The reference model's checkpoint holds 2048 tokens.
	out, err = t1(t, "rollout", "--context", "4096", "--task", dir)
	if err == nil || !strings.Contains(err.Error(), "over the model's context of 2048 tokens") {
		t.Fatalf("--context 4096: %v\n%s", err, out)
	}
}

// A reference solution whose loop runs past the harness's command limit
// runs whole when the oracle replays it: its commands get the task's own
// time limit, as tasks check's solve.sh run does. With a shorter limit in
// its task.toml it is cut short, and the rollout says so and fails rather
// than report the verdict as the solution's.
func TestRolloutOracleTakesTheTasksTimeLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("a 6-second solution: skipped with -short (make test runs it)")
	}
	needBwrap(t)
	// long-solve's 40 one-second ticks outlast the harness's 30-second
	// default per command; this copy ticks 6 times against a harness
	// limit of 2 seconds, the same relation in a sixth of the time.
	dir := copyTask(t, "../../trial/testdata/tb-harbor/long-solve")
	for name, body := range map[string]string{
		"solution/solve.sh":     "#!/bin/bash\ns=0\nfor n in $(seq 1 6); do s=$((s + n)); echo \"$n $s\" >> /app/sums.txt; sleep 1; done\n",
		"tests/test_outputs.py": "def test_table():\n    with open(\"/app/sums.txt\") as f:\n        rows = [tuple(map(int, l.split())) for l in f]\n    assert rows == [(n, n * (n + 1) // 2) for n in range(1, 7)]\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := writeConfig(t, "stages:\n  rollout:\n    command_timeout: 2s\n")
	out, err := t1(t, "rollout", "--policy", "oracle", "--task", dir, "--config", cfg)
	if err != nil || !strings.Contains(out, "passed 1/1, solved true") || strings.Contains(out, "timed out") {
		t.Fatalf("%v\n%s", err, out)
	}
	p := filepath.Join(dir, "task.toml")
	toml, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(toml), "[agent]\ntimeout_sec = 300.0", "[agent]\ntimeout_sec = 3.0", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = t1(t, "rollout", "--policy", "oracle", "--task", dir, "--config", cfg)
	if err == nil || !strings.Contains(err.Error(), "the reference solution was cut short: 1 of its commands were interrupted") || !strings.Contains(out, "timed out after 3s") {
		t.Fatalf("a solution past its task's limit: %v\n%s", err, out)
	}
}
