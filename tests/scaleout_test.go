package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/bus"
	"github.com/t1pipe/t1/internal/testinfra"
)

// clusterPipeline is equalPipeline on an external NATS cluster whose
// stream keeps three replicas; the store stays embedded in the data
// directory. The bus section feeds no event id.
func clusterPipeline(urls []string) string {
	return equalPipeline + fmt.Sprintf(`bus:
  mode: external
  external:
    urls: [%s]
  stream:
    replicas: 3
`, strings.Join(urls, ", "))
}

// streamCount is how many events of typ the run tiny has in the stream
// of the cluster js is connected to; 0 until the stream exists.
func streamCount(ctx context.Context, js jetstream.JetStream, typ string) uint64 {
	s, err := js.Stream(ctx, "T1")
	if err != nil {
		return 0
	}
	subject := engine.Subject("tiny", typ)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0
	}
	return info.State.Subjects[subject]
}

// A run on a three-node cluster whose stream is replicated three times
// completes although the node leading the stream is killed mid-run and
// restarted, and it stores exactly what the single-server run stores.
func TestNATSClusterLosesANode(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	want := baselineDigest(t)
	c := testinfra.StartCluster(t, 3)
	data, cfg := t.TempDir(), writeConfig(t, clusterPipeline(c.URLs()))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nc, err := bus.Connect(ctx, bus.ConnectOptions{Name: "t1-test-watch", URLs: c.URLs()})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	run := command(t, data, cfg, "run", "--json", "--log-level", "warn")
	done := make(chan error, 1)
	var out []byte
	go func() {
		var err error
		out, err = finish(t, run, 3*time.Minute)
		done <- err
	}()
	// Mid-run: the pool is sealed and rollouts are being scored.
	checkFor(t, 2*time.Minute, func() error {
		if n := streamCount(ctx, js, "reward.scored"); n == 0 {
			return fmt.Errorf("no reward scored yet")
		}
		return nil
	})
	leader := c.StreamLeader("T1")
	if leader < 0 {
		leader = 0
	}
	scored := streamCount(ctx, js, "reward.scored")
	c.Kill(leader)
	t.Logf("killed node %d, the stream's leader, after %d rewards", leader, scored)
	time.Sleep(3 * time.Second)
	c.Restart(leader)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(out, &sum); err != nil || sum.Status != "completed" {
		t.Fatalf("run ended %q (%s): %v\n%s", sum.Status, sum.Reason, err, out)
	}
	if n := streamCount(ctx, js, "run.completed"); n != 1 {
		t.Fatalf("%d run.completed events", n)
	}
	sameDigest(t, want, readDigest(t, data, cfg))
}

// splitPipeline is equalPipeline with one handler per worker, so that a
// burst of rollouts cannot all go to one of two workers.
const splitPipeline = equalPipeline + `  concurrency: 1
`

// Two rollout workers, with no flag but the stage, share the rollout
// consumer: each plays some of the run's attempts, none is played twice,
// and the run stores exactly what the single-process run stores.
func TestTwoRolloutWorkersSplitARun(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	want := baselineDigest(t)
	data, cfg := t.TempDir(), writeConfig(t, splitPipeline)
	infraUp(t, data, cfg)
	for _, s := range pipelineStages {
		if s != "rollout" {
			background(t, command(t, data, cfg, "worker", "--stage", s))
		}
	}
	var workers []*exec.Cmd
	var outs []*bytes.Buffer
	for range 2 {
		w := command(t, data, cfg, "worker", "--stage", "rollout", "--json", "--log-level", "warn")
		out := &bytes.Buffer{}
		w.Stdout = out
		background(t, w)
		workers, outs = append(workers, w), append(outs, out)
	}
	completeRun(t, data, cfg, "--no-stages")
	var acked []int64
	for i, w := range workers {
		// Stopped by a signal, a worker that serves (no --until-idle) ends 0.
		w.Process.Signal(syscall.SIGINT)
		if err := w.Wait(); err != nil {
			t.Fatalf("rollout worker %d: %v", i, err)
		}
		var sum workerSummary
		if err := json.Unmarshal(outs[i].Bytes(), &sum); err != nil {
			t.Fatalf("rollout worker %d: %v: %s", i, err, outs[i])
		}
		if sum.Status != "stopped" || sum.Lease != "" || sum.Failed != 0 {
			t.Fatalf("rollout worker %d ended %+v", i, sum)
		}
		acked = append(acked, sum.Acked)
	}
	if acked[0] == 0 || acked[1] == 0 {
		t.Fatalf("rollout requests handled per worker: %v; want some by each", acked)
	}
	t.Logf("rollout requests handled per worker: %v", acked)
	sameDigest(t, want, readDigest(t, data, cfg))
}

// workerSummary is what `t1 worker --json` prints.
type workerSummary struct {
	Status string `json:"status"`
	Lease  string `json:"lease"`
	Acked  int64  `json:"acked"`
	Failed int64  `json:"failed"`
}
