package atif

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trial"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

var keepExport = flag.String("export", "", "write TestWriteRun's export of every attempt into this directory too (for harbor view)")

// WriteRun writes Harbor's job and trial layout: a job per purpose, suite
// and policy version, each trial with its config, its result carrying the
// reward and the verdict, its ATIF trajectory and its reward.txt, every
// JSON file checked against Harbor's models (testdata/harbor-models.json);
// an attempt without a reward is a trial with an exception; a purpose
// keeps only its attempts.
func TestWriteRun(t *testing.T) {
	ctx := context.Background()
	st := testinfra.FreshStore(t)
	l := testinfra.Log(t)
	task, err := harbor.NewBuilder("greet").Instruction("Say hello.\n").
		Solution("#!/bin/bash\necho hello\n").TestScript("#!/bin/bash\ntrue\n").Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := trial.PutBundle(ctx, st, "r", "greet", task); err != nil {
		t.Fatal(err)
	}
	for attempt, purpose := range []string{"train", "eval"} {
		p := attemptRows(t, st, "greet", attempt, purpose)
		if _, err := l.Publish(ctx, testinfra.RootEvent(t, "r", schemas.RolloutCompleted, purpose, p)); err != nil {
			t.Fatal(err)
		}
	}
	// Only the evaluation attempt was scored: 2 of 2 assertions.
	scored := schemas.RewardScoredPayload{TaskID: "greet", Attempt: 1, Purpose: "eval", Suite: "held-out/basic", Iteration: 1, PolicyVersion: 2,
		Reward: 2, Passed: 2, Total: 2}
	if _, err := l.Publish(ctx, testinfra.RootEvent(t, "r", schemas.RewardScored, "eval-reward", scored)); err != nil {
		t.Fatal(err)
	}
	models := harborModels(t)

	dir := t.TempDir()
	w, err := WriteRun(ctx, l, st, "r", "eval", agent.Tags(), agent.SystemPrompt, dir)
	if err != nil || w.Trials != 1 || len(w.Jobs) != 1 || w.Jobs[0] != "r-eval-held-out-basic-v2" {
		t.Fatalf("eval only: %+v, %v", w, err)
	}
	job := filepath.Join(dir, w.Jobs[0])
	checkJob(t, models, job, 1)
	trialDir := filepath.Join(job, "greet__a1-i1")
	res := checkFile(t, models, "TrialResult", filepath.Join(trialDir, "result.json"))
	rewards := res["verifier_result"].(map[string]any)["rewards"].(map[string]any)
	if rewards["reward"] != 2.0 || rewards["resolved"] != 1.0 || res["trial_name"] != "greet__a1-i1" || res["task_name"] != "greet" {
		t.Fatalf("trial result: %v", res)
	}
	if txt, err := os.ReadFile(filepath.Join(trialDir, "verifier", "reward.txt")); err != nil || string(txt) != "2\n" {
		t.Fatalf("reward.txt %q, %v", txt, err)
	}
	checkFile(t, models, "TrialConfig", filepath.Join(trialDir, "config.json"))
	checkFile(t, models, "Trajectory", filepath.Join(trialDir, "agent", "trajectory.json"))
	data, err := os.ReadFile(filepath.Join(trialDir, "agent", "trajectory.json"))
	if err != nil {
		t.Fatal(err)
	}
	var a Trajectory
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatal(err)
	}
	if a.SchemaVersion != Version || len(a.Steps) != 4 || a.Steps[0].Message != agent.SystemPrompt || a.Steps[1].Message != "Say hello.\n" ||
		len(a.Steps[2].ToolCalls) != 1 || a.Steps[2].ToolCalls[0].Arguments["command"] != "echo hello" {
		t.Fatalf("%s", data)
	}

	all := t.TempDir()
	if *keepExport != "" {
		all = *keepExport
	}
	if w, err := WriteRun(ctx, l, st, "r", "", agent.Tags(), agent.SystemPrompt, all); err != nil || w.Trials != 2 || len(w.Jobs) != 2 {
		t.Fatalf("every attempt: %+v, %v", w, err)
	}
	jr := checkJob(t, models, filepath.Join(all, "r-train-v2"), 1)
	if stats := jr["stats"].(map[string]any); stats["n_errored_trials"] != 1.0 {
		t.Fatalf("the unscored training attempt is not an errored trial: %v", stats)
	}
	unscored := checkFile(t, models, "TrialResult", filepath.Join(all, "r-train-v2", "greet__a0-i1", "result.json"))
	if unscored["verifier_result"] != nil || unscored["exception_info"] == nil {
		t.Fatalf("unscored trial: %v", unscored)
	}
	if _, err := os.Stat(filepath.Join(all, "r-train-v2", "greet__a0-i1", "verifier", "reward.txt")); !os.IsNotExist(err) {
		t.Fatalf("an unscored trial has a reward.txt: %v", err)
	}
	if w, err := WriteRun(ctx, l, st, "other", "", agent.Tags(), agent.SystemPrompt, t.TempDir()); err != nil || w.Trials != 0 {
		t.Fatalf("a run without attempts: %+v, %v", w, err)
	}
}

