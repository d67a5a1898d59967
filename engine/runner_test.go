package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type item struct {
	N int `json:"n"`
}

// relay consumes demo.in and emits one demo.out per input, carrying N.
func relay(h func(ctx context.Context, ev Event) error) Stage {
	return NewStage("relay", []string{"demo.in"}, func(ctx context.Context, ev Event, out Emitter) error {
		if h != nil {
			if err := h(ctx, ev); err != nil {
				return err
			}
		}
		var it item
		if err := ev.Decode(&it); err != nil {
			return err
		}
		_, err := out.Emit("demo.out", it)
		return err
	})
}

func fastConfig() RunnerConfig {
	return RunnerConfig{
		AckWait:     time.Second,
		MaxDeliver:  5,
		Backoff:     []time.Duration{50 * time.Millisecond},
		RetryBudget: time.Millisecond,
	}
}

func TestPublishDeduplicates(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	ev, err := NewRootEvent("r1", "demo.in", "k", item{1})
	if err != nil {
		t.Fatal(err)
	}
	first, err := l.Publish(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	ev.Payload = json.RawMessage(`{"n":2}`)
	second, err := l.Publish(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if first.Seq != second.Seq {
		t.Fatalf("republished event stored again: seq %d then %d", first.Seq, second.Seq)
	}
	if got := events(t, l, "t1.r1.>"); len(got) != 1 || string(got[0].Payload) != `{"n":1}` {
		t.Fatalf("stream holds %v", got)
	}
}

func TestRunnerRelaysAndAcks(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	r := NewRunner(l, relay(nil), fastConfig())
	runStage(t, r)
	for i := range 20 {
		publishRoot(t, l, "r1", "demo.in", fmt.Sprint(i), item{i})
	}
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l, "t1.r1.demo.out", 20))
	checkFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if p, ap := pendingOf(t, l, "relay"); p != 0 || ap != 0 {
			return fmt.Errorf("pending %d, ack pending %d", p, ap)
		}
		return nil
	})
	for _, ev := range events(t, l, "t1.r1.demo.out") {
		if ev.CausationID == "" || ev.CorrelationID != ev.CausationID {
			t.Fatalf("out event lacks causation: %+v", ev)
		}
	}
}

// A process that dies while handling leaves no ack; the next process gets
// the message again and the output appears exactly once.
func TestKilledMidHandlerExactlyOnce(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	nc1 := ts.connect()
	l1 := ts.openLog(nc1)
	entered := make(chan struct{})
	var once sync.Once
	r1 := NewRunner(l1, relay(func(ctx context.Context, ev Event) error {
		once.Do(func() { close(entered) })
		<-ctx.Done() // never finishes on its own
		return ctx.Err()
	}), fastConfig())
	r1.cfg.Heartbeat = -1
	go r1.Run(context.Background()) //nolint:errcheck // dies with its connection
	publishRoot(t, l1, "r1", "demo.in", "a", item{7})
	<-entered
	nc1.Close() // the crash: no ack, no nak

	l2 := ts.openLog(ts.connect())
	runStage(t, NewRunner(l2, relay(nil), fastConfig()))
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l2, "t1.r1.demo.out", 1))
}

// A handler interrupted by shutdown whose error the shutdown caused reads
// as permanent (a sandbox killed under it): the input goes back for the
// next process instead of failing, and its output appears once.
func TestShutdownMidHandlerIsNotAFailure(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	entered := make(chan struct{})
	var once sync.Once
	stop := runStage(t, NewRunner(l, relay(func(ctx context.Context, ev Event) error {
		once.Do(func() { close(entered) })
		<-ctx.Done()
		return Permanent(fmt.Errorf("sandbox: %w", ctx.Err()))
	}), fastConfig()))
	publishRoot(t, l, "r1", "demo.in", "a", item{7})
	<-entered
	stop()

	runStage(t, NewRunner(l, relay(nil), fastConfig()))
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l, "t1.r1.demo.out", 1))
	if n := len(events(t, l, "t1.r1.demo.in.failed")); n != 0 {
		t.Fatalf("the interrupted input failed %d times", n)
	}
}

// A process that dies after publishing outputs but before acking: the
// redelivery republishes the same ids, which the stream drops.
func TestKilledBeforeAckExactlyOnce(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	nc1 := ts.connect()
	l1 := ts.openLog(nc1)
	r1 := NewRunner(l1, relay(nil), fastConfig())
	crashed := make(chan struct{})
	r1.afterPublish = func() { nc1.Close(); close(crashed) }
	go r1.Run(context.Background()) //nolint:errcheck // dies with its connection
	publishRoot(t, l1, "r1", "demo.in", "a", item{7})
	<-crashed

	l2 := ts.openLog(ts.connect())
	var calls atomic.Int32
	r2 := NewRunner(l2, relay(func(context.Context, Event) error { calls.Add(1); return nil }), fastConfig())
	runStage(t, r2)
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if calls.Load() == 0 || r2.Stats().Acked == 0 {
			return errors.New("not redelivered yet")
		}
		return nil
	})
	if got := len(events(t, l2, "t1.r1.demo.out")); got != 1 {
		t.Fatalf("%d outputs after redelivery, want 1", got)
	}
}

