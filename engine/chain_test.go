package engine

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// sink consumes demo.out and emits one demo.done per input.
func sink() Stage {
	return NewStage("sink", []string{"demo.out"}, func(_ context.Context, ev Event, out Emitter) error {
		_, err := out.Emit("demo.done", item{})
		return err
	})
}

// A job's stages, on consumers of their own that start at its root event
// and wrapped with the root's chain, handle the root and its descendants
// alone: not the run's earlier events, nor its other work after the root,
// nor an effect of that work; restarted with the chain read from the log,
// they take up an effect of the chain that another process published
// meanwhile.
func TestChainOnlyHandlesTheRootsDescendants(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	publishRoot(t, l, "r", "demo.in", "before", item{1})
	root := publishRoot(t, l, "r", "demo.in", "job", item{2})
	later := publishRoot(t, l, "r", "demo.in", "later", item{3})

	start := func(chain *Chain, s Stage) (*Runner, func()) {
		cfg := fastConfig()
		cfg.Run, cfg.Durable, cfg.From = "r", Durable(s.Name(), "r")+"_job", ReplayFrom{Seq: root.Seq}
		r := NewRunner(l, chain.Only(s), cfg)
		return r, runStage(t, r)
	}
	chain, err := l.ChainOf(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	relayRunner, stopRelay := start(chain, serialStage{relay(nil)})
	if relayRunner.cfg.Concurrency != 1 {
		t.Fatalf("a serial stage wrapped in a chain runs %d handlers at once", relayRunner.cfg.Concurrency)
	}
	if cc := relayRunner.ConsumerConfig(); cc.DeliverPolicy != jetstream.DeliverByStartSequencePolicy || cc.OptStartSeq != root.Seq {
		t.Fatalf("consumer starts with policy %v at %d, want the root's sequence %d", cc.DeliverPolicy, cc.OptStartSeq, root.Seq)
	}
	_, stopSink := start(chain, sink())
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l, "t1.r.demo.done", 1))
	// The others are delivered and acknowledged, not handled.
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		for _, d := range []string{"relay_r_job", "sink_r_job"} {
			if p, ap := pendingOf(t, l, d); p+uint64(ap) > 0 {
				return errorf("%s: %d pending, %d unacknowledged", d, p, ap)
			}
		}
		return nil
	})
	outs := events(t, l, "t1.r.demo.out")
	if len(outs) != 1 || outs[0].CausationID != root.ID {
		t.Fatalf("demo.out: %+v, want the root's alone", outs)
	}
	stopRelay()
	stopSink()

	// Another process handled the root and the later input while the
	// job's sink was down.
	for i, cause := range []Event{root, later} {
		payload, _ := json.Marshal(item{i})
		ev := Event{ID: DeriveID("r", "demo.out", cause.ID, "elsewhere", ""), Type: "demo.out", Run: "r",
			CausationID: cause.ID, CorrelationID: cause.CorrelationID, SchemaVersion: 1, Payload: payload}
		if _, err := l.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	chain, err = l.ChainOf(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	start(chain, sink())
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l, "t1.r.demo.done", 2))
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if p, ap := pendingOf(t, l, "sink_r_job"); p+uint64(ap) > 0 {
			return errorf("sink_r_job: %d pending, %d unacknowledged", p, ap)
		}
		return nil
	})
	if n := len(events(t, l, "t1.r.demo.done")); n != 2 {
		t.Fatalf("%d demo.done, want 2: the later input's effect was handled", n)
	}
}
