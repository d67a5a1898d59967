package branch_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
)

// tinyYAML is the smallest whole run the command makes: two seed tasks,
// one iteration of one attempt each, one evaluation task, reward scale 3.
const tinyYAML = `run:
  id: tiny
stages:
  control:
    pool_target: 2
    rounds: 1
    seeds: 2
    iterations: 1
    attempts: 1
    max_turns: 2
    sft_steps: 0
  eval:
    tasks: 1
    rounds: 0
    attempts: 1
  rollout:
    max_new_tokens: 24
    context: 512
  reward:
    scale: 3
training:
  warmup:
    steps: 1
`

// commandSetup builds t1 and writes yaml as the configuration of an empty
// data directory, for a whole-run test of the command.
func commandSetup(t *testing.T, yaml string) (bin, data, cfg string) {
	t.Helper()
	testinfra.Long(t)
	testinfra.Bubblewrap(t)
	bin, err := testinfra.BuildT1(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg = filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return bin, t.TempDir(), cfg
}

// `t1 replay --continue` re-scores a finished run's first iteration into a
// branch at an overridden scale and runs the branch to its end in the
// same process; `t1 runs` lists both runs with the branch's lineage.
func TestReplayContinueCommand(t *testing.T) {
	t.Parallel()
	bin, data, cfg := commandSetup(t, tinyYAML)
	t1 := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--data", data, "--config", cfg, "--json", "--log-level", "warn")...)
		cmd.Dir = t.TempDir()
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("t1 %v: %v\n%s\n%s", args, err, out, stderr)
		}
		return out
	}
	var run struct{ Status string }
	if out := t1("run"); json.Unmarshal(out, &run) != nil || run.Status != "completed" {
		t.Fatalf("run: %s", out)
	}
	var rep struct {
		Inputs, Emitted, Failed int
		Branch                  *struct {
			Status string
			Events map[string]uint64
		}
	}
	out := t1("replay", "--stage", "reward", "--run", "tiny", "--into", "tiny-fixed", "--continue", "--set", "reward_scale=2")
	if err := json.Unmarshal(out, &rep); err != nil || rep.Inputs == 0 || rep.Failed != 0 || rep.Branch == nil || rep.Branch.Status != "completed" {
		t.Fatalf("replay --continue: %v %s", err, out)
	}
	if e := rep.Branch.Events; e["policy.updated"] != 1 || e["eval.completed"] != 1 || e["run.completed"] != 1 || e["rollout.completed"] != 1 {
		t.Errorf("the branch's events: %v", e)
	}
	var runs []struct {
		Run, Status, Parent string
		Branch              *struct {
			Stage     string
			Continue  bool
			Overrides []struct{ Key, Value, Parent string }
		}
		Iterations     int
		PolicyVersions []int64 `json:"policy_versions"`
	}
	out = t1("runs")
	if err := json.Unmarshal(out, &runs); err != nil || len(runs) != 2 {
		t.Fatalf("runs: %v %s", err, out)
	}
	b := runs[1]
	if runs[0].Run != "tiny" || runs[0].Status != "completed" || b.Run != "tiny-fixed" || b.Status != "completed" || b.Parent != "tiny" ||
		b.Branch == nil || !b.Branch.Continue || b.Branch.Stage != "reward" || len(b.Branch.Overrides) != 1 ||
		b.Branch.Overrides[0].Value != "2" || b.Branch.Overrides[0].Parent != "3" || b.Iterations != 1 || len(b.PolicyVersions) != 1 {
		t.Errorf("runs: %s", out)
	}
	// A branch that runs more iterations than its parent shows its own
	// count in its progress.
	more := exec.Command(bin, "replay", "--stage", "reward", "--run", "tiny", "--into", "tiny-more", "--continue", "--set", "iterations=2",
		"--data", data, "--config", cfg, "--log-level", "warn")
	more.Dir = t.TempDir()
	progress, err := more.CombinedOutput()
	if err != nil || !strings.Contains(string(progress), "iteration 2/2") || strings.Contains(string(progress), "/1)") {
		t.Errorf("replay --set iterations=2: %v\n%s", err, progress)
	}
}

// A branch continued in a data directory whose run t1 ablate made (its
// stages on consumers of that run's own) handles the branch's events
// alone: on the log's shared consumers, made then for the first time, the
// branch's process was handed the parent's whole history and redid every
// rollout, critic and actor update of it before the branch's first.
func TestReplayContinueAfterAblate(t *testing.T) {
	t.Parallel()
	bin, data, cfg := commandSetup(t, tinyYAML+"variants: []\n")
	t1 := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--data", data, "--config", cfg, "--log-level", "info")...)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("t1 %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	t1("ablate", "--seeds", "1", "--base-only")
	out := t1("replay", "--stage", "reward", "--run", "tiny-s1", "--into", "tiny-s1-b", "--continue")
	for _, msg := range []string{`msg="critic updated" run=tiny-s1 `, `msg="policy updated" run=tiny-s1 `} {
		if strings.Contains(out, msg) {
			t.Errorf("the branch's process handled its parent's events again (%s):\n%s", msg, out)
		}
	}
	if !strings.Contains(out, `msg="policy updated" run=tiny-s1-b `) || !strings.Contains(out, "completed") {
		t.Errorf("the branch did not train and complete:\n%s", out)
	}
}
