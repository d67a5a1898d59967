package inference

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/tokenizer"
)

// Reference serves the in-process reference MoE.
type Reference struct {
	cur atomic.Pointer[policy]
}

type policy struct {
	sampler *moe.Sampler
	tok     tokenizer.Tokenizer
	version string
}

// NewReference serves a snapshot of m at precision prec, reported as weight
// version version. tok may be nil; it only supplies token texts.
func NewReference(m *moe.Model, tok tokenizer.Tokenizer, prec moe.Precision, version string) *Reference {
	r := &Reference{}
	r.cur.Store(&policy{sampler: moe.NewSampler(m, prec), tok: tok, version: version})
	return r
}

// SetPolicy swaps in a snapshot of new weights at the current precision;
// requests already running finish on the old ones.
func (r *Reference) SetPolicy(m *moe.Model, tok tokenizer.Tokenizer, version string) {
	r.cur.Store(&policy{sampler: moe.NewSampler(m, r.Precision()), tok: tok, version: version})
}

// Config is the served model's shape.
func (r *Reference) Config() moe.Config { return r.cur.Load().sampler.Config() }

// Tokenizer is the served tokenizer (may be nil).
func (r *Reference) Tokenizer() tokenizer.Tokenizer { return r.cur.Load().tok }

// WeightVersion is the served policy version.
func (r *Reference) WeightVersion() string { return r.cur.Load().version }

// Precision is the serving precision.
func (r *Reference) Precision() moe.Precision { return r.cur.Load().sampler.Precision() }

// Generate implements Engine.
func (r *Reference) Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error) {
	p := r.cur.Load()
	sp := req.SamplingParams
	g, err := p.sampler.Generate(ctx, req.InputIDs, moe.SamplingParams{
		Temperature: sp.Temperature, TopP: sp.TopP, MaxNewTokens: sp.MaxNewTokens, StopTokenIDs: sp.StopTokenIDs, Seed: sp.Seed,
	})
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("reference: %w", err)
		}
		return nil, fmt.Errorf("reference: %w: %v", ErrBadRequest, err)
	}
	resp := &GenerateResponse{OutputIDs: g.OutputIDs, FinishReason: g.FinishReason, PromptTokens: len(req.InputIDs),
		CompletionTokens: len(g.OutputIDs), WeightVersion: p.version}
	if g.MatchedStop >= 0 {
		ms := g.MatchedStop
		resp.MatchedStop = &ms
	}
	if req.ReturnLogprob {
		resp.OutputTokenLogprobs = g.LogProbs
	}
	if req.ReturnRoutedExperts {
		resp.RoutedExperts = &g.Routing
	}
	return resp, nil
}
