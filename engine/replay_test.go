package engine

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func TestReplayFromSeqAndTime(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	var mid Event
	var midTime time.Time
	for i := range 10 {
		if i == 5 {
			time.Sleep(20 * time.Millisecond)
			midTime = time.Now()
		}
		ev := publishRoot(t, l, "r1", "demo.in", fmt.Sprint(i), item{i})
		if i == 5 {
			mid = ev
		}
	}
	collect := func(from ReplayFrom) []int {
		var ns []int
		if err := l.Replay(context.Background(), []string{"t1.r1.demo.in"}, from, func(ev Event) error {
			var it item
			if err := ev.Decode(&it); err != nil {
				return err
			}
			ns = append(ns, it.N)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return ns
	}
	if got := collect(ReplayFrom{Seq: mid.Seq}); !reflect.DeepEqual(got, []int{5, 6, 7, 8, 9}) {
		t.Fatalf("from seq: %v", got)
	}
	if got := collect(ReplayFrom{Time: midTime}); !reflect.DeepEqual(got, []int{5, 6, 7, 8, 9}) {
		t.Fatalf("from time: %v", got)
	}
	if got := collect(ReplayFrom{Seq: 1000}); len(got) != 0 {
		t.Fatalf("past the end: %v", got)
	}
}

// ReplayRun reads the run's events of the given types and nothing else,
// in log order; the read hook sees exactly what was read.
func TestReplayRunReadsOnlyItsRun(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	var want []string
	for i := range 6 {
		for _, run := range []string{"r1", "r2", "r10"} {
			for _, typ := range []string{"demo.in", "demo.out", "demo.in.failed"} {
				ev := publishRoot(t, l, run, typ, fmt.Sprint(i), item{i})
				if run == "r1" && typ != "demo.out" {
					want = append(want, ev.ID)
				}
			}
		}
	}
	var read []Event
	hooked := l.WithReadHook(func(ev Event) { read = append(read, ev) })
	var got []string
	types := []string{"demo.in.failed", "demo.in", "demo.in"} // in any order, repeated
	if err := hooked.ReplayRun(context.Background(), "r1", types, func(ev Event) error {
		got = append(got, ev.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed %d events %v, want %d %v", len(got), got, len(want), want)
	}
	if len(read) != len(want) {
		t.Fatalf("read %d events, want %d", len(read), len(want))
	}
	all := 0
	if err := hooked.ReplayRun(context.Background(), "r2", nil, func(ev Event) error {
		if ev.Run != "r2" {
			t.Errorf("event %s of run %s in r2's replay", ev.ID, ev.Run)
		}
		all++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if all != 18 {
		t.Fatalf("every type of r2: %d events, want 18", all)
	}
	if err := l.ReplayRun(context.Background(), "r1.>", nil, func(Event) error { return nil }); err == nil {
		t.Fatal("a run id with wildcards replayed")
	}
	// The hook belongs to the handle it was set on.
	before := len(read)
	if err := l.Replay(context.Background(), []string{"t1.>"}, ReplayFrom{}, func(Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if len(read) != before {
		t.Fatalf("the original handle's replay reached the hook")
	}
}
