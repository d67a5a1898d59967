package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/policy"
)

// modelFlags name the checkpoint and precision over the configuration's.
type modelFlags struct{ checkpoint, precision string }

func (m *modelFlags) bind(cmd *cobra.Command, checkpointHelp string) {
	cmd.Flags().StringVar(&m.checkpoint, "checkpoint", "", checkpointHelp)
	cmd.Flags().StringVar(&m.precision, "precision", "", "serving precision, bf16 or f32 (default: the config's inference.precision)")
}

// options are the configuration's inference options with the flags given
// over them: an empty --checkpoint given is a fresh model.
func (m *modelFlags) options(cmd *cobra.Command, cfg config.Config) inference.Options {
	opts := pipeline.InferenceOptions(cfg.Inference)
	if cmd.Flags().Changed("checkpoint") {
		opts.Checkpoint = m.checkpoint
	}
	if cmd.Flags().Changed("precision") {
		opts.Precision = m.precision
	}
	return opts
}

func servePolicyCmd(g *globals) *cobra.Command {
	var m modelFlags
	var addr, version string
	cmd := &cobra.Command{
		Use:   "serve-policy",
		Short: "Serve the reference MoE policy over HTTP in SGLang's /generate format",
		Long:  policy.ServeHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			opts := m.options(cmd, cfg)
			opts.Version = version
			return policy.Serve(cmd.Context(), cfg, opts, addr, func(s policy.Serving) {
				if g.json {
					_ = printJSON(cmd, s)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "serving on %s (weight version %s, %s)\n", s.URL, s.WeightVersion, s.Precision)
				}
			})
		},
	}
	m.bind(cmd, "checkpoint directory or object-store key prefix (default: the config's inference.checkpoint)")
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:30000", "listen address (port 0 picks a free one)")
	f.StringVar(&version, "weight-version", "", "weight version to report (default: the checkpoint's policy_version, else 0)")
	return cmd
}

func moeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "moe", Short: "Reference MoE tools", Args: cobra.NoArgs}
	var m modelFlags
	var o policy.GapOptions
	gap := &cobra.Command{
		Use:   "gap",
		Short: "Measure routing mismatches and the log-prob gap between serving and training, replay off and on",
		Long:  policy.GapHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Check(); err != nil {
				return err
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			gap, err := policy.MeasureGap(cmd.Context(), cfg, m.options(cmd, cfg), o)
			if err != nil {
				return err
			}
			return g.emitErr(cmd, gap, gap.WriteText)
		},
	}
	m.bind(gap, "checkpoint directory or object-store key prefix (default: the config's inference.checkpoint; empty: a fresh model)")
	f := gap.Flags()
	f.IntVar(&o.Prompts, "prompts", 8, "number of prompts (user turns of the embedded corpus, cycled)")
	f.IntVar(&o.MaxNewTokens, "max-new-tokens", 256, "tokens generated per prompt")
	f.IntVar(&o.SFTSteps, "sft-steps", 0, "supervised steps on the embedded corpus before measuring")
	f.Uint64Var(&o.Seed, "seed", 1, "sampling seed of the first prompt (the i-th uses seed+i)")
	cmd.AddCommand(gap)
	return cmd
}
