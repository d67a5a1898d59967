package engine

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"
)

type tally struct {
	Count map[string]int `json:"count"`
	Sum   int            `json:"sum"`
}

func tallyProjection() Projection[tally] {
	return Projection[tally]{
		Name:    "tally-r1",
		Filters: []string{Subject("r1", ">")},
		Init:    func() tally { return tally{Count: map[string]int{}} },
		Apply: func(s tally, ev Event) (tally, error) {
			var it item
			if err := ev.Decode(&it); err != nil {
				return s, err
			}
			s.Count[ev.Type]++
			s.Sum += it.N
			return s, nil
		},
	}
}

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }

func TestProjectionSurvivesRestartAndEqualsRebuild(t *testing.T) {
	ctx := context.Background()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	for i := range 30 {
		typ := "demo.in"
		if i%3 == 0 {
			typ = "demo.out"
		}
		publishRoot(t, l, "r1", typ, fmt.Sprint(i), item{i})
	}
	publishRoot(t, l, "r2", "demo.in", "other", item{1000}) // another run: not folded
	pr, err := NewProjector(ctx, l, tallyProjection())
	if err != nil {
		t.Fatal(err)
	}
	live, err := pr.CatchUp(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if live.State.Sum != 435 || live.State.Count["demo.out"] != 10 {
		t.Fatalf("live state %+v", live.State)
	}

	ts.restart()
	l = ts.openLog(ts.connect())
	pr, err = NewProjector(ctx, l, tallyProjection())
	if err != nil {
		t.Fatal(err)
	}
	stored, _, err := pr.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stored, live) {
		t.Fatalf("after restart %+v, before %+v", stored, live)
	}
	for i := 30; i < 40; i++ {
		publishRoot(t, l, "r1", "demo.in", fmt.Sprint(i), item{i})
	}
	live, err = pr.CatchUp(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rebuilt, err := pr.Rebuild(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rebuilt, live) {
		t.Fatalf("rebuild %+v != live %+v", rebuilt, live)
	}
}

// Two projectors racing on one key never lose or double-apply an event.
func TestProjectionCompareAndSet(t *testing.T) {
	ctx := context.Background()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	a, _ := NewProjector(ctx, l, tallyProjection())
	b, _ := NewProjector(ctx, l, tallyProjection())
	errs := make(chan error, 2)
	for _, p := range []*Projector[tally]{a, b} {
		go func() {
			for range 20 {
				if _, err := p.CatchUp(ctx); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for i := range 50 {
		publishRoot(t, l, "r1", "demo.in", fmt.Sprint(i), item{1})
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	final, err := a.CatchUp(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if final.State.Sum != 50 {
		t.Fatalf("sum %d, want 50", final.State.Sum)
	}
}

func TestReplayFromSeqAndTime(t *testing.T) {
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
