package bus

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// startServer runs a real nats-server on a random loopback port. Callers
// fill in only the options under test; the rest is made safe for parallel
// test binaries (no signal handlers, no log noise, private store).
func startServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	if opts == nil {
		opts = &server.Options{}
	}
	opts.Host = "127.0.0.1"
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	opts.NoSigs = true
	opts.NoLog = true
	if opts.JetStream && opts.StoreDir == "" {
		opts.StoreDir = t.TempDir()
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(5 * time.Second) {
		s.Shutdown()
		t.Fatal("server not ready for connections")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// serverURL is the plain address of s, with the given scheme, so tests can
// add credentials or switch to tls:// themselves.
func serverURL(s *server.Server, scheme string) string {
	addr := s.Addr().(*net.TCPAddr)
	return fmt.Sprintf("%s://127.0.0.1:%d", scheme, addr.Port)
}

// connect dials with a short timeout so a failing case cannot stall the
// package, and closes the connection when the test ends.
func connect(t *testing.T, o ConnectOptions) (*nats.Conn, error) {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nc, err := Connect(ctx, o)
	if nc != nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

func mustConnect(t *testing.T, o ConnectOptions) *nats.Conn {
	t.Helper()
	nc, err := connect(t, o)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return nc
}

// roundTrip proves the connection is usable end to end, not merely that a
// socket was opened: the server must route a request to a subscriber on the
// same connection and the reply back.
func roundTrip(t *testing.T, nc *nats.Conn) {
	t.Helper()
	sub, err := nc.Subscribe("bus.test.echo", func(m *nats.Msg) {
		_ = m.Respond(append([]byte("echo:"), m.Data...))
	})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	msg, err := nc.Request("bus.test.echo", []byte("ping"), 2*time.Second)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if got := string(msg.Data); got != "echo:ping" {
		t.Fatalf("reply = %q, want %q", got, "echo:ping")
	}
}

// assertConnectError checks the shape every failed connect must have: one
// line, the standard prefix, the expected cause, and none of the secrets.
func assertConnectError(t *testing.T, err error, wantPrefix string, wantSubstr string, secrets ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("connect succeeded, want an error")
	}
	msg := err.Error()
	t.Logf("error: %s", msg)
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("error spans several lines: %q", msg)
	}
	if !strings.HasPrefix(msg, wantPrefix) {
		t.Errorf("error %q does not start with %q", msg, wantPrefix)
	}
	if !strings.Contains(strings.ToLower(msg), strings.ToLower(wantSubstr)) {
		t.Errorf("error %q does not mention %q", msg, wantSubstr)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			t.Errorf("error %q leaks secret %q", msg, s)
		}
	}
}

// writeSecret writes a credential the way an operator should: readable by
// the owner only.
func writeSecret(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// freePort finds a loopback port nobody listens on, for tests that must
// restart a server on the same address.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// eventually polls cond until it holds or the deadline passes; tests never
// sleep for a fixed time.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
