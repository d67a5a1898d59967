package bus

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func startEmbedded(t *testing.T, opts EmbeddedOptions) *Embedded {
	t.Helper()
	e, err := StartEmbedded(opts)
	if err != nil {
		t.Fatalf("start embedded: %v", err)
	}
	return e
}

func TestEmbeddedNeedsStoreDir(t *testing.T) {
	_, err := StartEmbedded(EmbeddedOptions{})
	if err == nil || !strings.Contains(err.Error(), "store directory") {
		t.Fatalf("error = %v, want one about the store directory", err)
	}
}

// Other processes and the nats CLI reach the embedded server through
// ClientURL, so it must name a real TCP endpoint, not just an in-process one.
func TestEmbeddedClientURLOverTCP(t *testing.T) {
	e := startEmbedded(t, EmbeddedOptions{StoreDir: t.TempDir()})
	t.Cleanup(e.Shutdown)

	u, err := url.Parse(e.ClientURL())
	if err != nil {
		t.Fatalf("client url %q: %v", e.ClientURL(), err)
	}
	if u.Scheme != "nats" || u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Port() == "0" {
		t.Fatalf("client url = %q, want nats://127.0.0.1:<port>", e.ClientURL())
	}
	c, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", u.Host, err)
	}
	c.Close()

	nc := mustConnect(t, ConnectOptions{URLs: []string{e.ClientURL()}})
	roundTrip(t, nc)
	if nc.ConnectedUrl() != e.ClientURL() {
		t.Errorf("connected to %q, want %q", nc.ConnectedUrl(), e.ClientURL())
	}

	inproc := mustConnect(t, ConnectOptions{InProcess: e.Server()})
	roundTrip(t, inproc)
}

// Restarting on the same store directory is how t1 keeps its streams across
// process restarts; a second server must also be able to take the directory
// over as soon as Shutdown returns.
func TestEmbeddedRestartKeepsJetStreamState(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	first := startEmbedded(t, EmbeddedOptions{StoreDir: dir})
	t.Cleanup(first.Shutdown) // no-op once the test has shut it down itself
	nc := mustConnect(t, ConnectOptions{InProcess: first.Server()})
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     "EVENTS",
		Subjects: []string{"events.>"},
		Storage:  jetstream.FileStorage,
	}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	for i := range 3 {
		if _, err := js.Publish(ctx, "events.a", []byte(strconv.Itoa(i))); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	nc.Close()
	first.Shutdown()

	second := startEmbedded(t, EmbeddedOptions{StoreDir: dir})
	t.Cleanup(second.Shutdown)
	nc2 := mustConnect(t, ConnectOptions{URLs: []string{second.ClientURL()}})
	js2, err := jetstream.New(nc2)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js2.Stream(ctx, "EVENTS")
	if err != nil {
		t.Fatalf("stream after restart: %v", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 3 {
		t.Fatalf("stream has %d messages after restart, want 3", info.State.Msgs)
	}
	msg, err := stream.GetLastMsgForSubject(ctx, "events.a")
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Data) != "2" {
		t.Fatalf("last message = %q, want %q", msg.Data, "2")
	}
}

func TestEmbeddedPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	start := time.Now()
	_, err = StartEmbedded(EmbeddedOptions{StoreDir: t.TempDir(), Port: port})
	if err == nil {
		t.Fatal("embedded server started on a port that is taken")
	}
	if !strings.Contains(err.Error(), strconv.Itoa(port)) || !strings.Contains(err.Error(), "in use") {
		t.Errorf("error %q does not say port %d is in use", err, port)
	}
	// The default ready timeout is 10s; a taken port is known up front and
	// must not make the user wait for it.
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("StartEmbedded took %s to report a taken port", elapsed)
	}
}

// Stages keep one *nats.Conn for their whole life, so a restart of the
// server behind a fixed address must be invisible to them apart from a
// short disconnect.
func TestConnectReconnectsAfterServerRestart(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)

	first := startEmbedded(t, EmbeddedOptions{StoreDir: dir, Port: port})
	t.Cleanup(first.Shutdown) // no-op once the test has shut it down itself
	nc := mustConnect(t, ConnectOptions{URLs: []string{first.ClientURL()}})
	roundTrip(t, nc)

	// A subscription made before the restart must be replayed to the new
	// server without the stage doing anything.
	sub, err := nc.SubscribeSync("bus.test.survivor")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	first.Shutdown()
	eventually(t, 5*time.Second, "client to notice the shutdown", func() bool { return !nc.IsConnected() })

	second := startEmbedded(t, EmbeddedOptions{StoreDir: dir, Port: port})
	t.Cleanup(second.Shutdown)

	eventually(t, 5*time.Second, "client to reconnect", nc.IsConnected)
	if nc.Reconnects == 0 {
		t.Errorf("connection reports no reconnects")
	}
	roundTrip(t, nc)

	if err := nc.Publish("bus.test.survivor", []byte("after")); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(2 * time.Second)
	if err != nil {
		t.Fatalf("subscription did not survive the restart: %v", err)
	}
	if string(m.Data) != "after" {
		t.Fatalf("got %q, want %q", m.Data, "after")
	}
}
