// Package pipeline_test runs the pipeline's stages together on the real
// event log, store and sandboxes, driven by control from run.started.
package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/internal/testinfra/pipelinetest"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/stages/eval"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

const run = "tiny"

// From run.started to the first batch: synthesis rounds, audit, the sealed
// pool, rollouts and rewards of iteration 0, and its batch manifest.
func TestControlDrivesToTheFirstBatch(t *testing.T) {
	testinfra.Long(t)
	cfg := pipelinetest.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st := testinfra.Store(t)
	l := testinfra.Log(t)

	c := &cfg.Stages.Control
	c.Seeds, c.Rounds, c.PoolTarget, c.Attempts, c.MaxTurns = 3, 2, 4, 1, 3
	cfg.Stages.Eval = eval.Settings{Suite: "builtin", Tasks: 2, Seed: 99, Attempts: 2}
	// Control and eval are Serial: their runners handle one event at a
	// time whatever the configured concurrency.
	pipelinetest.Run(t, cfg, l, st, testinfra.Runner(2), []string{"control", "synth", "audit", "rollout", "reward", "eval"})

	ev, err := engine.NewRootEvent(run, schemas.RunStarted, "start", schemas.RunStartedPayload{Seed: 7, Iterations: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	testinfra.CheckFor(t, 3*time.Minute, func() error {
		if n := testinfra.Count(t, l, "t1."+run+"."+schemas.EvalCompleted); n != 1 {
			return fmt.Errorf("baseline evaluation not complete (%d eval attempts scored)", testinfra.Count(t, l, "t1."+run+"."+schemas.RewardScored))
		}
		if n := testinfra.Count(t, l, "t1."+run+"."+schemas.BatchReady); n != 1 {
			return fmt.Errorf("no batch yet: %d audited, %d scored, %d failed, run failed %d",
				testinfra.Count(t, l, "t1."+run+"."+schemas.TaskAudited), testinfra.Count(t, l, "t1."+run+"."+schemas.RewardScored),
				testinfra.Count(t, l, "t1."+run+".*.failed"), testinfra.Count(t, l, "t1."+run+"."+schemas.RunFailed))
		}
		return nil
	})
	if n := testinfra.Count(t, l, "t1."+run+"."+schemas.PoolSealed); n != 1 {
		t.Fatalf("%d pool.sealed events", n)
	}
	var sealed schemas.PoolSealedPayload
	if err := testinfra.Events(t, l, "t1."+run+"."+schemas.PoolSealed)[0].Decode(&sealed); err != nil {
		t.Fatal(err)
	}
	if sealed.Tasks != len(sealed.TaskIDs) || sealed.Tasks+sealed.Excluded != testinfra.Count(t, l, "t1."+run+"."+schemas.TaskAudited)-countRejected(t, l) {
		t.Fatalf("pool %+v", sealed)
	}
	var b schemas.BatchReadyPayload
	if err := testinfra.Events(t, l, "t1."+run+"."+schemas.BatchReady)[0].Decode(&b); err != nil {
		t.Fatal(err)
	}
	m, err := schemas.ReadManifest(ctx, st, b.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if m.Attempts == 0 {
		t.Fatalf("manifest holds %d attempts", m.Attempts)
	}
	// Control decided each thing once.
	for _, typ := range []string{schemas.PoolSealed, schemas.BatchReady} {
		if n := testinfra.Count(t, l, "t1."+run+"."+typ); n != 1 {
			t.Fatalf("%d %s events", n, typ)
		}
	}
	var e schemas.EvalCompletedPayload
	if err := testinfra.Events(t, l, "t1."+run+"."+schemas.EvalCompleted)[0].Decode(&e); err != nil {
		t.Fatal(err)
	}
	if e.PolicyVersion != 0 || e.Tasks == 0 || e.Attempts != 2*e.Tasks || len(e.Results) != 1 || len(e.ByCategory) == 0 {
		t.Fatalf("eval.completed %+v", e)
	}
	rows, err := schemas.ReadRows[schemas.EvalResultRow](ctx, st, e.Results[0].Key, &e.Results[0])
	if err != nil || len(rows) != e.Attempts {
		t.Fatalf("%d eval rows for %d attempts (%v)", len(rows), e.Attempts, err)
	}
	if n := testinfra.Count(t, l, "t1."+run+"."+schemas.RolloutRequested); n != int(m.Attempts)+e.Attempts {
		t.Fatalf("%d rollouts requested, %d in the batch and %d evaluated", n, m.Attempts, e.Attempts)
	}
}

func countRejected(t *testing.T, l *engine.Log) int {
	n := 0
	for _, ev := range testinfra.Events(t, l, "t1."+run+"."+schemas.TaskAudited) {
		var p schemas.TaskAuditedPayload
		if err := ev.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Decision != "accept" {
			n++
		}
	}
	return n
}
