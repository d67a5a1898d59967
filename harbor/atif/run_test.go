package atif

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trial"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

// WriteRun follows each rollout.completed event of the run to its rows
// and its task's bundle and writes one file per attempt, named for it;
// a purpose keeps only its attempts.
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

	dir := t.TempDir()
	n, err := WriteRun(ctx, l, st, "r", "eval", agent.Tags(), agent.SystemPrompt, dir)
	if err != nil || n != 1 {
		t.Fatalf("eval only: %d files, %v", n, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "greet-a1-i1-v2-eval.json"))
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
	if n, err := WriteRun(ctx, l, st, "r", "", agent.Tags(), agent.SystemPrompt, all); err != nil || n != 2 {
		t.Fatalf("every attempt: %d files, %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(all, "greet-a0-i1-v2-train.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteRun(ctx, l, st, "other", "", agent.Tags(), agent.SystemPrompt, t.TempDir()); err != nil {
		t.Fatalf("a run without attempts: %v", err)
	}
}

// attemptRows stores one attempt's trajectory, turns and tokens rows and
// returns the event that points at them.
func attemptRows(t *testing.T, st store.ObjectStore, taskID string, attempt int, purpose string) schemas.RolloutCompletedPayload {
	t.Helper()
	ctx := context.Background()
	p := schemas.RolloutCompletedPayload{TaskID: taskID, Attempt: attempt, Purpose: purpose, Iteration: 1, PolicyVersion: 2}
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
