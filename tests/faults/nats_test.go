package faults_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/bus"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/schemas"
)

// natsOutage is how long the server stays down: long enough for every
// client operation in flight to fail and for the stages' consumers to be
// seen lost.
const natsOutage = 3 * time.Second

// The embedded nats-server is shut down after the first attempts complete
// and started again on the same port and store directory; the stages ride
// it out over their reconnecting TCP connection.
func TestNATSRestartEmbedded(t *testing.T) {
	testinfra.Long(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var mu sync.Mutex
	srv, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the stages, so it runs after they stop.
	t.Cleanup(func() { mu.Lock(); srv.Shutdown(); mu.Unlock() })
	u, err := url.Parse(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	nc, err := bus.Connect(ctx, bus.ConnectOptions{URLs: []string{srv.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l, err := engine.OpenLog(ctx, nc, engine.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	st := testinfra.Store(t)
	startAttemptStages(t, l, st)

	want := requestAttempts(t, ctx, l, st, "clean")
	waitScored(t, l, "clean", 3*time.Minute)

	requestAttempts(t, ctx, l, st, "restart")
	waitStarted(t, l, "restart")
	mu.Lock()
	srv.Shutdown()
	checkDisconnected(t, nc)
	time.Sleep(natsOutage)
	srv, err = bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: dir, Port: port})
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	waitScored(t, l, "restart", 3*time.Minute)
	checkNothingLost(t, outcomeOf(t, l, "restart"), outcomeOf(t, l, "clean"), want)
}

// A nats-server process (the Debian package) with JetStream on a temporary
// directory and a free port is killed mid-run and started again; the
// stages reach it through bus.mode external.
func TestNATSRestartExternal(t *testing.T) {
	testinfra.Long(t)
	bin := testinfra.NATSServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	p := &natsProcess{bin: bin, dir: t.TempDir(), port: freePort(t)}
	p.start(t)
	t.Cleanup(p.kill)

	sc := testinfra.StoreConfig(t)
	t.Setenv("AWS_ACCESS_KEY_ID", sc.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", sc.SecretKey)
	cfg := config.Default()
	cfg.Data = t.TempDir()
	cfg.Bus.Mode = config.External
	cfg.Bus.External.URLs = []string{p.url()}
	cfg.Store.Mode = config.External
	cfg.Store.Bucket = sc.Bucket
	cfg.Store.External = config.ExternalStore{Endpoint: sc.Endpoint, Region: sc.Region, Prefix: sc.Prefix}
	in, err := local.Open(ctx, cfg, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	t.Logf("nats-server %s", in.Conn.ConnectedServerVersion())
	startAttemptStages(t, in.Log, in.Store)

	want := requestAttempts(t, ctx, in.Log, in.Store, "clean")
	waitScored(t, in.Log, "clean", 3*time.Minute)

	requestAttempts(t, ctx, in.Log, in.Store, "restart")
	waitStarted(t, in.Log, "restart")
	p.kill()
	checkDisconnected(t, in.Conn)
	time.Sleep(natsOutage)
	p.start(t)
	waitScored(t, in.Log, "restart", 3*time.Minute)
	checkNothingLost(t, outcomeOf(t, in.Log, "restart"), outcomeOf(t, in.Log, "clean"), want)
}

// waitStarted waits for run's first completed attempt, so a fault lands
// while the remaining attempts are being played or scored.
func waitStarted(t *testing.T, l *engine.Log, run string) {
	t.Helper()
	testinfra.CheckFor(t, 2*time.Minute, func() error {
		if n := count(l, "t1."+run+"."+schemas.RolloutCompleted); n < 1 {
			return fmt.Errorf("run %s: no attempt completed yet", run)
		}
		if n := count(l, "t1."+run+"."+schemas.RewardScored); n == attemptsPerRun {
			return fmt.Errorf("run %s finished before the fault", run)
		}
		return nil
	})
	t.Logf("fault injected: %d of %d attempts completed, %d scored", count(l, "t1."+run+"."+schemas.RolloutCompleted),
		attemptsPerRun, count(l, "t1."+run+"."+schemas.RewardScored))
}

func checkDisconnected(t *testing.T, nc *nats.Conn) {
	t.Helper()
	testinfra.CheckFor(t, 10*time.Second, func() error {
		if nc.IsConnected() {
			return fmt.Errorf("client still connected to %s", nc.ConnectedUrlRedacted())
		}
		return nil
	})
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// natsProcess is a nats-server process with JetStream on dir.
type natsProcess struct {
	bin, dir string
	port     int
	args     []string // extra arguments (authorization, TLS)

	mu     sync.Mutex
	cmd    *exec.Cmd
	stderr bytes.Buffer
}

func (p *natsProcess) url() string { return "nats://127.0.0.1:" + strconv.Itoa(p.port) }

// start runs the server and waits until it accepts connections.
func (p *natsProcess) start(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	args := append([]string{"-a", "127.0.0.1", "-p", strconv.Itoa(p.port), "-js", "-sd", p.dir}, p.args...)
	p.stderr.Reset()
	p.cmd = exec.Command(p.bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stderr, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server not listening on %d: %v\n%s", p.port, err, p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the server with SIGKILL, as a crash would.
func (p *natsProcess) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}

// What the engine needs from the nats-server it is given, checked on the
// installed one (Debian 12 ships 2.9.10): a permanent failure terminates
// its message (2.9 ignores a terminate that carries a reason), a stage
// that filters several event types, which 2.9 cannot do, is refused with
// a reason that names the version it needs, a transient failure is retried
// after a delayed nak, and leases work.
func TestExternalServerFeatures(t *testing.T) {
	testinfra.Long(t)
	p := &natsProcess{bin: testinfra.NATSServer(t), dir: t.TempDir(), port: freePort(t)}
	p.start(t)
	t.Cleanup(p.kill)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, err := bus.Connect(ctx, bus.ConnectOptions{URLs: []string{p.url()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l, err := engine.OpenLog(ctx, nc, engine.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	bad := engine.NewStage("bad", []string{"probe.in"}, func(context.Context, engine.Event, engine.Emitter) error {
		calls.Add(1)
		return engine.Permanent(errors.New("unusable input"))
	})
	rc := engine.RunnerConfig{AckWait: time.Second, MaxDeliver: 3, Backoff: []time.Duration{100 * time.Millisecond}}
	testinfra.RunStage(t, l, bad, rc)
	ev, err := engine.NewRootEvent("r", "probe.in", "a", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	testinfra.CheckFor(t, 10*time.Second, func() error {
		if n := testinfra.Count(t, l, "t1.r.probe.in.failed"); n != 1 {
			return fmt.Errorf("%d failed events", n)
		}
		return nil
	})
	// Past two ack waits: a message that was not terminated is back by now.
	time.Sleep(3 * rc.AckWait)
	if n := calls.Load(); n != 1 {
		t.Fatalf("a permanently failed message was handled %d times on nats-server %s", n, nc.ConnectedServerVersion())
	}
	if dl := outcomeOf(t, l, "r").dead; dl != 0 {
		t.Fatalf("%d dead letters", dl)
	}

	multi := engine.NewStage("multi", []string{"probe.a", "probe.b"}, func(context.Context, engine.Event, engine.Emitter) error { return nil })
	mctx, mcancel := context.WithTimeout(ctx, 10*time.Second)
	defer mcancel()
	err = engine.NewRunner(l, multi, rc).Run(mctx)
	old := strings.HasPrefix(nc.ConnectedServerVersion(), "2.9.") || strings.HasPrefix(nc.ConnectedServerVersion(), "2.8.")
	switch {
	case old && (err == nil || !strings.Contains(err.Error(), "needs nats-server 2.10 or newer")):
		t.Fatalf("a two-filter stage on nats-server %s: %v", nc.ConnectedServerVersion(), err)
	case !old && err != nil:
		t.Fatalf("a two-filter stage on nats-server %s: %v", nc.ConnectedServerVersion(), err)
	}
	t.Logf("nats-server %s, a two-filter stage: %v", nc.ConnectedServerVersion(), err)

	// A transient failure is naked with a delay and handled again.
	var tries atomic.Int32
	flaky := engine.NewStage("flaky", []string{"probe.retry"}, func(_ context.Context, _ engine.Event, out engine.Emitter) error {
		if tries.Add(1) == 1 {
			return errors.New("store briefly away")
		}
		_, err := out.Emit("probe.retried", map[string]int{"n": 1})
		return err
	})
	frc := rc
	frc.RetryBudget = time.Millisecond
	testinfra.RunStage(t, l, flaky, frc)
	ev, err = engine.NewRootEvent("r", "probe.retry", "a", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	testinfra.CheckFor(t, 10*time.Second, func() error {
		if n := testinfra.Count(t, l, "t1.r.probe.retried"); n != 1 {
			return fmt.Errorf("%d outputs after %d tries", n, tries.Load())
		}
		return nil
	})

	// Leases: a key-value bucket with a TTL, created, refused to a second
	// holder, renewed and released.
	lease, err := l.AcquireLease(ctx, "probe", "first", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AcquireLease(ctx, "probe", "second", 2*time.Second); !errors.Is(err, engine.ErrLeased) {
		t.Fatalf("a second holder of a held lease: %v", err)
	}
	if err := lease.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
