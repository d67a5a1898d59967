package worker

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/local"
)

// Control and eval are single per run: while one process holds their
// leases for runs ra and rb, a worker of either of those runs, or of
// control over every run, exits 4 naming the holder; a worker of a run no
// process holds runs until it is idle under that run's lease, and any
// number of workers of a shared stage may run.
func TestWorkersAreLeasedPerRun(t *testing.T) {
	cfg := config.Default()
	cfg.Data = t.TempDir()
	cfg.Run.ID = "ra"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in, err := local.Open(ctx, cfg, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	serial := []engine.Stage{engine.NewStage("control", nil, nil), engine.NewStage("eval", nil, nil)}
	for _, run := range []string{"ra", "rb"} {
		release, err := in.Log.HoldStageLeases(ctx, serial, run, engine.DefaultLeaseTTL, func(err error) { t.Errorf("lease of run %s lost: %v", run, err) })
		if err != nil {
			t.Fatal(err)
		}
		defer release()
	}
	holder := fmt.Sprintf("pid %d", os.Getpid())
	opts := func(stage, run string) Options {
		return Options{Stage: stage, Run: run, UntilIdle: true, Idle: time.Second, LeaseTTL: engine.DefaultLeaseTTL}
	}
	for _, tc := range []struct {
		name string
		o    Options
		want int
	}{
		{"control of a run held", opts("control", "ra"), exit.Busy},
		{"eval of a run held", opts("eval", "rb"), exit.Busy},
		{"control of every run", opts("control", ""), exit.Busy},
		{"a shared stage of one run", opts("rollout", "ra"), exit.Config},
		{"a bad run", opts("control", "Not_A_Run"), exit.Config},
		{"an unknown stage", opts("nope", ""), exit.Config},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum, err := Run(ctx, io.Discard, cfg, tc.o)
			if got := exit.Code(ctx, err); got != tc.want || sum.ExitCode != tc.want || sum.Status != "failed" {
				t.Fatalf("exit %d (%v), summary %+v, want %d", got, err, sum, tc.want)
			}
			if tc.want == exit.Busy && !strings.Contains(err.Error(), holder) {
				t.Fatalf("refused without naming the holder (%s): %v", holder, err)
			}
		})
	}
	sum, err := Run(ctx, io.Discard, cfg, opts("control", "rc"))
	if err != nil || sum.Lease != "stage-control.rc" || sum.Status != "idle" || sum.ExitCode != 0 {
		t.Fatalf("control of a run nobody holds: %v, %+v", err, sum)
	}
}

func TestCheck(t *testing.T) {
	for _, o := range []Options{{}, {Stage: "rollout"}, {Stage: "rollout", LeaseTTL: time.Hour}} {
		if err := o.Check(); exit.Code(context.Background(), err) != exit.Config {
			t.Errorf("%+v: %v", o, err)
		}
	}
	if err := (Options{Stage: "rollout", LeaseTTL: time.Minute}).Check(); err != nil {
		t.Fatal(err)
	}
}
