package engine

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/t1pipe/t1/infra/bus"
)

// TestDrainsNeverStall drains a few hundred events many times and fails if
// consumption ever pauses for longer than maxPause: a pull request the
// client believes outstanding but the server no longer holds is only
// re-issued when the client's heartbeat check expires (2 × 15 s), which
// stalls a stage with work waiting.
func TestDrainsNeverStall(t *testing.T) {
	t.Parallel()
	const (
		drains   = 10
		events   = 1000
		maxPause = 3 * time.Second
	)
	if testing.Short() {
		t.Skip("drains the stream 40 times; skipped with -short")
	}
	for _, cfg := range []struct {
		name             string
		conc, ackPending int
	}{
		{"c1", 1, 0}, {"c2", 2, 0}, {"c4", 4, 0},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			var stalls []string
			for d := range drains {
				longest, slow, err := drainOnce(t, events, RunnerConfig{Concurrency: cfg.conc, MaxAckPending: cfg.ackPending}, maxPause)
				if err != nil {
					t.Fatal(err)
				}
				if longest > maxPause {
					stalls = append(stalls, fmt.Sprintf("drain %d paused %.1fs (slow-consumer drops %d)", d, longest.Seconds(), slow))
				}
			}
			if len(stalls) > 0 {
				t.Fatalf("%d of %d drains of %d events paused longer than %s: %v", len(stalls), drains, events, maxPause, stalls)
			}
		})
	}
}

// drainOnce fills a fresh server with n events, runs a no-op stage until
// all are acknowledged and returns the longest time without progress. A
// drain that makes no progress for twice maxPause is abandoned there.
func drainOnce(t *testing.T, n int, cfg RunnerConfig, maxPause time.Duration) (longest time.Duration, slow int64, _ error) {
	t.Helper()
	srv, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		return 0, 0, err
	}
	defer srv.Shutdown()
	var drops atomic.Int64
	nc, err := bus.Connect(context.Background(), bus.ConnectOptions{InProcess: srv.Server()})
	if err != nil {
		return 0, 0, err
	}
	defer nc.Close()
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if err == nats.ErrSlowConsumer {
			drops.Add(1)
		}
	})
	l, err := OpenLog(context.Background(), nc, LogConfig{})
	if err != nil {
		return 0, 0, err
	}
	// 1 KiB events, as in BenchmarkConsume, where the stall was seen.
	pad := strings.Repeat("x", 1000)
	evs := make([]Event, 0, n)
	for i := range n {
		ev, err := NewRootEvent("drain", "demo.in", fmt.Sprint(i), struct {
			item
			Pad string `json:"pad"`
		}{item{N: i}, pad})
		if err != nil {
			return 0, 0, err
		}
		evs = append(evs, ev)
	}
	if err := l.publishAll(context.Background(), evs); err != nil {
		return 0, 0, err
	}
	s := NewStage("noop", []string{"demo.in"}, func(context.Context, Event, Emitter) error { return nil })
	r := NewRunner(l, s, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	last, seen := time.Now(), int64(0)
	for seen < int64(n) {
		time.Sleep(5 * time.Millisecond)
		now := time.Now()
		if a := r.Stats().Acked; a != seen {
			seen, last = a, now
			continue
		}
		if p := now.Sub(last); p > longest {
			longest = p
		}
		if longest > 2*maxPause {
			break
		}
	}
	return longest, drops.Load(), nil
}
