package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/t1pipe/t1/internal/testinfra"
)

// evalJob is what `t1 eval --json` prints.
type evalJob struct {
	Suite    string   `json:"suite"`
	Status   string   `json:"status"`
	Scored   int      `json:"scored"`
	Tasks    int      `json:"tasks"`
	Results  []string `json:"results"`
	ExitCode int      `json:"exit_code"`
}

// runEval runs `t1 eval` with args (interrupting it once its stderr says
// it is evaluating, when interrupt is set) and returns its summary and
// exit code.
func runEval(t *testing.T, data, cfg string, interrupt bool, args ...string) (evalJob, int) {
	t.Helper()
	cmd := command(t, data, cfg, append([]string{"eval", "--json", "--log-level", "warn"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(4*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	if interrupt {
		checkFor(t, time.Minute, func() error {
			if !strings.Contains(stderr.String(), "t1 eval: evaluating") {
				return errors.New("not evaluating yet")
			}
			return nil
		})
		time.Sleep(time.Second)
		cmd.Process.Signal(syscall.SIGINT)
	}
	err := cmd.Wait()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var sum evalJob
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("t1 eval %v: %v: %s\n%s", args, err, stdout.String(), stderr.String())
	}
	if sum.ExitCode != code {
		t.Fatalf("summary says exit %d, the process exited %d", sum.ExitCode, code)
	}
	return sum, code
}

// `t1 eval` on a finished run evaluates its last policy on a directory of
// Harbor tasks: interrupted, it exits 5 and a second invocation finishes
// the evaluation, on the shared consumers of rollout and reward the run
// made; a third, identical one does nothing (not one event more)
// and exits 0; asking for other attempts on the same suite and version is
// a configuration error (2).
func TestEvalJob(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	data, cfg := t.TempDir(), writeConfig(t, equalPipeline)
	completeRun(t, data, cfg)
	dir, err := filepath.Abs(filepath.Join("..", "harbor", "testdata", "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--run", "tiny", "--policy", "v2", "--suite", dir, "--attempts", "2"}

	sum, code := runEval(t, data, cfg, true, args...)
	if code != 5 || sum.Status != "stopped" {
		t.Fatalf("interrupted eval: exit %d, %+v; want 5, stopped", code, sum)
	}
	sum, code = runEval(t, data, cfg, false, args...)
	if code != 0 || sum.Status != "completed" || sum.Tasks != 3 || sum.Scored != 6 || len(sum.Results) != 1 {
		t.Fatalf("resumed eval: exit %d, %+v; want 0, completed, 3 tasks × 2 scored, one results table", code, sum)
	}
	// v2 is what the first iteration's update made: its evaluation is
	// stored under iteration 1, whose rollouts sample it, as the run's own are.
	if !strings.Contains(sum.Results[0], "/iter-0001/") {
		t.Errorf("v2's results stored at %s, want under iter-0001", sum.Results[0])
	}
	before, err := readStatus(t, data, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The run made the log's shared consumers of rollout and reward, which
	// workers would be on: the job worked on them, so none of its attempts
	// waits there to be run a second time.
	for _, c := range before.Consumers {
		if (c.Name == "rollout" || c.Name == "reward") && c.Pending+uint64(c.AckPending) != 0 {
			t.Errorf("consumer %s holds %d of the job's events (%d unacknowledged)", c.Name, c.Pending, c.AckPending)
		}
	}
	again, code := runEval(t, data, cfg, false, args...)
	if code != 0 || again.Status != "done" || again.Scored != sum.Scored || strings.Join(again.Results, ",") != strings.Join(sum.Results, ",") {
		t.Fatalf("repeated eval: exit %d, %+v; want 0, done, as %+v", code, again, sum)
	}
	after, err := readStatus(t, data, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if b, a := streamMessages(t, before, "T1"), streamMessages(t, after, "T1"); a != b {
		t.Fatalf("the repeated eval added events: %d before, %d after", b, a)
	}
	if _, code := runEval(t, data, cfg, false, "--run", "tiny", "--policy", "v2", "--suite", dir, "--attempts", "3"); code != 2 {
		t.Fatalf("other attempts on an evaluated suite: exit %d, want 2", code)
	}
	if _, code := runEval(t, data, cfg, false, "--run", "tiny", "--policy", "v9", "--suite", dir); code != 2 {
		t.Fatalf("a version the run does not have: exit %d, want 2", code)
	}
}

func streamMessages(t *testing.T, s status, name string) uint64 {
	t.Helper()
	for _, st := range s.Streams {
		if st.Name == name {
			return st.Messages
		}
	}
	t.Fatalf("no stream %s in %+v", name, s.Streams)
	return 0
}

// `t1 eval` in a data directory whose run `t1 ablate` made (its stages on
// consumers of the run's own, deleted at its end), with a configuration
// that names another suite, evaluates and does nothing else: on the log's
// shared consumers, made then for the first time, the job re-ran every
// past rollout and reward of the run under new event ids and failed the
// run's own eval.requested ("unknown suite"). Interrupted, it keeps its
// consumers and resumes on them; once the evaluation completes they are
// gone.
func TestEvalJobHandlesItsEvaluationAlone(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	data := t.TempDir()
	tiny := strings.Replace(tinyPipeline, "    sft_steps: 2\n", "    sft_steps: 0\n", 1)
	out, err := finish(t, command(t, data, writeConfig(t, tiny), "ablate", "--seeds", "1", "--base-only", "--json", "--log-level", "warn"), 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var abl struct {
		Runs []struct {
			Run    string `json:"run"`
			Status string `json:"status"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(out, &abl); err != nil || len(abl.Runs) != 1 || abl.Runs[0].Status != "completed" {
		t.Fatalf("ablate: %v %s", err, out)
	}
	run := abl.Runs[0].Run
	// Eight tasks keep the job busy past the interrupt.
	cfg := writeConfig(t, strings.Replace(tiny, "  eval:\n    tasks: 1\n", "  eval:\n    suite: wide\n    tasks: 8\n", 1))
	before, err := readStatus(t, data, cfg)
	if err != nil {
		t.Fatal(err)
	}
	jobConsumers := func(s status) []string {
		var mine []string
		for _, c := range s.consumers() {
			for _, stage := range []string{"eval", "rollout", "reward"} {
				if c == stage || strings.HasPrefix(c, stage+"_") {
					mine = append(mine, c)
				}
			}
		}
		return mine
	}
	if c := jobConsumers(before); len(c) != 0 {
		t.Fatalf("consumers before the job: %v", c)
	}

	args := []string{"--run", run, "--policy", "v1", "--suite", "wide", "--attempts", "2"}
	if sum, code := runEval(t, data, cfg, true, args...); code != 5 || sum.Status != "stopped" {
		t.Fatalf("interrupted eval: exit %d, %+v; want 5, stopped", code, sum)
	}
	mid, err := readStatus(t, data, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := jobConsumers(mid); len(c) != 3 {
		t.Fatalf("the interrupted job's consumers: %v, want its eval, rollout and reward", c)
	}
	sum, code := runEval(t, data, cfg, false, args...)
	if code != 0 || sum.Status != "completed" || sum.Tasks == 0 || sum.Scored != 2*sum.Tasks {
		t.Fatalf("resumed eval: exit %d, %+v; want 0, completed, every task scored twice", code, sum)
	}
	after, err := readStatus(t, data, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"rollout.completed", "reward.scored"} {
		if b, a := before.countOf(run, typ), after.countOf(run, typ); a != b+uint64(sum.Scored) {
			t.Errorf("%s of %s: %d before, %d after; want the evaluation's %d more alone", typ, run, b, a, sum.Scored)
		}
	}
	if n := after.countOf(run, "eval.requested.failed"); n != 0 {
		t.Errorf("%d eval.requested.failed in %s", n, run)
	}
	if c := jobConsumers(after); len(c) != 0 {
		t.Errorf("consumers after the job: %v", c)
	}
}