// checkJob checks a job folder as `harbor view` finds one (result.json with
// n_total_trials; trials are the folders whose result.json has trial_name)
// against Harbor's models, and returns its result.
func checkJob(t *testing.T, models map[string]model, job string, trials int) map[string]any {
	t.Helper()
	checkFile(t, models, "JobConfig", filepath.Join(job, "config.json"))
	res := checkFile(t, models, "JobResult", filepath.Join(job, "result.json"))
	entries, err := os.ReadDir(job)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		tr := checkFile(t, models, "TrialResult", filepath.Join(job, e.Name(), "result.json"))
		if tr["trial_name"] != e.Name() {
			t.Errorf("%s: trial_name %v", e.Name(), tr["trial_name"])
		}
		n++
	}
	if n != trials || res["n_total_trials"] != float64(trials) {
		t.Fatalf("%s: %d trial folders, n_total_trials %v, want %d", job, n, res["n_total_trials"], trials)
	}
	return res
}

// model is one of Harbor's pydantic models as testdata/harbor-models.json
// restates it.
type model struct {
	Fields   map[string]string `json:"fields"`
	Required []string          `json:"required"`
	OneOf    []string          `json:"one_of"`
	Open     bool              `json:"open"`
}

func harborModels(t *testing.T) map[string]model {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testinfra.WorkDir(), "testdata", "harbor-models.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	out := map[string]model{}
	for name, m := range raw {
		if strings.HasPrefix(name, "_") {
			continue
		}
		var x model
		if err := json.Unmarshal(m, &x); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = x
	}
	return out
}

