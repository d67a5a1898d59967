package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

type serialStage struct{ Stage }

func (serialStage) Serial() bool { return true }

// A Serial stage's handlers never overlap, whatever concurrency the runner
// is configured with.
func TestSerialStageRunsOneHandlerAtATime(t *testing.T) {
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	var running, most atomic.Int32
	s := serialStage{relay(func(context.Context, Event) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(5 * time.Millisecond)
		return nil
	})}
	cfg := fastConfig()
	cfg.Concurrency = 8
	r := NewRunner(l, s, cfg)
	if r.cfg.Concurrency != 1 || r.cfg.MaxAckPending != 1 {
		t.Fatalf("serial stage configured with concurrency %d, max ack pending %d", r.cfg.Concurrency, r.cfg.MaxAckPending)
	}
	runStage(t, r)
	for i := range 20 {
		publishRoot(t, l, "r1", "demo.in", fmt.Sprint(i), item{i})
	}
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l, "t1.r1.demo.out", 20))
	if m := most.Load(); m != 1 {
		t.Fatalf("%d handlers ran at once", m)
	}
}
