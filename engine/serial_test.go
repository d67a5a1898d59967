package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type serialStage struct{ Stage }

func (serialStage) Serial() bool { return true }

// A Serial stage's handlers never overlap, whatever concurrency the runner
// is configured with.
func TestSerialStageRunsOneHandlerAtATime(t *testing.T) {
	t.Parallel()
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

// A Serial stage scoped to a run is single per run: two processes (a
// connection each) run it for two runs at once, each handling its own
// run's inputs through a consumer of its own and none of the other's, and
// both handle one input at a time.
func TestSerialStageScopedToARun(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	const inputs = 10
	var mu sync.Mutex
	runsOf := map[string]map[string]int{} // process → run → inputs handled
	for _, run := range []string{"ra", "rb"} {
		l := ts.openLog(ts.connect())
		cfg := fastConfig()
		cfg.Run = run
		r := NewRunner(l, serialStage{relay(func(_ context.Context, ev Event) error {
			mu.Lock()
			defer mu.Unlock()
			if runsOf[run] == nil {
				runsOf[run] = map[string]int{}
			}
			runsOf[run][ev.Run]++
			return nil
		})}, cfg)
		cc := r.ConsumerConfig()
		if cc.Durable != "relay_"+run || cc.FilterSubject != "t1."+run+".demo.in" || cc.MaxAckPending != 1 {
			t.Fatalf("consumer of run %s: durable %q, filter %q, max ack pending %d", run, cc.Durable, cc.FilterSubject, cc.MaxAckPending)
		}
		runStage(t, r)
	}
	l := ts.openLog(ts.connect())
	for i := range inputs {
		for _, run := range []string{"ra", "rb", "rc"} {
			publishRoot(t, l, run, "demo.in", fmt.Sprint(i), item{i})
		}
	}
	checkFor(t, 20*time.Second, 50*time.Millisecond, countEvents(t, l, "t1.ra.demo.out", inputs))
	checkFor(t, 20*time.Second, 50*time.Millisecond, countEvents(t, l, "t1.rb.demo.out", inputs))
	if n := len(events(t, l, "t1.rc.demo.out")); n != 0 {
		t.Fatalf("run rc, which no process runs, has %d outputs", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, run := range []string{"ra", "rb"} {
		if len(runsOf[run]) != 1 || runsOf[run][run] != inputs {
			t.Errorf("the process of run %s handled %v, want %d inputs of %s alone", run, runsOf[run], inputs, run)
		}
	}
	if err := NewRunner(l, relay(nil), RunnerConfig{Run: "Not A Run"}).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "run id") {
		t.Fatalf("a runner scoped to a bad run id: %v, want it refused", err)
	}
}
