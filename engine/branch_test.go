package engine

import (
	"context"
	"errors"
	"testing"
)

func TestBranchReplaysIntoANewRun(t *testing.T) {
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
	res, err := l.Branch(context.Background(), st, "src", "branch", ReplayFrom{}, "cfg")
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
	if _, err := l.Branch(context.Background(), st, "src", "branch", ReplayFrom{}, "cfg"); err != nil {
		t.Fatal(err)
	}
	if n := len(events(t, l, "t1.branch.x.out")); n != 2 {
		t.Fatalf("a second branch replay duplicated outputs: %d", n)
	}
	if _, err := l.Branch(context.Background(), st, "src", "src", ReplayFrom{}, "cfg"); err == nil {
		t.Fatal("branched a run into itself")
	}
}
