package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/pipeline"
)

// workerSummary is what `t1 worker --json` prints when it ends.
type workerSummary struct {
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

func workerCmd(g *globals) *cobra.Command {
	var stage, run string
	var untilIdle, noLease, exclusive bool
	var idle, leaseTTL time.Duration
	cmd := &cobra.Command{
		Use:   "worker --stage S [--run R] [--until-idle]",
		Short: "Run one stage against the configured NATS and S3 (scale-out, cron, Slurm or Kubernetes jobs)",
		Long: `Runs a single stage's consumer. Any number of workers of one stage share its work through
its durable consumer, each running engine.concurrency handlers, with at most
engine.max_ack_pending events of the stage out at once across all of them. A stage that must
run once per run (control, eval) is leased: the worker first takes the stage's lease (a
JetStream KV entry renewed while it runs, expiring --lease-ttl after a crash), and a second one
exits 4 naming the holder. With --run R the worker runs that stage for run R alone, through a
consumer of R's events, beside other processes that run it for other runs (t1 run, t1 eval,
workers of other runs); without it, it runs the stage for every run and is refused while any
process runs it for one run, and the reverse. --exclusive leases any stage over every run;
--no-lease skips the lease.

--until-idle makes the worker exit 0 once nothing of the stage is pending or in flight for
--idle, for batch schedulers. --json prints a summary when the worker ends. Exit codes are
README's: 0 idle or stopped, 1 failed, 2 configuration, 3 NATS or S3 lost, 4 leased elsewhere,
5 interrupted before --until-idle found the stage idle.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stage == "" {
				return configError("--stage is required: control, synth, audit, rollout, reward, critic, ppo, sft or eval")
			}
			if leaseTTL < time.Second || leaseTTL > engine.MaxLeaseTTL {
				return configError("--lease-ttl %s: want 1s to %s", leaseTTL, engine.MaxLeaseTTL)
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			begin := time.Now()
			sum := workerSummary{Stage: stage}
			err = runWorker(cmd.Context(), cmd, cfg, stage, run, untilIdle, noLease, exclusive, idle, leaseTTL, &sum)
			sum.Elapsed = time.Since(begin)
			sum.ExitCode = exitCode(cmd.Context(), err)
			switch {
			case err == nil && sum.Status == "":
				sum.Status = "idle"
			case err != nil:
				sum.Status, sum.Reason = "failed", oneLine(err)
				if sum.ExitCode == exitStopped {
					sum.Status = "stopped"
				}
			}
			if g.json {
				if perr := printJSON(cmd, sum); perr != nil && err == nil {
					return perr
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&stage, "stage", "", "stage to run: control, synth, audit, rollout, reward, critic, ppo, sft or eval")
	f.StringVar(&run, "run", "", "with control or eval: run the stage for this run alone (default: for every run)")
	f.BoolVar(&untilIdle, "until-idle", false, "exit 0 once no event is pending or in flight")
	f.DurationVar(&idle, "idle", 10*time.Second, "with --until-idle, how long the stage must stay idle")
	f.BoolVar(&noLease, "no-lease", false, "take no lease, even for control or eval (their folds then break if two workers run)")
	f.BoolVar(&exclusive, "exclusive", false, "lease the stage whatever it is, so this worker is its only one")
	f.DurationVar(&leaseTTL, "lease-ttl", defaultLeaseTTL, "how long a crashed worker's lease lasts (1s to 10m)")
	return cmd
}

func runWorker(parent context.Context, cmd *cobra.Command, cfg config.Config, stage, run string, untilIdle, noLease, exclusive bool, idle, leaseTTL time.Duration, sum *workerSummary) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	in, err := connect(ctx, cfg, local.Options{})
	if err != nil {
		return err
	}
	defer in.Close()
	p, err := pipeline.Build(cfg, in.Log, in.Store, pipeline.WithWorkDir(in.WorkDir))
	if err != nil {
		return withCode(exitConfig, err)
	}
	st, err := p.Stage(stage)
	if err != nil {
		return withCode(exitConfig, err)
	}
	if run != "" {
		if !isSerial(st) {
			return configError("--run %s: only control and eval run per run; any number of %s workers share every run's work", run, stage)
		}
		if err := keys.ValidRun(run); err != nil {
			return configError("--run: %v", err)
		}
	}
	var leased []engine.Stage
	if !noLease && (exclusive || isSerial(st)) {
		leased = []engine.Stage{st}
		sum.Lease = leaseName(st.Name(), run)
	}
	lost := make(chan error, 1)
	release, err := holdLeases(ctx, in.Log, leased, run, leaseTTL, func(err error) {
		select {
		case lost <- err:
		default:
		}
		cancel()
	})
	if err != nil {
		return err
	}
	defer release()
	r := engine.NewRunner(in.Log, st, runnerConfig(cfg, p, st, run, false))
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
			return infraError(fmt.Errorf("stage %s: lease lost: %w", stage, lerr))
		default:
		}
		if err != nil {
			return infraError(err)
		}
		if untilIdle {
			return errStopped
		}
		sum.Status = "stopped"
		return nil
	}
	if !untilIdle {
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
		if time.Since(quiet) >= idle {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				return infraError(err)
			}
			sum.Status = "idle"
			fmt.Fprintf(cmd.ErrOrStderr(), "t1 worker: stage %s idle for %s; exiting\n", stage, idle)
			return nil
		}
	}
}

// isSerial tells a stage that must run once per run (engine.Serial).
func isSerial(s engine.Stage) bool {
	se, ok := s.(engine.Serial)
	return ok && se.Serial()
}

// runnerConfig is how this process runs s: a serial stage for run alone
// when run is set (the process leases it for that run), every other stage,
// and a serial one without a run, over every run; with own, every stage
// for run alone.
func runnerConfig(cfg config.Config, p *pipeline.Pipeline, s engine.Stage, run string, own bool) engine.RunnerConfig {
	rc := cfg.Engine.Runner(p.Hash())
	if isSerial(s) || own {
		rc.Run = run
	}
	return rc
}

// deadHere reports whether holder (as holdLeases names holders) is a
// process of this host that no longer runs: a t1 killed a moment ago, whose
// lease would otherwise keep its restart out until the TTL.
func deadHere(holder string) bool {
	f := strings.Fields(holder)
	if len(f) < 3 || f[1] != "pid" {
		return false
	}
	host, _ := os.Hostname()
	pid, err := strconv.Atoi(f[2])
	if f[0] != host || err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// defaultLeaseTTL is how long a crashed process's lease lasts.
const defaultLeaseTTL = 30 * time.Second

// leaseName is the lease of stage over every run (run empty) or of stage
// for run alone; the engine keeps the one and the other from being held
// at once (engine.Lease), while leases of two runs are independent.
func leaseName(stage, run string) string {
	if run == "" {
		return "stage-" + stage
	}
	return "stage-" + stage + "." + run
}

// holdLeases takes the lease of each of stages, for run (every run when
// empty), and renews them until ctx ends; lost is called, once, if one is
// lost meanwhile. release gives them up. A stage already leased elsewhere
// fails it with engine.ErrLeased (exit 4), naming the holder.
func holdLeases(ctx context.Context, l *engine.Log, stages []engine.Stage, run string, ttl time.Duration, lost func(error)) (release func(), err error) {
	var held []*engine.Lease
	release = func() {
		for _, ls := range held {
			_ = ls.Release(context.Background())
		}
	}
	host, _ := os.Hostname()
	holder := fmt.Sprintf("%s pid %d at %s", host, os.Getpid(), time.Now().UTC().Format(time.RFC3339Nano))
	for _, s := range stages {
		ls, err := l.AcquireLeaseFrom(ctx, leaseName(s.Name(), run), holder, ttl, deadHere)
		if err != nil {
			release()
			if errors.Is(err, engine.ErrLeased) {
				return nil, fmt.Errorf("stage %s%s runs elsewhere: %w", s.Name(), ofRun(run), err)
			}
			return nil, infraError(err)
		}
		held = append(held, ls)
		go func() {
			if err := ls.Keep(ctx); err != nil {
				lost(err)
			}
		}()
	}
	return release, nil
}

func ofRun(run string) string {
	if run == "" {
		return ""
	}
	return " of run " + run
}
