// Package policy serves the reference MoE policy of a configuration over
// HTTP and measures its serving-training gap, loading a checkpoint from a
// local directory or, only when it lives there, the object store.
package policy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"text/tabwriter"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trainer"
)

// Help texts of `t1 serve-policy` and `t1 moe gap`.
const (
	ServeHelp = `serve-policy loads a reference MoE checkpoint (a local directory, else a key
prefix in the object store) and answers POST /generate as an SGLang server
started with --enable-return-routed-experts does: token ids in, token ids,
log-probs and per-layer routed experts out. Without a checkpoint it serves a
freshly initialised model of the configured shape. POST /update_weights_from_disk
{"model_path": DIR|KEY, "weight_version": V} swaps in new weights, as in SGLang.
POST /v1/chat/completions answers in OpenAI's chat format (not streamed), so the
llm task generator (stages.synth.generator: llm) can run against it.`
	GapHelp = `gap samples the user turns of the embedded corpus as prompts with the serving
path (temperature 1, top_p 1) and scores every generated token with the f32
training forward, once routing live and once replaying the served routing.
It reports the fraction of (token, layer) expert sets that differ and the mean
|Δ log-prob|. With --sft-steps N the model is first trained N supervised steps
on the embedded corpus (a fresh model is close to uniform).`
)

// stores opens the configuration's object store the first time a
// checkpoint that lives there is named, and only then.
type stores struct {
	ctx context.Context
	cfg config.Config
	mu  sync.Mutex
	in  *local.Infra
}

func (s *stores) For(ref string) (store.ObjectStore, error) {
	if inference.IsLocalCheckpoint(ref) {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.in == nil {
		in, err := local.Open(s.ctx, s.cfg, local.Options{})
		if err != nil {
			return nil, err
		}
		s.in = in
	}
	return s.in.Store, nil
}

func (s *stores) Close() {
	if s.in != nil {
		s.in.Close()
	}
}

// Serving says where the server listens and what it serves.
type Serving struct {
	URL           string `json:"url"`
	WeightVersion string `json:"weight_version"`
	Precision     string `json:"-"`
}

// Serve answers SGLang's generate API (and weight updates, and chat
// completions) on addr until ctx ends, calling ready once it listens.
func Serve(ctx context.Context, cfg config.Config, opts inference.Options, addr string, ready func(Serving)) error {
	st := &stores{ctx: ctx, cfg: cfg}
	defer st.Close()
	s, err := st.For(opts.Checkpoint)
	if err != nil {
		return err
	}
	ref, err := inference.OpenReference(ctx, opts, s)
	if err != nil {
		return err
	}
	srv := inference.NewServer(ref, opts.Checkpoint, slog.Default())
	srv.EnableWeightUpdates(func(ctx context.Context, path string) (*moe.Checkpoint, error) {
		s, err := st.For(path)
		if err != nil {
			return nil, err
		}
		return inference.LoadCheckpoint(ctx, path, opts.Model, s)
	})
	return inference.ListenAndServe(ctx, addr, srv, func(a string) {
		slog.Info("serving policy", "url", "http://"+a, "weight_version", ref.WeightVersion(), "precision", ref.Precision().String(),
			"checkpoint", opts.Checkpoint)
		ready(Serving{URL: "http://" + a, WeightVersion: ref.WeightVersion(), Precision: ref.Precision().String()})
	})
}

// GapOptions size a gap measurement.
type GapOptions struct {
	Prompts, MaxNewTokens int
	// SFTSteps are supervised steps on the embedded corpus before it.
	SFTSteps int
	Seed     uint64
}

// Check refuses a measurement of nothing.
func (o GapOptions) Check() error {
	if o.Prompts < 1 || o.MaxNewTokens < 1 || o.SFTSteps < 0 {
		return fmt.Errorf("moe gap: --prompts and --max-new-tokens must be at least 1 and --sft-steps not negative")
	}
	return nil
}

// Gap is what `t1 moe gap --json` prints.
type Gap struct {
	Checkpoint string             `json:"checkpoint"`
	SFTSteps   int                `json:"sft_steps"`
	Report     moe.GapReport      `json:"report"`
	Sampling   moe.SamplingParams `json:"sampling"`
}

// MeasureGap samples the corpus's prompts with the serving path and
// scores them with the training forward, routing live and replayed.
func MeasureGap(ctx context.Context, cfg config.Config, opts inference.Options, o GapOptions) (*Gap, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	prec, err := moe.ParsePrecision(opts.Precision)
	if err != nil {
		return nil, err
	}
	st := &stores{ctx: ctx, cfg: cfg}
	defer st.Close()
	s, err := st.For(opts.Checkpoint)
	if err != nil {
		return nil, err
	}
	ck, err := inference.LoadCheckpoint(ctx, opts.Checkpoint, opts.Model, s)
	if err != nil {
		return nil, err
	}
	if o.SFTSteps > 0 {
		if err := trainer.WarmUp(ck, o.SFTSteps); err != nil {
			return nil, err
		}
	}
	ps := moe.CorpusPrompts(ck.Tokenizer, o.Prompts)
	sp := moe.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: o.MaxNewTokens, Seed: o.Seed}
	rep, err := moe.MeasureGap(ctx, ck.Model, prec, ps, sp)
	if err != nil {
		return nil, err
	}
	return &Gap{Checkpoint: opts.Checkpoint, SFTSteps: o.SFTSteps, Report: rep, Sampling: sp}, nil
}

// WriteText prints the gap as a table, replay off and on.
func (g *Gap) WriteText(out io.Writer) error {
	rep := g.Report
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "serving %s, training %s: %d sequences, %d generated tokens\n", rep.Serving, rep.Training, rep.Sequences, rep.Generated)
	fmt.Fprintln(w, "routing\tmismatched sets\tfraction\tmean |Δ logp|\tmax |Δ logp|")
	for _, r := range []struct {
		name string
		s    moe.GapStats
	}{{"live (replay off)", rep.ReplayOff}, {"replayed (R³)", rep.ReplayOn}} {
		fmt.Fprintf(w, "%s\t%d / %d\t%.4f\t%.5f\t%.5f\n", r.name, r.s.Mismatches, r.s.Sets, r.s.Fraction, r.s.MeanAbsLogProbGap, r.s.MaxAbsLogProbGap)
	}
	return w.Flush()
}
