// Package pool_test grows and audits a task pool through the real event
// log, object store and sandboxes: synth.requested → synth.candidate →
// task.synthesized → task.audited, for a seed round and an extension
// round.
package pool_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/stages/audit"
	"github.com/t1pipe/t1/stages/synth"
	"github.com/t1pipe/t1/trial"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

func TestSynthesiseAndAudit(t *testing.T) {
	bw := &sandbox.Bubblewrap{}
	if err := bw.Available(); err != nil {
		t.Skipf("bubblewrap unavailable (make setup installs it): %v", err)
	}
	st := testinfra.Store(t)
	l := testinfra.Log(t)
	opt := trial.Options{Backend: bw}
	rc := engine.RunnerConfig{Concurrency: 2, AckWait: 30 * time.Second, MaxDeliver: 3, Backoff: []time.Duration{100 * time.Millisecond}}
	testinfra.RunStage(t, l, synth.New(synth.Config{Store: st, Trial: opt}), rc)
	testinfra.RunStage(t, l, audit.NewStage(audit.StageConfig{Store: st, Trial: opt, Audit: audit.DefaultConfig()}), rc)

	publish := func(key string, p synth.RequestedPayload) {
		ev, err := engine.NewRootEvent("pool", schemas.SynthRequested, key, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	settled := func(want int) func() error {
		return func() error {
			done := testinfra.Count(t, l, "t1.pool."+synth.Discarded) + testinfra.Count(t, l, "t1.pool."+schemas.TaskAudited)
			if done != want {
				return fmt.Errorf("%d of %d candidates settled", done, want)
			}
			return nil
		}
	}

	publish("round-0", synth.RequestedPayload{SynthRequestedPayload: schemas.SynthRequestedPayload{Round: 0}, Seeds: 3, Seed: 1})
	testinfra.CheckFor(t, 2*time.Minute, settled(3))

	var accepted []string
	for _, ev := range testinfra.Events(t, l, "t1.pool."+schemas.TaskAudited) {
		var p schemas.TaskAuditedPayload
		if err := ev.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Decision == "accept" {
			accepted = append(accepted, p.TaskID)
		} else {
			t.Logf("%s rejected: %v", p.TaskID, p.RejectReasons)
		}
	}
	if len(accepted) == 0 {
		t.Fatal("no seed task was accepted")
	}
	rows, err := schemas.ReadRows[schemas.TaskRow](context.Background(), st, mustRef(t, l).Key, nil)
	if err != nil || len(rows) != 1 || !rows[0].SolutionPassed {
		t.Fatalf("tasks row: %+v, %v", rows, err)
	}

	publish("round-1", synth.RequestedPayload{SynthRequestedPayload: schemas.SynthRequestedPayload{Round: 1, SeedIDs: accepted, PerSeed: 1}, Seed: 1})
	testinfra.CheckFor(t, 2*time.Minute, settled(3+len(accepted)))
	children := 0
	for _, ev := range testinfra.Events(t, l, "t1.pool."+schemas.TaskSynthesized) {
		var p schemas.TaskSynthesizedPayload
		if err := ev.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Round == 1 {
			children++
			if p.ParentID == "" || p.Steps < 3 {
				t.Errorf("child %s: parent %q, %d steps", p.TaskID, p.ParentID, p.Steps)
			}
		}
	}
	if children == 0 {
		t.Fatal("no child survived execution")
	}
	if n := testinfra.Count(t, l, "t1.pool.*.failed"); n != 0 {
		t.Fatalf("%d failed events", n)
	}
}

func mustRef(t *testing.T, l *engine.Log) schemas.FileRef {
	t.Helper()
	evs := testinfra.Events(t, l, "t1.pool."+schemas.TaskSynthesized)
	if len(evs) == 0 {
		t.Fatal("no task.synthesized")
	}
	var p schemas.TaskSynthesizedPayload
	if err := evs[0].Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p.Task
}
