package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trainer"
)

func servePolicyCmd(g *globals) *cobra.Command {
	var checkpoint, addr, precision, version string
	cmd := &cobra.Command{
		Use:   "serve-policy",
		Short: "Serve the reference MoE policy over HTTP in SGLang's /generate format",
		Long: `serve-policy loads a reference MoE checkpoint (a local directory, else a key
prefix in the object store) and answers POST /generate as an SGLang server
started with --enable-return-routed-experts does: token ids in, token ids,
log-probs and per-layer routed experts out. Without a checkpoint it serves a
freshly initialised model of the configured shape. POST /update_weights_from_disk
{"model_path": DIR|KEY, "weight_version": V} swaps in new weights, as in SGLang.
POST /v1/chat/completions answers in OpenAI's chat format (not streamed), so the
llm task generator (stages.synth.generator: llm) can run against it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			opts := pipeline.InferenceOptions(cfg.Inference)
			if cmd.Flags().Changed("checkpoint") {
				opts.Checkpoint = checkpoint
			}
			if cmd.Flags().Changed("precision") {
				opts.Precision = precision
			}
			opts.Version = version
			ctx := cmd.Context()
			// The object store is opened only when a checkpoint lives there,
			// at start or on a later weight update.
			var (
				mu sync.Mutex
				in *local.Infra
			)
			defer func() {
				if in != nil {
					in.Close()
				}
			}()
			storeFor := func(ref string) (store.ObjectStore, error) {
				if inference.IsLocalCheckpoint(ref) {
					return nil, nil
				}
				mu.Lock()
				defer mu.Unlock()
				if in == nil {
					var err error
					if in, err = local.Open(ctx, cfg, local.Options{}); err != nil {
						return nil, err
					}
				}
				return in.Store, nil
			}
			st, err := storeFor(opts.Checkpoint)
			if err != nil {
				return err
			}
			ref, err := inference.OpenReference(ctx, opts, st)
			if err != nil {
				return err
			}
			srv := inference.NewServer(ref, opts.Checkpoint, slog.Default())
			srv.EnableWeightUpdates(func(ctx context.Context, path string) (*moe.Checkpoint, error) {
				st, err := storeFor(path)
				if err != nil {
					return nil, err
				}
				return inference.LoadCheckpoint(ctx, path, opts.Model, st)
			})
			return inference.ListenAndServe(ctx, addr, srv, func(a string) {
				slog.Info("serving policy", "url", "http://"+a, "weight_version", ref.WeightVersion(), "precision", ref.Precision().String(),
					"checkpoint", opts.Checkpoint)
				if g.json {
					_ = printJSON(cmd, map[string]string{"url": "http://" + a, "weight_version": ref.WeightVersion()})
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "serving on http://%s (weight version %s, %s)\n", a, ref.WeightVersion(), ref.Precision())
				}
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&checkpoint, "checkpoint", "", "checkpoint directory or object-store key prefix (default: the config's inference.checkpoint)")
	f.StringVar(&addr, "addr", "127.0.0.1:30000", "listen address (port 0 picks a free one)")
	f.StringVar(&precision, "precision", "", "serving precision, bf16 or f32 (default: the config's inference.precision)")
	f.StringVar(&version, "weight-version", "", "weight version to report (default: the checkpoint's policy_version, else 0)")
	return cmd
}

func moeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "moe",
		Short: "Reference MoE tools",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(moeGapCmd(g))
	return cmd
}

// gapResult is what `t1 moe gap --json` prints.
type gapResult struct {
	Checkpoint string             `json:"checkpoint"`
	SFTSteps   int                `json:"sft_steps"`
	Report     moe.GapReport      `json:"report"`
	Sampling   moe.SamplingParams `json:"sampling"`
}

func moeGapCmd(g *globals) *cobra.Command {
	var checkpoint, precision string
	var prompts, maxNew, sftSteps int
	var seed uint64
	cmd := &cobra.Command{
		Use:   "gap",
		Short: "Measure routing mismatches and the log-prob gap between serving and training, replay off and on",
		Long: `gap samples the user turns of the embedded corpus as prompts with the serving
path (temperature 1, top_p 1) and scores every generated token with the f32
training forward, once routing live and once replaying the served routing.
It reports the fraction of (token, layer) expert sets that differ and the mean
|Δ log-prob|. With --sft-steps N the model is first trained N supervised steps
on the embedded corpus (a fresh model is close to uniform).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if prompts < 1 || maxNew < 1 || sftSteps < 0 {
				return fmt.Errorf("moe gap: --prompts and --max-new-tokens must be at least 1 and --sft-steps not negative")
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			opts := pipeline.InferenceOptions(cfg.Inference)
			if cmd.Flags().Changed("checkpoint") {
				opts.Checkpoint = checkpoint
			}
			if cmd.Flags().Changed("precision") {
				opts.Precision = precision
			}
			prec, err := moe.ParsePrecision(opts.Precision)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var st store.ObjectStore
			if !inference.IsLocalCheckpoint(opts.Checkpoint) {
				in, err := local.Open(ctx, cfg, local.Options{})
				if err != nil {
					return err
				}
				defer in.Close()
				st = in.Store
			}
			ck, err := inference.LoadCheckpoint(ctx, opts.Checkpoint, opts.Model, st)
			if err != nil {
				return err
			}
			if sftSteps > 0 {
				if err := trainer.WarmUp(ck, sftSteps); err != nil {
					return err
				}
			}
			ps := moe.CorpusPrompts(ck.Tokenizer, prompts)
			sp := moe.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: maxNew, Seed: seed}
			rep, err := moe.MeasureGap(ctx, ck.Model, prec, ps, sp)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd, gapResult{Checkpoint: opts.Checkpoint, SFTSteps: sftSteps, Report: rep, Sampling: sp})
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "serving %s, training %s: %d sequences, %d generated tokens\n", rep.Serving, rep.Training, rep.Sequences, rep.Generated)
			fmt.Fprintln(w, "routing\tmismatched sets\tfraction\tmean |Δ logp|\tmax |Δ logp|")
			for _, r := range []struct {
				name string
				s    moe.GapStats
			}{{"live (replay off)", rep.ReplayOff}, {"replayed (R³)", rep.ReplayOn}} {
				fmt.Fprintf(w, "%s\t%d / %d\t%.4f\t%.5f\t%.5f\n", r.name, r.s.Mismatches, r.s.Sets, r.s.Fraction, r.s.MeanAbsLogProbGap, r.s.MaxAbsLogProbGap)
			}
			return w.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&checkpoint, "checkpoint", "", "checkpoint directory or object-store key prefix (default: the config's inference.checkpoint; empty: a fresh model)")
	f.StringVar(&precision, "precision", "", "serving precision, bf16 or f32 (default: the config's inference.precision)")
	f.IntVar(&prompts, "prompts", 8, "number of prompts (user turns of the embedded corpus, cycled)")
	f.IntVar(&maxNew, "max-new-tokens", 256, "tokens generated per prompt")
	f.IntVar(&sftSteps, "sft-steps", 0, "supervised steps on the embedded corpus before measuring")
	f.Uint64Var(&seed, "seed", 1, "sampling seed of the first prompt (the i-th uses seed+i)")
	return cmd
}
