package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A process that dies after publishing outputs but before acking, with
// the redelivery coming after the stream has forgotten the outputs' ids:
// the runner finds them in the log and publishes nothing twice.
func TestRedeliveryAfterDedupWindowExactlyOnce(t *testing.T) {
	t.Parallel()
	const window = time.Second
	ts := startServer(t)
	open := func() *Log {
		l, err := OpenLog(context.Background(), ts.connect(), LogConfig{DedupWindow: window})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l1 := open()
	r1 := NewRunner(l1, relay(nil), fastConfig())
	crashed := make(chan struct{})
	r1.afterPublish = func() { l1.nc.Close(); close(crashed) }
	go r1.Run(context.Background()) //nolint:errcheck // dies with its connection
	publishRoot(t, l1, "r1", "demo.in", "a", item{7})
	<-crashed

	// The stream forgets ids after the window: a probe published after the
	// outputs is stored again once it has passed.
	l2 := open()
	publishRoot(t, l2, "r1", "demo.probe", "p", item{0})
	checkFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		publishRoot(t, l2, "r1", "demo.probe", "p", item{0})
		if n := len(events(t, l2, "t1.r1.demo.probe")); n < 2 {
			return errors.New("the stream still remembers the probe's id")
		}
		return nil
	})

	r2 := NewRunner(l2, relay(nil), fastConfig())
	runStage(t, r2)
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if s := r2.Stats(); s.Acked == 0 {
			return fmt.Errorf("not redelivered yet: %+v", s)
		}
		return nil
	})
	if got := len(events(t, l2, "t1.r1.demo.out")); got != 1 {
		t.Fatalf("%d outputs after a redelivery past the dedup window, want 1", got)
	}
}

// The failed event of an input whose earlier delivery published it and
// died before terminating the message is not published again once the
// stream has forgotten its id.
func TestFailedEventAfterDedupWindowOnce(t *testing.T) {
	t.Parallel()
	const window = time.Second
	ts := startServer(t)
	l, err := OpenLog(context.Background(), ts.connect(), LogConfig{DedupWindow: window})
	if err != nil {
		t.Fatal(err)
	}
	in := publishRoot(t, l, "r1", "demo.in", "a", item{7})
	stage := relay(func(context.Context, Event) error { return Permanent(errors.New("unusable input")) })
	// What the delivery that died had published.
	earlier := Event{ID: DeriveID("r1", FailedType("demo.in"), in.ID, "", stage.Name()), Type: FailedType("demo.in"), Run: "r1",
		CausationID: in.ID, CorrelationID: in.ID, Payload: []byte(`{}`)}
	if _, err := l.Publish(context.Background(), earlier); err != nil {
		t.Fatal(err)
	}
	publishRoot(t, l, "r1", "demo.probe", "p", item{0})
	checkFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		publishRoot(t, l, "r1", "demo.probe", "p", item{0})
		if n := len(events(t, l, "t1.r1.demo.probe")); n < 2 {
			return errors.New("the stream still remembers the probe's id")
		}
		return nil
	})
	r := NewRunner(l, stage, fastConfig())
	runStage(t, r)
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if s := r.Stats(); s.Failed == 0 {
			return fmt.Errorf("not handled yet: %+v", s)
		}
		return nil
	})
	if got := len(events(t, l, "t1.r1.demo.in.failed")); got != 1 {
		t.Fatalf("%d failed events, want 1", got)
	}
}

// BenchmarkStoredIDs times the lookup a runner makes before publishing the
// outputs of an input older than half the dedup window: the ids of every
// event on one subject, for a subject holding 10 000 events of 1 KiB.
func BenchmarkStoredIDs(b *testing.B) {
	l := benchLog(b)
	const n = 10000
	fill(b, l, n)
	ctx := context.Background()
	for b.Loop() {
		ids, err := l.storedIDs(ctx, []string{Subject("bench", "demo.in")})
		if err != nil {
			b.Fatal(err)
		}
		if len(ids) != n {
			b.Fatalf("%d ids, want %d", len(ids), n)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}

// Lookups of outputs stored before leave no consumer on the server: a
// stream holds at most 1000, and handlers of old inputs each make one.
func TestStoredIDsLeaveNoConsumer(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l, err := OpenLog(context.Background(), ts.connect(), LogConfig{DedupWindow: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	publishRoot(t, l, "r1", "demo.in", "a", item{1})
	ctx := context.Background()
	for range 20 {
		ids, err := l.storedIDs(ctx, []string{Subject("r1", "demo.in")})
		if err != nil || len(ids) != 1 {
			t.Fatalf("lookup: %v, %v", ids, err)
		}
	}
	info, err := l.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Consumers; n != 0 {
		t.Fatalf("%d consumers left after 20 lookups", n)
	}
}