func checkFile(t *testing.T, models map[string]model, name, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, err := range conform(models, name, v, filepath.Base(path)) {
		t.Errorf("%s: %v", path, err)
	}
	return v
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// conform lists where v departs from type typ: a model's unknown or
// missing required keys, or a value of the wrong type.
func conform(models map[string]model, typ string, v any, at string) []error {
	bad := func(format string, args ...any) []error { return []error{fmt.Errorf(at+": "+format, args...)} }
	if rest, ok := strings.CutPrefix(typ, "?"); ok {
		if v == nil {
			return nil
		}
		typ = rest
	}
	switch {
	case strings.HasPrefix(typ, "["):
		xs, ok := v.([]any)
		if !ok {
			return bad("%T, want a list", v)
		}
		var errs []error
		for i, x := range xs {
			errs = append(errs, conform(models, typ[1:len(typ)-1], x, fmt.Sprintf("%s[%d]", at, i))...)
		}
		return errs
	case strings.HasPrefix(typ, "{"):
		m, ok := v.(map[string]any)
		if !ok {
			return bad("%T, want a map", v)
		}
		var errs []error
		for k, x := range m {
			errs = append(errs, conform(models, typ[1:len(typ)-1], x, at+"."+k)...)
		}
		return errs
	}
	switch typ {
	case "any":
		return nil
	case "dict":
		if _, ok := v.(map[string]any); !ok {
			return bad("%T, want an object", v)
		}
		return nil
	case "str", "datetime", "uuid":
		s, ok := v.(string)
		switch {
		case !ok:
			return bad("%T, want a string", v)
		case typ == "uuid" && !uuidRE.MatchString(s):
			return bad("%q is not a UUID", s)
		case typ == "datetime":
			if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
				return bad("%q is not an ISO 8601 time: %v", s, err)
			}
		}
		return nil
	case "int", "float":
		f, ok := v.(float64)
		if !ok || (typ == "int" && f != math.Trunc(f)) {
			return bad("%v, want %s", v, typ)
		}
		return nil
	case "bool":
		if _, ok := v.(bool); !ok {
			return bad("%T, want a bool", v)
		}
		return nil
	}
	m, ok := models[typ]
	if !ok {
		return bad("no model %s", typ)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return bad("%T, want a %s", v, typ)
	}
	var errs []error
	for _, k := range m.Required {
		if _, ok := obj[k]; !ok {
			errs = append(errs, fmt.Errorf("%s: %s lacks required %s", at, typ, k))
		}
	}
	if len(m.OneOf) > 0 && !slices.ContainsFunc(m.OneOf, func(k string) bool { return obj[k] != nil }) {
		errs = append(errs, fmt.Errorf("%s: %s needs one of %v", at, typ, m.OneOf))
	}
	for k, x := range obj {
		ft, ok := m.Fields[k]
		if !ok {
			if !m.Open {
				errs = append(errs, fmt.Errorf("%s: %s has no field %s", at, typ, k))
			}
			continue
		}
		errs = append(errs, conform(models, ft, x, at+"."+k)...)
	}
	return errs
}

// attemptRows stores one attempt's trajectory, turns and tokens rows and
// returns the event that points at them.
func attemptRows(t *testing.T, st store.ObjectStore, taskID string, attempt int, purpose string) schemas.RolloutCompletedPayload {
	t.Helper()
	ctx := context.Background()
	p := schemas.RolloutCompletedPayload{TaskID: taskID, Attempt: attempt, Purpose: purpose, Iteration: 1, PolicyVersion: 2}
	if purpose == "eval" {
		p.Suite = "held-out/basic"
	}
	var err error
	traj := []schemas.TrajectoryRow{{Run: "r", TaskID: taskID, Attempt: int32(attempt), Iteration: 1, Purpose: purpose, PolicyVersion: 2, Termination: agent.EndComplete, Chunks: 1}}
	if p.Trajectory, err = schemas.WriteTable(ctx, st, "r", 1, traj, schemas.WriterOptions{}); err != nil {
		t.Fatal(err)
	}
	turns := []schemas.TurnRow{
		{Run: "r", TaskID: taskID, Attempt: int32(attempt), Turn: 0, Action: "<command>echo hello</command>", Observation: "$ echo hello\nhello\n"},
		{Run: "r", TaskID: taskID, Attempt: int32(attempt), Turn: 1, Action: "<task_complete/>"},
	}
	if p.TurnRows, err = schemas.WriteTable(ctx, st, "r", 1, turns, schemas.WriterOptions{}); err != nil {
		t.Fatal(err)
	}
	tokens := []schemas.TokenRow{{
		Run: "r", TaskID: taskID, Attempt: int32(attempt),
		TokenIDs:    []int32{1, 2, 10, 3, 11},
		LogProbs:    []float32{0, 0, -0.5, 0, -1},
		LossMask:    []bool{false, false, true, false, true},
		TurnOffsets: []int32{2, 4},
	}}
	if p.TokenRows, err = schemas.WriteTable(ctx, st, "r", 1, tokens, schemas.WriterOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}
