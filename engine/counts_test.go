package engine

import (
	"context"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"
)

// Counts come from the streams' per-subject totals, by run and type, for
// one run or every run; dead letters by the type of the event that died.
func TestCountsRunsAndHasEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	for i, typ := range []string{"demo.in", "demo.in", "demo.out", "demo.in.failed"} {
		publishRoot(t, l, "r1", typ, string(rune('a'+i)), item{i})
	}
	publishRoot(t, l, "r10", "demo.in", "a", item{0})
	publishRoot(t, l, "r2", "demo.out", "a", item{0})
	// A raw message that is no event is not counted.
	if _, err := l.JetStream().Publish(ctx, "t1.stray", nil); err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"t1dlq.r1.demo.in", "t1dlq.r1.demo.in", "t1dlq.r2.demo.out"} {
		if _, err := l.JetStream().PublishMsg(ctx, &nats.Msg{Subject: subj, Header: nats.Header{}}); err != nil {
			t.Fatal(err)
		}
	}

	r1, err := l.EventCounts(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Counts{"r1": {"demo.in": 2, "demo.out": 1, "demo.in.failed": 1}}); !reflect.DeepEqual(r1, want) || r1.Total() != 4 {
		t.Fatalf("r1 counts %v, want %v", r1, want)
	}
	all, err := l.EventCounts(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all["r10"]["demo.in"] != 1 || all["r2"]["demo.out"] != 1 || all.Total() != 6 {
		t.Fatalf("every run's counts %v", all)
	}
	none, err := l.EventCounts(ctx, "r3")
	if err != nil || len(none) != 0 {
		t.Fatalf("run without events: %v, %v", none, err)
	}
	if _, err := l.EventCounts(ctx, "r*"); err == nil {
		t.Fatal("counted a run id with a wildcard")
	}

	dead, err := l.DeadLetterCounts(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Counts{"r1": {"demo.in": 2}}); !reflect.DeepEqual(dead, want) {
		t.Fatalf("r1 dead letters %v, want %v", dead, want)
	}
	allDead, err := l.DeadLetterCounts(ctx, "")
	if err != nil || allDead.Total() != 3 || allDead["r2"]["demo.out"] != 1 {
		t.Fatalf("every run's dead letters %v, %v", allDead, err)
	}

	runs, err := l.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"r1", "r10", "r2"}; !reflect.DeepEqual(runs, want) {
		t.Fatalf("runs %v, want %v", runs, want)
	}

	for _, c := range []struct {
		run, typ string
		want     bool
	}{{"r1", "demo.out", true}, {"r2", "demo.in", false}, {"r3", "demo.out", false}} {
		got, err := l.HasEvent(ctx, c.run, c.typ)
		if err != nil || got != c.want {
			t.Errorf("HasEvent(%s, %s) = %v, %v; want %v", c.run, c.typ, got, err, c.want)
		}
	}
}
