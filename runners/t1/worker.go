package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/pipeline"
)

func workerCmd(g *globals) *cobra.Command {
	var stage string
	var untilIdle, noLease bool
	var idle, leaseTTL time.Duration
	cmd := &cobra.Command{
		Use:   "worker --stage S [--until-idle]",
		Short: "Run one stage against the configured NATS and S3 (scale-out, cron, Slurm or Kubernetes jobs)",
		Long: `Runs a single stage's consumer. Several workers of one stage share its work through the
durable consumer; --until-idle makes the worker exit 0 once nothing is pending or in flight for
--idle, for batch schedulers. Unless --no-lease, the worker first takes the stage's lease (a
JetStream KV entry renewed while it runs, expiring --lease-ttl after a crash), so two jobs of the
same stage never overlap; a second one exits with the holder's name.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stage == "" {
				return fmt.Errorf("--stage is required")
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			in, err := local.Open(ctx, cfg, local.Options{})
			if err != nil {
				return err
			}
			defer in.Close()
			p, err := pipeline.Build(cfg, in.Log, in.Store, pipeline.WithWorkDir(in.WorkDir))
			if err != nil {
				return err
			}
			st, err := p.Stage(stage)
			if err != nil {
				return err
			}
			if !noLease {
				host, _ := os.Hostname()
				lease, err := in.Log.AcquireLease(ctx, "stage-"+stage, fmt.Sprintf("%s pid %d", host, os.Getpid()), leaseTTL)
				if err != nil {
					return err
				}
				defer lease.Release(context.Background())
				go func() {
					if err := lease.Keep(ctx); err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "t1 worker: %v; stopping\n", err)
						cancel()
					}
				}()
			}
			done := make(chan error, 1)
			go func() { done <- engine.NewRunner(in.Log, st, cfg.Engine.Runner(p.Hash())).Run(ctx) }()
			if !untilIdle {
				return <-done
			}
			quiet := time.Time{}
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case err := <-done:
					return err
				case <-tick.C:
				}
				c, err := in.Log.Stream().Consumer(ctx, stage)
				if errors.Is(err, context.Canceled) {
					return nil
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
						return err
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "t1 worker: stage %s idle for %s; exiting\n", stage, idle)
					return nil
				}
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&stage, "stage", "", "stage to run: control, synth, audit, rollout, reward, critic, ppo, sft or eval")
	f.BoolVar(&untilIdle, "until-idle", false, "exit 0 once no event is pending or in flight")
	f.DurationVar(&idle, "idle", 10*time.Second, "with --until-idle, how long the stage must stay idle")
	f.BoolVar(&noLease, "no-lease", false, "skip the stage lease (several workers sharing one stage's work)")
	f.DurationVar(&leaseTTL, "lease-ttl", 30*time.Second, "how long a crashed worker's lease lasts")
	return cmd
}
