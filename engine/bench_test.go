package engine

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/t1pipe/t1/infra/bus"
)

// benchLog is an embedded server with an in-process connection, as t1 run
// uses it.
func benchLog(b *testing.B) *Log {
	b.Helper()
	srv, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Shutdown)
	nc, err := bus.Connect(context.Background(), bus.ConnectOptions{InProcess: srv.Server()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	l, err := OpenLog(context.Background(), nc, LogConfig{})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// fill publishes n 1 KiB events, each with its own derived id.
func fill(b *testing.B, l *Log, n int) {
	b.Helper()
	payload := item{N: 1}
	pad := strings.Repeat("x", 1000)
	evs := make([]Event, 0, 1024)
	flush := func() {
		if err := l.publishAll(context.Background(), evs); err != nil {
			b.Fatal(err)
		}
		evs = evs[:0]
	}
	for i := range n {
		ev, err := NewRootEvent("bench", "demo.in", fmt.Sprint(i), struct {
			item
			Pad string `json:"pad"`
		}{payload, pad})
		if err != nil {
			b.Fatal(err)
		}
		evs = append(evs, ev)
		if len(evs) == cap(evs) {
			flush()
		}
	}
	flush()
}

// BenchmarkConsume compares the engine's runner on a no-op stage with a
// bare jetstream consumer that double-acks, on the same server.
func BenchmarkConsume(b *testing.B) {
	b.Run("raw-doubleack", func(b *testing.B) {
		l := benchLog(b)
		fill(b, l, b.N)
		cons, err := l.js.CreateOrUpdateConsumer(context.Background(), l.cfg.Stream, jetstream.ConsumerConfig{
			Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "t1.*.demo.in",
		})
		if err != nil {
			b.Fatal(err)
		}
		var n atomic.Int64
		done := make(chan struct{})
		b.ResetTimer()
		cc, err := cons.Consume(func(m jetstream.Msg) {
			if err := m.DoubleAck(context.Background()); err != nil {
				b.Error(err)
			}
			if n.Add(1) == int64(b.N) {
				close(done)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		<-done
		b.StopTimer()
		cc.Stop()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
	for _, conc := range []int{4, 16} {
		b.Run(fmt.Sprintf("engine-noop-c%d", conc), func(b *testing.B) {
			l := benchLog(b)
			fill(b, l, b.N)
			s := NewStage("noop", []string{"demo.in"}, func(context.Context, Event, Emitter) error { return nil })
			r := NewRunner(l, s, RunnerConfig{Concurrency: conc, MaxAckPending: 1000})
			ctx, cancel := context.WithCancel(context.Background())
			b.ResetTimer()
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			for r.Stats().Acked < int64(b.N) {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			cancel()
			<-done
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
