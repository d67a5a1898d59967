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

func (m *modelFlags) bind(cmd *cobra.Command, checkpointHelp string) *cobra.Command {
	cmd.Flags().StringVar(&m.checkpoint, "checkpoint", "", checkpointHelp)
	cmd.Flags().StringVar(&m.precision, "precision", "", "serving precision, bf16 or f32 (default: the config's inference.precision)")
	return cmd
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
	cmd := leaf("serve-policy", "Serve the reference MoE policy over HTTP in SGLang's /generate format", policy.ServeHelp, cobra.NoArgs,
		g.configured(nil, func(cmd *cobra.Command, _ []string, cfg config.Config) error {
			opts := m.options(cmd, cfg)
			opts.Version = version
			return policy.Serve(cmd.Context(), cfg, opts, addr, func(s policy.Serving) {
				if g.json {
					_ = printJSON(cmd, s)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "serving on %s (weight version %s, %s)\n", s.URL, s.WeightVersion, s.Precision)
				}
			})
		}))
	m.bind(cmd, "checkpoint directory or object-store key prefix (default: the config's inference.checkpoint)")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:30000", "listen address (port 0 picks a free one)")
	cmd.Flags().StringVar(&version, "weight-version", "", "weight version to report (default: the checkpoint's policy_version, else 0)")
	return cmd
}

func moeCmd(g *globals) *cobra.Command {
	var m modelFlags
	var o policy.GapOptions
	gap := leaf("gap", "Measure routing mismatches and the log-prob gap between serving and training, replay off and on", policy.GapHelp, cobra.NoArgs,
		g.configured(func() error { return o.Check() }, func(cmd *cobra.Command, _ []string, cfg config.Config) error {
			gap, err := policy.MeasureGap(cmd.Context(), cfg, m.options(cmd, cfg), o)
			return g.show(cmd, gap, err)
		}))
	f := m.bind(gap, "checkpoint directory or object-store key prefix (default: the config's inference.checkpoint; empty: a fresh model)").Flags()
	f.IntVar(&o.Prompts, "prompts", 8, "number of prompts (user turns of the embedded corpus, cycled)")
	f.IntVar(&o.MaxNewTokens, "max-new-tokens", 256, "tokens generated per prompt")
	f.IntVar(&o.SFTSteps, "sft-steps", 0, "supervised steps on the embedded corpus before measuring")
	f.Uint64Var(&o.Seed, "seed", 1, "sampling seed of the first prompt (the i-th uses seed+i)")
	var out string
	initCmd := leaf("init", "Write a freshly initialised model of the configured shape as a checkpoint directory", policy.InitHelp, cobra.NoArgs,
		g.configured(nil, func(cmd *cobra.Command, _ []string, cfg config.Config) error {
			ck, err := policy.Init(cfg.Inference.Model, out)
			return g.show(cmd, ck, err)
		}))
	initCmd.Flags().StringVar(&out, "out", "", "the checkpoint directory to create (required)")
	_ = initCmd.MarkFlagRequired("out")
	cmd := group("moe", "Reference MoE tools", "", gap, initCmd)
	cmd.Args = cobra.NoArgs
	return cmd
}
