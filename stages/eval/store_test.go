package eval

import (
	"path/filepath"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

const storeRun = "ev"

// suiteDir is a suite of two Harbor task directories.
func suiteDir(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, name := range []string{"greet", "part"} {
		tk, err := harbor.NewBuilder(name).Instruction("Write `" + name + "` to `/app/out.txt`.\n").
			Metadata(harbor.Metadata{Difficulty: "easy", Category: "text-processing"}).
			Solution("#!/bin/bash\necho " + name + " > /app/out.txt\n").TestScript("#!/bin/bash\ntrue\n").Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := tk.Write(filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func faultStage(t *testing.T, st store.ObjectStore, dir string) engine.Stage {
	return NewStage(StageConfig{Log: testinfra.Log(t), Store: st, Suites: map[string]Suite{"dirs": {Dirs: []string{dir}}}, TempDir: t.TempDir()})
}

// Every store call of materialising a suite, and of writing its results,
// failing fails the delivery retryably; the retry fans out the same
// attempts, or completes the same evaluation.
func TestStoreFaults(t *testing.T) {
	dir := suiteDir(t)
	request := testinfra.RootEvent(t, storeRun, schemas.EvalRequested, "eval", schemas.EvalRequestedPayload{Suite: "dirs", PolicyVersion: 0, Attempts: 1})
	t.Run("request", func(t *testing.T) {
		want := testinfra.StoreFaults{
			Stage: func(t *testing.T, st store.ObjectStore) engine.Stage { return faultStage(t, st, dir) },
			Event: request,
		}.Run(t)
		if len(want) != 2 {
			t.Fatalf("fanned out %v", want)
		}
	})
	t.Run("complete", func(t *testing.T) {
		dts, err := LoadDirs([]string{dir})
		if err != nil {
			t.Fatal(err)
		}
		var scores []engine.Event
		for i, dt := range dts {
			scores = append(scores, testinfra.RootEvent(t, storeRun, schemas.RewardScored, dt.ID, schemas.RewardScoredPayload{
				TaskID: dt.ID, Purpose: "eval", Suite: "dirs", Reward: float64(i), Passed: i, Total: 1,
			}))
		}
		// The last attempt's score completes the evaluation.
		want := testinfra.StoreFaults{
			Stage: func(t *testing.T, st store.ObjectStore) engine.Stage {
				s := faultStage(t, st, dir)
				testinfra.Feed(t, s, testinfra.Feed(t, s, request)...)
				if got := testinfra.Feed(t, s, scores[:len(scores)-1]...); len(got) != 0 {
					t.Fatalf("completed early: %v", got)
				}
				return s
			},
			Event: scores[len(scores)-1],
		}.Run(t)
		if len(want) != 1 || want[0].Type != schemas.EvalCompleted {
			t.Fatalf("completed with %v", want)
		}
	})
}
