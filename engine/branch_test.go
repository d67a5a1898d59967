package engine

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestBranchReplaysIntoANewRun(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	for _, k := range []string{"1", "2", "bad"} {
		publishRoot(t, l, "src", "x.in", k, map[string]string{"k": k})
	}
	publishRoot(t, l, "other", "x.in", "9", map[string]string{"k": "9"})
	var runs []string
	st := NewStage("doubler", []string{"x.in"}, func(_ context.Context, ev Event, out Emitter) error {
		var p map[string]string
		if err := ev.Decode(&p); err != nil {
			return err
		}
		runs = append(runs, ev.Run)
		if p["k"] == "bad" {
			return Permanent(errors.New("bad input"))
		}
		_, err := out.Emit("x.out", p)
		return err
	})
	res, err := l.Branch(context.Background(), st, "src", "branch", ReplayFrom{}, "cfg", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Inputs != 3 || res.Emitted != 2 || res.Failed != 1 {
		t.Fatalf("%+v", res)
	}
	for _, r := range runs {
		if r != "branch" {
			t.Fatalf("the handler saw run %q", r)
		}
	}
	if n := len(events(t, l, "t1.branch.x.out")); n != 2 {
		t.Fatalf("%d outputs in the branch", n)
	}
	if n := len(events(t, l, "t1.branch.x.in.failed")); n != 1 {
		t.Fatalf("%d failed events in the branch", n)
	}
	if n := len(events(t, l, "t1.src.>")); n != 3 {
		t.Fatalf("the source run changed: %d events", n)
	}
	// Again: derived ids, so nothing is published twice.
	if _, err := l.Branch(context.Background(), st, "src", "branch", ReplayFrom{}, "cfg", nil); err != nil {
		t.Fatal(err)
	}
	if n := len(events(t, l, "t1.branch.x.out")); n != 2 {
		t.Fatalf("a second branch replay duplicated outputs: %d", n)
	}
	if _, err := l.Branch(context.Background(), st, "src", "src", ReplayFrom{}, "cfg", nil); err == nil {
		t.Fatal("branched a run into itself")
	}
}

// A keep function picks the inputs handed over.
func TestBranchKeepsWhatItIsTold(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	for _, k := range []string{"1", "2", "3"} {
		publishRoot(t, l, "src", "x.in", k, map[string]string{"k": k})
	}
	var seen []string
	st := NewStage("echo", []string{"x.in"}, func(_ context.Context, ev Event, out Emitter) error {
		var p map[string]string
		if err := ev.Decode(&p); err != nil {
			return err
		}
		seen = append(seen, p["k"])
		_, err := out.Emit("x.out", p)
		return err
	})
	keep := func(ev Event) bool {
		var p map[string]string
		return ev.Decode(&p) == nil && p["k"] != "2"
	}
	res, err := l.Branch(context.Background(), st, "src", "b", ReplayFrom{}, "cfg", keep)
	if err != nil {
		t.Fatal(err)
	}
	if res.Inputs != 2 || res.Emitted != 2 || len(seen) != 2 || seen[0] != "1" || seen[1] != "3" {
		t.Fatalf("%+v, handed %v", res, seen)
	}
}

// Lineage follows run.started's parent field up to a run without one, and
// refuses a loop; LastEvent is the run's latest event.
func TestLineage(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	ctx := context.Background()
	publishRoot(t, l, "root", RunStartedType, "s", map[string]any{"seed": 1})
	publishRoot(t, l, "child", RunStartedType, "s", map[string]any{"parent": "root"})
	publishRoot(t, l, "grandchild", RunStartedType, "s", map[string]any{"parent": "child"})
	publishRoot(t, l, "loop-a", RunStartedType, "s", map[string]any{"parent": "loop-b"})
	publishRoot(t, l, "loop-b", RunStartedType, "s", map[string]any{"parent": "loop-a"})
	last := publishRoot(t, l, "child", "x.in", "1", map[string]any{})
	for run, want := range map[string][]string{"grandchild": {"grandchild", "child", "root"}, "root": {"root"}, "unstarted": {"unstarted"}} {
		got, err := l.Lineage(ctx, run)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("lineage of %s: %v %v, want %v", run, got, err, want)
		}
	}
	if _, err := l.Lineage(ctx, "loop-a"); err == nil || !IsPermanent(err) {
		t.Errorf("a looping lineage: %v", err)
	}
	if _, err := l.Lineage(ctx, "bad run"); err == nil {
		t.Error("an invalid run id has a lineage")
	}
	ev, ok, err := l.LastEvent(ctx, "child")
	if err != nil || !ok || ev.ID != last.ID {
		t.Errorf("last event of child: %+v %v %v, want %s", ev, ok, err, last.ID)
	}
	if _, ok, err := l.LastEvent(ctx, "nothing"); ok || err != nil {
		t.Errorf("last event of a run without events: %v %v", ok, err)
	}
}
