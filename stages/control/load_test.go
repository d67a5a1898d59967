package control

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
)

// publish stores a root event of run and returns it as read back.
func publish(t *testing.T, l *engine.Log, run, typ, key string, payload any) engine.Event {
	t.Helper()
	ev, err := engine.NewRootEvent(run, typ, key, payload)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err = l.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// history publishes a run whose synthesis round 0 has settled with
// tasks accepted, and returns the events control folds.
func history(t *testing.T, l *engine.Log, run string, seed uint64, tasks int) []engine.Event {
	t.Helper()
	evs := []engine.Event{
		publish(t, l, run, schemas.RunStarted, "start", schemas.RunStartedPayload{Seed: seed}),
		publish(t, l, run, schemas.SynthRequested, "round-0", schemas.SynthRequestedPayload{Round: 0, Seeds: tasks}),
	}
	for i := range tasks {
		id := fmt.Sprintf("%s-t%d", run, i)
		evs = append(evs, publish(t, l, run, schemas.SynthCandidate, id, schemas.SynthCandidatePayload{Round: 0}))
		// Not consumed by control: must not be read.
		publish(t, l, run, schemas.CriticUpdated, id, struct{}{})
		evs = append(evs, publish(t, l, run, schemas.TaskAudited, id, schemas.TaskAuditedPayload{TaskID: id, Round: 0, Decision: "accept"}))
	}
	return evs
}

// With other runs in the log, control folds a run from that run's own
// events alone, once, and decides what the fold of that run calls for.
func TestLoadReadsOnlyTheRun(t *testing.T) {
	ctx := context.Background()
	l := testinfra.Log(t)
	others := history(t, l, "other", 9, 30)
	mine := history(t, l, "mine", 5, 3)
	history(t, l, "third", 1, 30)

	byRun := map[string]int{}
	hooked := l.WithReadHook(func(ev engine.Event) { byRun[ev.Run]++ })
	c := testConfig()
	c.Rounds, c.PoolTarget, c.PerSeed = 3, 100, 2
	s := NewStage(StageConfig{Log: hooked, Config: c})

	// What a fold of this run's events alone decides.
	want := newRunState("r")
	for _, ev := range mine {
		want.apply(ev)
	}
	wantOut := decide(t, &stage{cfg: StageConfig{Config: c}}, want)
	if len(wantOut) != 1 || wantOut[0].Type != schemas.SynthRequested {
		t.Fatalf("fold of the run decides %v", wantOut)
	}

	var rec recorder
	if err := s.Handle(ctx, mine[len(mine)-1], &rec); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(byRun, map[string]int{"mine": len(mine)}) {
		t.Fatalf("read %v, want only the run's %d consumed events", byRun, len(mine))
	}
	if len(rec.evs) != 1 || rec.evs[0].Type != wantOut[0].Type || string(rec.evs[0].Payload) != string(wantOut[0].Payload) {
		t.Fatalf("decided %v, want %v", rec.evs, wantOut)
	}

	// The next event of the run is folded as it comes: nothing is read.
	next := publish(t, l, "mine", schemas.SynthCandidate, "round-1", schemas.SynthCandidatePayload{Round: 1})
	if err := s.Handle(ctx, next, &recorder{}); err != nil {
		t.Fatal(err)
	}
	if byRun["mine"] != len(mine) {
		t.Fatalf("the run was read again: %v", byRun)
	}
	// Another run's first event reads that run alone.
	if err := s.Handle(ctx, others[0], &recorder{}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(byRun, map[string]int{"mine": len(mine), "other": len(others)}) {
		t.Fatalf("read %v after the other run's first event", byRun)
	}
}
