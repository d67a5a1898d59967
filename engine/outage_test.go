package engine

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A consumer deleted under a running stage (an operator's mistake, a
// stream re-created) is re-created, and the stage goes on consuming
// instead of returning as if it had been stopped.
func TestRunnerRecreatesLostConsumer(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	r := NewRunner(l, relay(nil), fastConfig())
	if cc := r.ConsumerConfig(); cc.FilterSubject != "t1.*.demo.in" || len(cc.FilterSubjects) != 0 {
		// One filter must not need nats-server 2.10's filter list.
		t.Fatalf("filter %q, filters %q", cc.FilterSubject, cc.FilterSubjects)
	}
	runStage(t, r)
	publishRoot(t, l, "r1", "demo.in", "before", item{1})
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l, "t1.r1.demo.out", 1))
	if err := l.JetStream().DeleteConsumer(context.Background(), l.Config().Stream, "relay"); err != nil {
		t.Fatal(err)
	}
	publishRoot(t, l, "r1", "demo.in", "after", item{2})
	checkFor(t, 20*time.Second, 50*time.Millisecond, countEvents(t, l, "t1.r1.demo.out", 2))
}

// An output larger than the server accepts can never be published: the
// input fails at once with both sizes in the reason, instead of being
// retried into the dead-letter stream.
func TestOversizedOutputFails(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	var calls atomic.Int32
	big := strings.Repeat("x", int(l.nc.MaxPayload())+1)
	s := NewStage("relay", []string{"demo.in"}, func(_ context.Context, _ Event, out Emitter) error {
		calls.Add(1)
		_, err := out.Emit("demo.out", map[string]string{"blob": big})
		return err
	})
	runStage(t, NewRunner(l, s, fastConfig()))
	publishRoot(t, l, "r1", "demo.in", "a", item{1})
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l, "t1.r1.demo.in.failed", 1))
	var f Failure
	if err := events(t, l, "t1.r1.demo.in.failed")[0].Decode(&f); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("over the server's limit of %d", l.nc.MaxPayload())
	if !strings.Contains(f.Reason, want) || calls.Load() != 1 || len(deadLetters(t, l)) != 0 {
		t.Fatalf("reason %q (want %q), %d calls, %d dead letters", f.Reason, want, calls.Load(), len(deadLetters(t, l)))
	}
	if n := len(events(t, l, "t1.r1.demo.out")); n != 0 {
		t.Fatalf("%d oversized events stored", n)
	}
}

func TestServerAtLeast(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v    string
		want bool
	}{{"2.9.10", false}, {"2.10.3", false}, {"2.10.4", true}, {"2.11.0-RC.1", true}, {"3.0.0", true}, {"1.99.99", false}, {"", true}, {"dev", true}} {
		if got := serverAtLeast(c.v, 2, 10, 4); got != c.want {
			t.Errorf("serverAtLeast(%q, 2.10.4) = %t", c.v, got)
		}
	}
}
