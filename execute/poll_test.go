package execute

import (
	"context"
	"testing"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/bus"
	"github.com/t1pipe/t1/schemas"
)

// A progress loop rides out a log it cannot read (the server gone, as
// while a cluster elects a new stream leader) with the counts it last
// read, and gives up only once the outage outlasts its grace.
func TestCountPollerRidesOutAnOutage(t *testing.T) {
	t.Parallel()
	srv, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := bus.Connect(ctx, bus.ConnectOptions{URLs: []string{srv.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	l, err := engine.OpenLog(ctx, nc, engine.LogConfig{DedupWindow: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	root, err := engine.NewRootEvent("outage", schemas.RunStarted, "k", map[string]int{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, root); err != nil {
		t.Fatal(err)
	}
	p := newCountPoller(l, "outage")
	counts, err := p.poll(ctx)
	if err != nil || counts[schemas.RunStarted] != 1 {
		t.Fatalf("before the outage: %v, %v", counts, err)
	}
	srv.Shutdown()

	p.timeout = 200 * time.Millisecond
	counts, err = p.poll(ctx)
	if err != nil || counts[schemas.RunStarted] != 1 {
		t.Fatalf("within the grace: want the last counts and no error, got %v, %v", counts, err)
	}
	p.grace = 0
	if counts, err = p.poll(ctx); err == nil {
		t.Fatalf("past the grace: want an error, got %v", counts)
	}
}
