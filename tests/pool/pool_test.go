// Package pool_test grows and audits a task pool through the real event
// log, object store and sandboxes: synth.requested → synth.candidate →
// task.synthesized → task.audited, for a seed round and an extension
// round.
package pool_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/stages/audit"
	"github.com/t1pipe/t1/stages/synth"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/taskgen"
	"github.com/t1pipe/t1/trial"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

func TestSynthesiseAndAudit(t *testing.T) {
	testinfra.Long(t)
	bw := testinfra.Bubblewrap(t)
	st := testinfra.Store(t)
	l := testinfra.Log(t)
	opt := trial.Options{Backend: bw}
	rc := testinfra.Runner(2)
	testinfra.RunStage(t, l, synth.New(synth.Config{Store: st, Trial: opt}), rc)
	testinfra.RunStage(t, l, audit.NewStage(audit.StageConfig{Store: st, Trial: opt, Settings: audit.DefaultSettings()}), rc)

	publish := func(key string, p schemas.SynthRequestedPayload) {
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
			done := testinfra.Count(t, l, "t1.pool."+schemas.SynthDiscarded) + testinfra.Count(t, l, "t1.pool."+schemas.TaskAudited)
			if done != want {
				return fmt.Errorf("%d of %d candidates settled", done, want)
			}
			return nil
		}
	}

	publish("round-0", schemas.SynthRequestedPayload{Round: 0, Seeds: 3, Seed: 1})
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

	publish("round-1", schemas.SynthRequestedPayload{Round: 1, SeedIDs: accepted, PerSeed: 1, Seed: 1})
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

// A bundle that tries to escape its directory fails alone, with the
// entry named; the task next to it is audited.
func TestHostileBundleFailsAlone(t *testing.T) {
	bw := testinfra.Bubblewrap(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := testinfra.Store(t)
	l := testinfra.Log(t)
	opt := trial.Options{Backend: bw}
	rc := testinfra.Runner(2)
	testinfra.RunStage(t, l, audit.NewStage(audit.StageConfig{Store: st, Trial: opt, Settings: audit.DefaultSettings()}), rc)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"instruction.md", "../../escaped.txt"} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 2, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte("x\n"))
	}
	tw.Close()
	evil := keys.Bundle("pool", "evil")
	if _, err := st.Put(ctx, evil, bytes.NewReader(buf.Bytes()), int64(buf.Len()), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	sp, err := taskgen.Build([]taskgen.StepRef{{Name: "source.log", Seed: 1, Input: -1}, {Name: "text.filter", Seed: 2, Input: 0}})
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := sp.Task(0)
	key, sum, size, err := trial.PutBundle(ctx, st, "pool", tk.Name, tk)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []schemas.TaskSynthesizedPayload{
		{TaskID: "evil", Bundle: schemas.ObjectRef{Key: evil, Bytes: int64(buf.Len())}},
		{TaskID: tk.Name, Bundle: schemas.ObjectRef{Key: key, Bytes: size, SHA256: sum}},
	} {
		ev, err := engine.NewRootEvent("pool", schemas.TaskSynthesized, p.TaskID, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	testinfra.CheckFor(t, time.Minute, func() error {
		if a, f := testinfra.Count(t, l, "t1.pool."+schemas.TaskAudited), testinfra.Count(t, l, "t1.pool.task.synthesized.failed"); a != 1 || f != 1 {
			return fmt.Errorf("%d audited, %d failed", a, f)
		}
		return nil
	})
	var fail engine.Failure
	if err := testinfra.Events(t, l, "t1.pool.task.synthesized.failed")[0].Decode(&fail); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fail.Reason, "escaped.txt") {
		t.Fatalf("failure reason %q does not name the entry", fail.Reason)
	}
}