func TestNakRetriesThenSucceeds(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	var calls atomic.Int32
	r := NewRunner(l, relay(func(context.Context, Event) error {
		if calls.Add(1) <= 2 {
			return errors.New("object store briefly unavailable")
		}
		return nil
	}), fastConfig())
	runStage(t, r)
	publishRoot(t, l, "r1", "demo.in", "a", item{1})
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l, "t1.r1.demo.out", 1))
	checkFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if s := r.Stats(); s.Acked != 1 {
			return fmt.Errorf("stats %+v", s)
		}
		return nil
	})
	if s := r.Stats(); s.Retried < 1 || s.DeadLettered != 0 {
		t.Fatalf("stats %+v: want retries and no dead letters", s)
	}
}

// Without heartbeats a handler slower than AckWait is redelivered while it
// still runs; both runs finish, and the output is still stored once.
func TestOutlivesAckWaitStillOnce(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	var calls atomic.Int32
	cfg := fastConfig()
	cfg.AckWait = 500 * time.Millisecond
	cfg.Heartbeat = -1
	r := NewRunner(l, relay(func(ctx context.Context, ev Event) error {
		if calls.Add(1) == 1 {
			time.Sleep(1500 * time.Millisecond)
		}
		return nil
	}), cfg)
	runStage(t, r)
	publishRoot(t, l, "r1", "demo.in", "a", item{1})
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if r.Stats().Acked < 2 {
			return fmt.Errorf("acked %d, want both runs finished", r.Stats().Acked)
		}
		return nil
	})
	if calls.Load() < 2 {
		t.Fatalf("handler ran %d times; the slow run should have been redelivered", calls.Load())
	}
	if got := len(events(t, l, "t1.r1.demo.out")); got != 1 {
		t.Fatalf("%d outputs, want 1", got)
	}
}

// With heartbeats a handler running 3x AckWait is delivered exactly once.
func TestHeartbeatKeepsLongHandlerAlive(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits out several ack deadlines: skipped with -short")
	}
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	var calls atomic.Int32
	cfg := fastConfig()
	cfg.AckWait = 600 * time.Millisecond
	cfg.Heartbeat = 150 * time.Millisecond
	r := NewRunner(l, relay(func(ctx context.Context, ev Event) error {
		calls.Add(1)
		time.Sleep(3 * cfg.AckWait)
		return nil
	}), cfg)
	runStage(t, r)
	publishRoot(t, l, "r1", "demo.in", "a", item{1})
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l, "t1.r1.demo.out", 1))
	checkFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if r.Stats().Acked != 1 {
			return errors.New("not acked")
		}
		return nil
	})
	// Give a would-be redelivery its chance before judging.
	time.Sleep(2 * cfg.AckWait)
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func deadLetters(t *testing.T, l *Log) []*jetstream.RawStreamMsg {
	t.Helper()
	info, err := l.DeadLetters().Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := l.DeadLetters().GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestDeadLetterAfterMaxDeliver(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	var calls atomic.Int32
	cfg := fastConfig()
	cfg.MaxDeliver = 3
	r := NewRunner(l, relay(func(context.Context, Event) error {
		calls.Add(1)
		return errors.New("verifier host unreachable")
	}), cfg)
	runStage(t, r)
	in := publishRoot(t, l, "r1", "demo.in", "a", item{1})
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if n := len(deadLetters(t, l)); n != 1 {
			return fmt.Errorf("%d dead letters", n)
		}
		return nil
	})
	dl := deadLetters(t, l)[0]
	if got := dl.Header.Get(HeaderDeadReason); got != "verifier host unreachable" {
		t.Fatalf("reason %q", got)
	}
	if dl.Subject != "t1dlq.r1.demo.in" || dl.Header.Get(HeaderDeadStreamSeq) != fmt.Sprint(in.Seq) {
		t.Fatalf("dead letter %s headers %v", dl.Subject, dl.Header)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("handler ran %d times, want MaxDeliver=3", n)
	}
	if got := len(events(t, l, "t1.r1.demo.out")); got != 0 {
		t.Fatalf("failed handler left %d outputs", got)
	}
	// Whatever waits on the input's outcome learns that the stage gave up.
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l, "t1.r1.demo.in.failed", 1))
	var f Failure
	if err := events(t, l, "t1.r1.demo.in.failed")[0].Decode(&f); err != nil {
		t.Fatal(err)
	}
	if f.EventID != in.ID || f.Attempts != 3 || !strings.Contains(f.Reason, "gave up after 3 deliveries: verifier host unreachable") {
		t.Fatalf("failure %+v", f)
	}
}

