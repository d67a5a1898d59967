package engine

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/t1pipe/t1/infra/bus"
)

// testServer is an embedded JetStream server on a random port in its own
// temporary directory. Tests that spend their time waiting out lease,
// ack and dedup timers on a server of their own run in parallel; a test
// that restarts its server does not, since another server could take the
// port while it is down.
type testServer struct {
	t    testing.TB
	dir  string
	port int // kept by a restart, so clients reconnect
	srv  *bus.Embedded
}

func startServer(t testing.TB) *testServer {
	t.Helper()
	ts := &testServer{t: t, dir: t.TempDir()}
	ts.start()
	t.Cleanup(func() {
		if ts.srv != nil {
			ts.srv.Shutdown()
		}
	})
	return ts
}

func (ts *testServer) start() {
	ts.t.Helper()
	srv, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: ts.dir, Port: ts.port})
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.srv = srv
	ts.port = srv.Server().Addr().(*net.TCPAddr).Port
}

func (ts *testServer) restart() { ts.restartAfter(0) }

// restartAfter stops the server, leaves its clients without one for down,
// and starts it again on its port and store.
func (ts *testServer) restartAfter(down time.Duration) {
	ts.srv.Shutdown()
	ts.srv = nil
	time.Sleep(down)
	ts.start()
}

// connect opens a TCP connection, so tests can drop it like a crashed
// process would.
func (ts *testServer) connect() *nats.Conn {
	ts.t.Helper()
	nc, err := bus.Connect(context.Background(), bus.ConnectOptions{URLs: []string{ts.srv.ClientURL()}})
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.t.Cleanup(nc.Close)
	return nc
}

func (ts *testServer) openLog(nc *nats.Conn) *Log {
	ts.t.Helper()
	l, err := OpenLog(context.Background(), nc, LogConfig{DedupWindow: time.Minute})
	if err != nil {
		ts.t.Fatal(err)
	}
	return l
}

// checkFor polls f until it returns nil or the deadline passes.
func checkFor(t testing.TB, total, every time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(every)
	}
	t.Fatalf("timed out after %s: %v", total, err)
}

// events reads every event in the stream whose subject matches filter.
func events(t testing.TB, l *Log, filter string) []Event {
	t.Helper()
	var out []Event
	if err := l.Replay(context.Background(), []string{filter}, ReplayFrom{}, func(ev Event) error {
		out = append(out, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func countEvents(t testing.TB, l *Log, filter string, want int) func() error {
	return func() error {
		if got := len(events(t, l, filter)); got != want {
			return fmt.Errorf("%s: %d events, want %d", filter, got, want)
		}
		return nil
	}
}

func publishRoot(t testing.TB, l *Log, run, typ, key string, payload any) Event {
	t.Helper()
	ev, err := NewRootEvent(run, typ, key, payload)
	if err != nil {
		t.Fatal(err)
	}
	ev, err = l.Publish(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// runStage runs r until the test ends or stop is called.
func runStage(t testing.TB, r *Runner) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runner: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func pendingOf(t testing.TB, l *Log, durable string) (pending uint64, ackPending int) {
	t.Helper()
	c, err := l.JetStream().Consumer(context.Background(), l.Config().Stream, durable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.NumPending, info.NumAckPending
}

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }
