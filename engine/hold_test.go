package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

func TestDeadHere(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		holder string
		dead   bool
	}{
		{fmt.Sprintf("%s pid %d at 2026-12-01T00:00:00Z", host, gone.Process.Pid), true},
		{fmt.Sprintf("%s pid %d at 2026-12-01T00:00:00Z", host, os.Getppid()), false},
		{fmt.Sprintf("%s pid %d at 2026-12-01T00:00:00Z", host, os.Getpid()), false},
		{fmt.Sprintf("%s-elsewhere pid %d at 2026-12-01T00:00:00Z", host, gone.Process.Pid), false},
		{"job-a", false},
	} {
		if got := DeadHere(c.holder); got != c.dead {
			t.Errorf("DeadHere(%q) = %v, want %v", c.holder, got, c.dead)
		}
	}
}

// Control and eval are single per run: a process holds their leases for
// one run beside another process's for another run, while a second
// holder for one of those runs, or one for every run, is refused naming
// the holder.
func TestStageLeasesArePerRun(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serial := []Stage{NewStage("control", nil, nil), NewStage("eval", nil, nil)}
	for _, run := range []string{"ra", "rb"} {
		release, err := l.HoldStageLeases(ctx, serial, run, DefaultLeaseTTL, func(err error) { t.Errorf("lease of run %s lost: %v", run, err) })
		if err != nil {
			t.Fatalf("leases of run %s beside the other run's: %v", run, err)
		}
		defer release()
	}
	holder := fmt.Sprintf("pid %d", os.Getpid())
	for _, c := range []struct {
		stages []Stage
		run    string
		want   string
	}{
		{serial[1:], "ra", "stage eval of run ra runs elsewhere"},
		{serial[:1], "", "stage control runs elsewhere"},
	} {
		_, err := l.HoldStageLeases(ctx, c.stages, c.run, DefaultLeaseTTL, func(error) {})
		if !errors.Is(err, ErrLeased) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), holder) {
			t.Errorf("%s of run %q taken twice: %v", c.stages[0].Name(), c.run, err)
		}
	}
	release, err := l.HoldStageLeases(ctx, serial, "rc", DefaultLeaseTTL, func(error) {})
	if err != nil {
		t.Fatalf("a run no process holds: %v", err)
	}
	release()
	if got := StageLease("control", "rc"); got != "stage-control.rc" {
		t.Errorf("lease %s", got)
	}
}

// A run's own consumers go, and no other's: neither the shared ones nor a
// job's within the run, nor another run's.
func TestDeleteRunConsumers(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	ctx := context.Background()
	for _, n := range []string{"eval", "eval_ra", "rollout_ra", "eval_rb", "eval_rb_0123456789ab", "rollout_x_ra"} {
		if _, err := l.Stream().CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: n, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.DeleteRunConsumers(ctx, "ra"); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string]bool{"eval": true, "eval_ra": false, "rollout_ra": false, "eval_rb": true, "eval_rb_0123456789ab": true, "rollout_x_ra": true} {
		if got, err := l.HasConsumer(ctx, n); err != nil || got != want {
			t.Errorf("consumer %s there: %v (%v), want %v", n, got, err, want)
		}
	}
	if err := l.DeleteConsumers(ctx, []string{"eval", "none"}); err != nil {
		t.Fatalf("deleting one that is not there: %v", err)
	}
}

func TestFailedCountsByRunAndType(t *testing.T) {
	t.Parallel()
	counts := countRows(Counts{
		"r1": {"rollout.requested": 4, "rollout.requested.failed": 2, "rollout.completed.failed": 1},
		"r2": {"task.synthesized.failed": 3, "task.audited": 5},
	})
	want := []EventCount{
		{Run: "r1", Type: "rollout.completed", Count: 1},
		{Run: "r1", Type: "rollout.requested", Count: 2},
		{Run: "r2", Type: "task.synthesized", Count: 3},
	}
	if got := failedCounts(counts); !reflect.DeepEqual(got, want) {
		t.Fatalf("failed counts %+v, want %+v", got, want)
	}
}
