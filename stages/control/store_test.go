package control

import (
	"context"
	"os"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/internal/testinfra/unstored"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trial"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

const storeRun = "ct"

// Every store call of sealing the pool (the bundles de-duplicated, the
// tasks rows read) and of writing the batch manifest failing fails the
// delivery retryably; the retry decides as the healthy run did.
func TestStoreFaults(t *testing.T) {
	ctx := context.Background()
	tk, err := harbor.NewBuilder("t1").Instruction("Write `hi` to `/app/out.txt`.\n").
		Solution("#!/bin/bash\necho hi > /app/out.txt\n").TestScript("#!/bin/bash\ntrue\n").Build()
	if err != nil {
		t.Fatal(err)
	}
	rows := []schemas.TaskRow{{Run: storeRun, TaskID: "t1", Source: "seed", Category: "text-processing", SolutionPassed: true}}
	setup := func(t *testing.T, st store.ObjectStore) (schemas.FileRef, schemas.ObjectRef) {
		ref, err := schemas.WriteTable(ctx, st, storeRun, 0, rows, schemas.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		key, sum, size, err := trial.PutBundle(ctx, st, storeRun, "t1", tk)
		if err != nil {
			t.Fatal(err)
		}
		return ref, schemas.ObjectRef{Key: key, Bytes: size, SHA256: sum}
	}
	taskRef, bundle := setup(t, testinfra.Store(t))

	c := Config{Settings: DefaultSettings()}
	c.Seeds, c.Rounds, c.PoolTarget, c.Iterations, c.Attempts, c.EvalBaseline, c.EvalSuite, c.SFTSteps = 1, 1, 1, 1, 1, false, "", 0
	c.MaxSimilarity = 0.9
	c.Model = schemas.ModelDims{Vocab: 512, Layers: 2, TopK: 2, Experts: 8}
	newStage := func(t *testing.T, st store.ObjectStore) engine.Stage {
		return NewStage(StageConfig{Log: testinfra.Log(t), Store: st, Config: c})
	}
	synthesis := []engine.Event{
		testinfra.RootEvent(t, storeRun, schemas.RunStarted, "start", schemas.RunStartedPayload{Seed: 1}),
		testinfra.RootEvent(t, storeRun, schemas.SynthRequested, "round-0", schemas.SynthRequestedPayload{Round: 0, Seeds: 1}),
		testinfra.RootEvent(t, storeRun, schemas.TaskSynthesized, "t1", schemas.TaskSynthesizedPayload{TaskID: "t1", Task: taskRef, Bundle: bundle}),
	}
	audited := testinfra.RootEvent(t, storeRun, schemas.TaskAudited, "t1", schemas.TaskAuditedPayload{TaskID: "t1", Decision: "accept"})
	storeSetup := func(t *testing.T, st store.ObjectStore) { setup(t, st) }

	var sealed []engine.Event
	t.Run("seal", func(t *testing.T) {
		sealed = testinfra.StoreFaults{
			Setup: storeSetup,
			Stage: func(t *testing.T, st store.ObjectStore) engine.Stage {
				s := newStage(t, st)
				testinfra.Feed(t, s, synthesis...)
				return s
			},
			Event: audited,
		}.Run(t)
		var p schemas.PoolSealedPayload
		if len(sealed) != 1 || sealed[0].Decode(&p) != nil || p.Categories["text-processing"] != 1 {
			t.Fatalf("sealed %v", sealed)
		}
	})
	if t.Failed() {
		return
	}
	t.Run("batch", func(t *testing.T) {
		done := testinfra.RootEvent(t, storeRun, schemas.RolloutCompleted, "t1/0", schemas.RolloutCompletedPayload{
			TaskID: "t1", Purpose: "train", Tokens: 5,
			TokenRows: unstored.Ref(storeRun, schemas.TokensTable, "tokens"), RoutingRows: unstored.Ref(storeRun, schemas.RoutingTable, "routing"),
			Trajectory: unstored.Ref(storeRun, schemas.TrajectoriesTable, "trajectory"),
		})
		scored := testinfra.RootEvent(t, storeRun, schemas.RewardScored, "t1/0", schemas.RewardScoredPayload{
			TaskID: "t1", Purpose: "train", Reward: 1, Rewards: unstored.Ref(storeRun, schemas.RewardsTable, "rewards"),
		})
		want := testinfra.StoreFaults{
			Setup: storeSetup,
			Stage: func(t *testing.T, st store.ObjectStore) engine.Stage {
				s := newStage(t, st)
				testinfra.Feed(t, s, synthesis...)
				// The pool seals, the iteration's one attempt is requested
				// and completes.
				starts := testinfra.Feed(t, s, testinfra.Feed(t, s, audited)...)
				if len(starts) != 2 || starts[1].Type != schemas.RolloutRequested {
					t.Fatalf("iteration 0 started with %v", starts)
				}
				testinfra.Feed(t, s, append(starts, done)...)
				return s
			},
			Event: scored,
		}.Run(t)
		if len(want) != 1 || want[0].Type != schemas.BatchReady {
			t.Fatalf("decided %v", want)
		}
	})
}
