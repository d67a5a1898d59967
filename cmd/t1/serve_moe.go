package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/tokenizer"
	"github.com/t1pipe/t1/trainer"
)

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
				if err := warmUp(ck, sftSteps); err != nil {
					return err
				}
			}
			ps := corpusPrompts(ck.Tokenizer, prompts)
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

// corpusPrompts turns the user turns of the embedded corpus into chat
// prompts ending in <|assistant|>, cycling to reach n. A Hugging Face
// tokenizer reads t1's turn markers as ordinary text, which serves the
// gap measurement as well: it needs ids, not a conversation.
func corpusPrompts(tok tokenizer.Tokenizer, n int) [][]int {
	var turns []string
	for _, part := range strings.Split(moe.Corpus(), moe.TokUser)[1:] {
		if text, _, ok := strings.Cut(part, moe.TokEnd); ok {
			turns = append(turns, text)
		}
	}
	out := make([][]int, n)
	for i := range out {
		out[i] = tok.Encode(moe.TokUser + turns[i%len(turns)] + moe.TokEnd + moe.TokAssistant)
	}
	return out
}

// warmUp trains the checkpoint's model for steps supervised steps on
// 128-token windows of the embedded corpus.
func warmUp(ck *moe.Checkpoint, steps int) error {
	ids := ck.Tokenizer.Encode(moe.Corpus())
	var seqs [][]int
	for i := 0; i+128 <= len(ids) && len(seqs) < 8; i += 128 {
		seqs = append(seqs, ids[i:i+128])
	}
	opt := moe.NewAdam(ck.Model, moe.AdamConfig{LR: 3e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	for i := 0; i < steps; i++ {
		if _, err := trainer.SFTStep(ck.Model, opt, seqs, nil, 1); err != nil {
			return fmt.Errorf("sft warm-up: %w", err)
		}
	}
	return nil
}
