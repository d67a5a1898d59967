// Package inferencetest is the conformance suite every inference backend
// passes: the in-process reference engine, and the SGLang client against
// t1's server (or, given a URL, against a real SGLang server).
package inferencetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/t1pipe/t1/infra/inference"
)

// Model describes the served model, for range and shape checks.
type Model struct {
	Vocab, Layers, TopK, Experts int
	// Prompt is a valid prompt for the model.
	Prompt []int
	// Deterministic says that equal seeds give equal samples (true for the
	// reference engine; SGLang needs deterministic inference enabled).
	Deterministic bool
	// Routing says the backend returns routed experts.
	Routing bool
}

// Run checks eng against the Engine contract.
func Run(t *testing.T, eng inference.Engine, m Model) {
	ctx := context.Background()
	gen := func(t *testing.T, req inference.GenerateRequest) *inference.GenerateResponse {
		t.Helper()
		r, err := eng.Generate(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	base := func() inference.GenerateRequest {
		return inference.GenerateRequest{InputIDs: slices.Clone(m.Prompt), ReturnLogprob: true, ReturnRoutedExperts: m.Routing,
			SamplingParams: inference.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 16, Seed: 11}}
	}

	t.Run("shape", func(t *testing.T) {
		req := base()
		r := gen(t, req)
		n := len(r.OutputIDs)
		if n == 0 || n > 16 || r.CompletionTokens != n || r.PromptTokens != len(req.InputIDs) {
			t.Fatalf("%d outputs, counts %d/%d", n, r.PromptTokens, r.CompletionTokens)
		}
		if r.FinishReason != inference.FinishLength && r.FinishReason != inference.FinishStop {
			t.Fatalf("finish reason %q", r.FinishReason)
		}
		if r.FinishReason == inference.FinishLength && n != 16 {
			t.Fatalf("length finish after %d of 16 tokens", n)
		}
		for i, id := range r.OutputIDs {
			if id < 0 || id >= m.Vocab {
				t.Fatalf("output %d: id %d outside the vocabulary", i, id)
			}
		}
		if len(r.OutputTokenLogprobs) != n {
			t.Fatalf("%d log-probs for %d tokens", len(r.OutputTokenLogprobs), n)
		}
		for i, lp := range r.OutputTokenLogprobs {
			if !(lp <= 0) {
				t.Fatalf("log-prob %d = %v", i, lp)
			}
		}
		if !m.Routing {
			if r.RoutedExperts != nil {
				t.Fatal("routing returned though not expected")
			}
			return
		}
		rt := r.RoutedExperts
		if rt == nil {
			t.Fatalf("no routing: %s", r.RoutingUnavailable)
		}
		if rt.Tokens != len(req.InputIDs)+n-1 || rt.Layers != m.Layers || rt.TopK != m.TopK || len(rt.Experts) != rt.Tokens*rt.Layers*rt.TopK {
			t.Fatalf("routing shape [%d %d %d] with %d ids", rt.Tokens, rt.Layers, rt.TopK, len(rt.Experts))
		}
		for tk := 0; tk < rt.Tokens; tk++ {
			for l := 0; l < rt.Layers; l++ {
				// Any order: servers send the router's, which no
				// source promises; distinct and in range.
				set := rt.At(tk, l)
				for j, e := range set {
					if e < 0 || int(e) >= m.Experts || slices.Contains(set[:j], e) {
						t.Fatalf("token %d layer %d: experts %v not distinct and in range", tk, l, set)
					}
				}
			}
		}
	})

	t.Run("optional-outputs", func(t *testing.T) {
		req := base()
		req.ReturnLogprob, req.ReturnRoutedExperts = false, false
		r := gen(t, req)
		if r.OutputTokenLogprobs != nil || r.RoutedExperts != nil {
			t.Fatal("log-probs or routing returned without being asked for")
		}
	})

	t.Run("greedy-and-stop", func(t *testing.T) {
		req := base()
		req.SamplingParams.Temperature = 0
		a, b := gen(t, req), gen(t, req)
		if !slices.Equal(a.OutputIDs, b.OutputIDs) {
			t.Fatal("greedy decoding is not repeatable")
		}
		if len(a.OutputIDs) < 3 {
			t.Skip("greedy output too short to test stop tokens")
		}
		stop := a.OutputIDs[2]
		first := slices.Index(a.OutputIDs, stop)
		req.SamplingParams.StopTokenIDs = []int{stop}
		s := gen(t, req)
		if !slices.Equal(s.OutputIDs, a.OutputIDs[:first+1]) || s.FinishReason != inference.FinishStop {
			t.Fatalf("stop at %d: got %v (%s), want %v", stop, s.OutputIDs, s.FinishReason, a.OutputIDs[:first+1])
		}
		if s.MatchedStop != nil && *s.MatchedStop != stop {
			t.Fatalf("matched stop %d, want %d", *s.MatchedStop, stop)
		}
	})

	t.Run("seeded", func(t *testing.T) {
		if !m.Deterministic {
			t.Skip("backend not deterministic")
		}
		req := base()
		a, b := gen(t, req), gen(t, req)
		if !slices.Equal(a.OutputIDs, b.OutputIDs) || !slices.Equal(a.OutputTokenLogprobs, b.OutputTokenLogprobs) {
			t.Fatal("same seed, different samples")
		}
		if m.Routing && !slices.Equal(a.RoutedExperts.Experts, b.RoutedExperts.Experts) {
			t.Fatal("same seed, different routing")
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := eng.Generate(ctx, req)
				if err == nil && !slices.Equal(c.OutputIDs, a.OutputIDs) {
					err = errors.New("a concurrent request sampled differently")
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("bad-requests", func(t *testing.T) {
		for _, req := range []inference.GenerateRequest{
			{SamplingParams: inference.DefaultSampling()},
			{InputIDs: []int{m.Vocab + 1000}, SamplingParams: inference.DefaultSampling()},
		} {
			if _, err := eng.Generate(ctx, req); !errors.Is(err, inference.ErrBadRequest) {
				t.Errorf("input %v: %v, want ErrBadRequest", req.InputIDs, err)
			}
		}
	})
}
