// Package worker runs one stage of the pipeline in a process of its own,
// as `t1 worker` does for scale-out, cron, Slurm and Kubernetes jobs: any
// number of workers of a stage share its work through its durable
// consumer, while a stage that must run once per run (control, eval)
// runs under a lease, for one run or for every run.
package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/known"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/pipeline"
)

// Options is what a worker runs, and how long.
type Options struct {
	Stage string
	// Run, with control or eval, runs the stage for that run alone.
	Run string
	// UntilIdle ends the worker once nothing of the stage is pending or
	// in flight for Idle.
	UntilIdle bool
	Idle      time.Duration
	// NoLease takes no lease; Exclusive leases any stage.
	NoLease, Exclusive bool
	LeaseTTL           time.Duration
}

// Summary is how a worker ended, as `t1 worker --json` prints it.
type Summary struct {
	Stage string `json:"stage"`
	// Status is idle (--until-idle found nothing left), stopped (a signal)
	// or failed.
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Lease names the lease the worker held, if any.
	Lease        string        `json:"lease,omitempty"`
	Acked        int64         `json:"acked"`
	Failed       int64         `json:"failed"`
	Retried      int64         `json:"retried"`
	DeadLettered int64         `json:"dead_lettered"`
	Elapsed      time.Duration `json:"elapsed_ns"`
	ExitCode     int           `json:"exit_code"`
}

// Check refuses options no worker can run with.
func (o Options) Check() error {
	if o.Stage == "" {
		return exit.Configf("--stage is required: control, synth, audit, rollout, reward, critic, ppo, sft or eval")
	}
	if err := known.Name("stage", "stages", o.Stage, Stages); err != nil {
		return err
	}
	if o.LeaseTTL < time.Second || o.LeaseTTL > engine.MaxLeaseTTL {
		return exit.Configf("--lease-ttl %s: want 1s to %s", o.LeaseTTL, engine.MaxLeaseTTL)
	}
	return nil
}

// Stages are the stages a worker can run, in pipeline order.
var Stages = []string{"control", "synth", "audit", "rollout", "reward", "critic", "ppo", "sft", "eval"}

// Run runs the stage until ctx ends, or with UntilIdle until the stage
// is idle, and says how it ended; log gets the line that says it went
// idle. The error, when there is one, carries its exit code, which the
// summary holds too.
func Run(ctx context.Context, log io.Writer, cfg config.Config, o Options) (Summary, error) {
	begin := time.Now()
	sum := Summary{Stage: o.Stage}
	err := run(ctx, log, cfg, o, &sum)
	sum.Elapsed = time.Since(begin)
	sum.ExitCode = exit.Code(ctx, err)
	switch {
	case err == nil && sum.Status == "":
		sum.Status = "idle"
	case err != nil:
		sum.Status, sum.Reason = "failed", exit.Line(err)
		if sum.ExitCode == exit.Stopped {
			sum.Status = "stopped"
		}
	}
	return sum, err
}

func run(parent context.Context, log io.Writer, cfg config.Config, o Options, sum *Summary) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	in, err := local.Open(ctx, cfg, local.Options{})
	if err != nil {
		return exit.InfraError(err)
	}
	defer in.Close()
	p, err := pipeline.Build(cfg, in.Log, in.Store, pipeline.WithWorkDir(in.WorkDir))
	if err != nil {
		return exit.With(exit.Config, err)
	}
	st, err := p.Stage(o.Stage)
	if err != nil {
		return exit.With(exit.Config, err)
	}
	if o.Run != "" {
		if !engine.IsSerial(st) {
			return exit.Configf("--run %s: only control and eval run per run; any number of %s workers share every run's work", o.Run, o.Stage)
		}
		if err := keys.ValidRun(o.Run); err != nil {
			return exit.Configf("--run: %v", err)
		}
	}
	var leased []engine.Stage
	if !o.NoLease && (o.Exclusive || engine.IsSerial(st)) {
		leased = []engine.Stage{st}
		sum.Lease = engine.StageLease(st.Name(), o.Run)
	}
	lost := make(chan error, 1)
	release, err := in.Log.HoldStageLeases(ctx, leased, o.Run, o.LeaseTTL, func(err error) {
		select {
		case lost <- err:
		default:
		}
		cancel()
	})
	if err != nil {
		return exit.InfraError(err)
	}
	defer release()
	r := engine.NewRunner(in.Log, st, p.RunnerConfig(st, o.Run, false))
	defer func() {
		s := r.Stats()
		sum.Acked, sum.Failed, sum.Retried, sum.DeadLettered = s.Acked, s.Failed, s.Retried, s.DeadLettered
	}()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	// ended says why the runner stopped: a lost lease, a failed runner (its
	// connection closed) or the signal.
	ended := func(err error) error {
		select {
		case lerr := <-lost:
			return exit.InfraError(fmt.Errorf("stage %s: lease lost: %w", o.Stage, lerr))
		default:
		}
		if err != nil {
			return exit.InfraError(err)
		}
		if o.UntilIdle {
			return exit.ErrStopped
		}
		sum.Status = "stopped"
		return nil
	}
	if !o.UntilIdle {
		return ended(<-done)
	}
	quiet := time.Time{}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return ended(err)
		case <-tick.C:
		}
		c, err := in.Log.Stream().Consumer(ctx, r.Durable())
		if errors.Is(err, context.Canceled) {
			return ended(<-done)
		}
		if err != nil {
			continue // the runner is still creating its consumer
		}
		info, err := c.Info(ctx)
		if err != nil {
			continue
		}
		if info.NumPending > 0 || info.NumAckPending > 0 {
			quiet = time.Time{}
			continue
		}
		if quiet.IsZero() {
			quiet = time.Now()
		}
		if time.Since(quiet) >= o.Idle {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				return exit.InfraError(err)
			}
			sum.Status = "idle"
			fmt.Fprintf(log, "t1 worker: stage %s idle for %s; exiting\n", o.Stage, o.Idle)
			return nil
		}
	}
}
