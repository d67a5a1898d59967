package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/pipeline"
)

func replayCmd(g *globals) *cobra.Command {
	var stage, run, into, since string
	var fromSeq uint64
	cmd := &cobra.Command{
		Use:   "replay --stage S --run R --into R2 [--from-seq N | --since T]",
		Short: "Re-run one stage over a run's past input events into a new run, leaving the original untouched",
		Long: `Hands every event of run R that stage S consumes (from a stream sequence or a time, else
from the start) to the stage as if it belonged to run R2, and publishes what the stage emits
into R2 — for example, re-score every attempt of a run with a fixed verifier without rolling
anything out again:

    t1 replay --stage reward --run main --into main-rescored

Objects the stage writes go under runs/R2/; those it reads (bundles, snapshots, tables) are the
ones R's events point at. Only the stage runs: downstream stages are not triggered.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stage == "" || into == "" {
				return fmt.Errorf("--stage and --into are required")
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			if run == "" {
				run = cfg.Run.ID
			}
			var from engine.ReplayFrom
			switch {
			case fromSeq > 0 && since != "":
				return fmt.Errorf("--from-seq and --since exclude each other")
			case fromSeq > 0:
				from.Seq = fromSeq
			case since != "":
				t, err := time.Parse(time.RFC3339, since)
				if err != nil {
					return fmt.Errorf("--since: want an RFC 3339 time such as 2026-11-29T20:00:00Z: %w", err)
				}
				from.Time = t
			}
			ctx := cmd.Context()
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
			res, err := in.Log.Branch(ctx, st, run, into, from, "replay:"+p.Hash(), nil)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd, res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stage %s: %d events of %s replayed into %s: %d emitted, %d failed\n",
				stage, res.Inputs, run, into, res.Emitted, res.Failed)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&stage, "stage", "", "stage to re-run: control, synth, audit, rollout, reward, critic, ppo or eval")
	f.StringVar(&run, "run", "", "source run (default: the config's run.id)")
	f.StringVar(&into, "into", "", "new run id the stage's outputs go to")
	f.Uint64Var(&fromSeq, "from-seq", 0, "start at this stream sequence")
	f.StringVar(&since, "since", "", "start at this time (RFC 3339)")
	return cmd
}
