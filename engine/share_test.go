package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Two workers of one stage, each a process of its own (a connection each),
// share its durable consumer: both handle some of the inputs, and no input
// is handled twice, although each handler outlives the ack wait and a
// message pulled ahead waits behind it for longer than that.
func TestWorkersShareOneConsumer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("long scenario: skipped with -short (make test runs it)")
	}
	ts := startServer(t)
	var mu sync.Mutex
	calls := map[string]int{} // event id → handler calls
	byWorker := map[int]int{} // worker → inputs handled
	cfg := fastConfig()
	cfg.Concurrency, cfg.MaxAckPending = 1, 8
	cfg.AckWait, cfg.Heartbeat = time.Second, 200*time.Millisecond
	const inputs = 8
	for w := range 2 {
		l := ts.openLog(ts.connect())
		runStage(t, NewRunner(l, relay(func(ctx context.Context, ev Event) error {
			mu.Lock()
			calls[ev.ID]++
			byWorker[w]++
			mu.Unlock()
			select {
			case <-time.After(1500 * time.Millisecond):
			case <-ctx.Done():
			}
			return ctx.Err()
		}), cfg))
	}
	l := ts.openLog(ts.connect())
	for i := range inputs {
		publishRoot(t, l, "r1", "demo.in", fmt.Sprint(i), item{i})
	}
	checkFor(t, 30*time.Second, 50*time.Millisecond, countEvents(t, l, "t1.r1.demo.out", inputs))
	mu.Lock()
	defer mu.Unlock()
	for id, n := range calls {
		if n != 1 {
			t.Errorf("input %s handled %d times", id, n)
		}
	}
	if len(calls) != inputs || byWorker[0] == 0 || byWorker[1] == 0 {
		t.Fatalf("%d inputs handled, by worker %v: want %d, some by each", len(calls), byWorker, inputs)
	}
}

// A Serial stage's consumer lets one message out at a time whatever the
// configuration asks, so even two processes that share it by mistake never
// handle two of its inputs at once.
func TestSerialStageCapsAckPending(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	cfg := fastConfig()
	cfg.Concurrency, cfg.MaxAckPending = 4, 64
	r := NewRunner(l, serialStage{relay(nil)}, cfg)
	if got := r.ConsumerConfig().MaxAckPending; got != 1 {
		t.Fatalf("serial stage's consumer allows %d messages out, want 1", got)
	}
}
