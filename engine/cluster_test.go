package engine_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/bus"
	"github.com/t1pipe/t1/internal/testinfra"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Run(m)) }

// A replay reads to the end of the log as the stream's leader holds it,
// although the server may place its consumer on a replica that is still
// catching up: a node restarted after missing events counts nothing
// pending behind what it has copied so far.
func TestReplayReadsPastALaggingReplica(t *testing.T) {
	t.Parallel()
	testinfra.Long(t)
	c := testinfra.StartCluster(t, 3)
	ctx := context.Background()
	nc, err := bus.Connect(ctx, bus.ConnectOptions{URLs: c.URLs()})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	l, err := engine.OpenLog(ctx, nc, engine.LogConfig{DedupWindow: time.Minute, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(key string) {
		ev, err := engine.NewRootEvent("r1", "demo.in", key, map[string]string{"key": key})
		if err != nil {
			t.Fatal(err)
		}
		// A publish may time out while the cluster settles after the
		// kill, on a loaded machine; its message id makes a retry
		// publish it once.
		for try := 1; ; try++ {
			_, err := l.Publish(ctx, ev)
			if err == nil {
				return
			}
			if try == 5 {
				t.Fatal(err)
			}
		}
	}
	publish("first")
	follower := (c.StreamLeader(l.Config().Stream) + 1) % 3
	c.Kill(follower)
	const missed = 2000
	for i := range missed {
		publish(fmt.Sprint(i))
	}
	c.Restart(follower)
	for i := range 30 {
		n := 0
		if err := l.ReplayRun(ctx, "r1", nil, func(engine.Event) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n != missed+1 {
			t.Fatalf("replay %d after the restart read %d events of %d", i, n, missed+1)
		}
	}
}