// A handler that hangs past every ack wait never answers; the server's
// MAX_DELIVERIES advisory is what moves the message to the dead letters.
func TestDeadLetterFromAdvisory(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	cfg := fastConfig()
	cfg.MaxDeliver = 2
	cfg.AckWait = 300 * time.Millisecond
	cfg.Heartbeat = -1
	cfg.Concurrency = 4
	r := NewRunner(l, relay(func(ctx context.Context, ev Event) error {
		<-ctx.Done()
		return ctx.Err()
	}), cfg)
	runStage(t, r)
	in := publishRoot(t, l, "r1", "demo.in", "a", item{1})
	checkFor(t, 15*time.Second, 50*time.Millisecond, func() error {
		if n := len(deadLetters(t, l)); n != 1 {
			return fmt.Errorf("%d dead letters", n)
		}
		return nil
	})
	if reason := deadLetters(t, l)[0].Header.Get(HeaderDeadReason); !strings.Contains(reason, "without an acknowledgement") {
		t.Fatalf("reason %q", reason)
	}
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l, "t1.r1.demo.in.failed", 1))
	var f Failure
	if err := events(t, l, "t1.r1.demo.in.failed")[0].Decode(&f); err != nil {
		t.Fatal(err)
	}
	if f.EventID != in.ID || !strings.Contains(f.Reason, "gave up after 2 deliveries") || !strings.Contains(f.Reason, "without an acknowledgement") {
		t.Fatalf("failure %+v", f)
	}
}

func TestPermanentErrorPublishesFailed(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	var calls atomic.Int32
	r := NewRunner(l, relay(func(context.Context, Event) error {
		calls.Add(1)
		return Permanent(errors.New("task.toml: line 3: expected '='"))
	}), fastConfig())
	runStage(t, r)
	in := publishRoot(t, l, "r1", "demo.in", "a", item{1})
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l, "t1.r1.demo.in.failed", 1))
	failed := events(t, l, "t1.r1.demo.in.failed")[0]
	var f Failure
	if err := failed.Decode(&f); err != nil {
		t.Fatal(err)
	}
	if f.EventID != in.ID || f.Stage != "relay" || !strings.Contains(f.Reason, "expected '='") || failed.CausationID != in.ID {
		t.Fatalf("failure %+v", f)
	}
	time.Sleep(300 * time.Millisecond)
	if calls.Load() != 1 || len(deadLetters(t, l)) != 0 {
		t.Fatalf("permanent error retried (%d calls) or dead-lettered", calls.Load())
	}
}

func TestMalformedEnvelopeFails(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	nc := ts.connect()
	l := ts.openLog(nc)
	runStage(t, NewRunner(l, relay(nil), fastConfig()))
	js, _ := jetstream.New(nc)
	msg := nats.NewMsg("t1.r1.demo.in")
	msg.Data = []byte("\xff\xfenot json")
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l, "t1.r1.demo.in.failed", 1))
	var f Failure
	if err := events(t, l, "t1.r1.demo.in.failed")[0].Decode(&f); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.Reason, "malformed event envelope") {
		t.Fatalf("reason %q", f.Reason)
	}
}

func TestPanicIsPermanent(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	runStage(t, NewRunner(l, relay(func(context.Context, Event) error { panic("index out of range") }), fastConfig()))
	publishRoot(t, l, "r1", "demo.in", "a", item{1})
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l, "t1.r1.demo.in.failed", 1))
}

func TestMiddlewareOrder(t *testing.T) {
	t.Parallel()
	var trail []string
	mw := func(name string) Middleware {
		return func(next HandlerFunc) HandlerFunc {
			return func(ctx context.Context, ev Event, out Emitter) error {
				trail = append(trail, name)
				return next(ctx, ev, out)
			}
		}
	}
	s := NewStage("s", []string{"a"}, func(context.Context, Event, Emitter) error {
		trail = append(trail, "h")
		return nil
	}, mw("outer"), mw("inner"))
	if err := s.Handle(context.Background(), Event{}, newEmitter(Event{}, "")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(trail, ","); got != "outer,inner,h" {
		t.Fatalf("order %s", got)
	}
}

func TestDeriveIDIsStableAndDistinct(t *testing.T) {
	t.Parallel()
	a := DeriveID("r", "t", "cause", "cfg", "1")
	if a != DeriveID("r", "t", "cause", "cfg", "1") {
		t.Fatal("not deterministic")
	}
	for _, other := range [][]string{
		{"r", "t", "cause", "cfg", "2"},
		{"r", "t", "cause", "cfg2", "1"},
		{"r2", "t", "cause", "cfg", "1"},
		{"r", "tc", "ause", "cfg", "1"},
	} {
		if DeriveID(other...) == a {
			t.Fatalf("%v collides", other)
		}
	}
}
