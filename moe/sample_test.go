package moe

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

func samplePrompt(cfg Config, n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (i*37 + 11) % cfg.Vocab
	}
	return ids
}

// TestSamplerF32MatchesTrainer: at equal precision the KV-cached sampler and
// the full-sequence trainer are the same function, bit for bit.
func TestSamplerF32MatchesTrainer(t *testing.T) {
	for _, temp := range []float64{1, 0.7, 1.3} {
		t.Run(fmt.Sprint(temp), func(t *testing.T) { samplerMatchesTrainer(t, tinyConfig(), temp) })
	}
	// Widths that take the assembly tiles and their edges, and a sequence
	// longer than several attention blocks.
	t.Run("wide", func(t *testing.T) { samplerMatchesTrainer(t, wideConfig(), 1) })
}

// wideConfig has widths that exercise every gemm tile (16- and 8-column
// blocks, 64-column rows, odd remainders) while staying fast in tests.
func wideConfig() Config {
	return Config{Vocab: 44, Layers: 2, DModel: 32, Heads: 2, KVHeads: 1, HeadDim: 16, RopeTheta: 10000, RMSNormEps: 1e-6, NormTopKProb: true, Experts: 4, TopK: 2, DFF: 72, Context: 64, Seed: 5}
}

// samplerMatchesTrainer: at equal precision, the training forward at the
// sampling temperature gives the sampler's log-probs bit for bit.
func samplerMatchesTrainer(t *testing.T, cfg Config, temp float64) {
	cfg.Context = 64
	m := roughModel(t, cfg)
	s := NewSampler(m, F32)
	prompt := samplePrompt(cfg, 7)
	g, err := s.Generate(context.Background(), prompt, SamplingParams{Temperature: temp, TopP: 1, MaxNewTokens: 40, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.OutputIDs) != 40 || g.FinishReason != FinishLength {
		t.Fatalf("got %d tokens, finish %q", len(g.OutputIDs), g.FinishReason)
	}
	seq := append(slices.Clone(prompt), g.OutputIDs...)
	if g.Routing.Tokens != len(seq)-1 || len(g.Routing.Experts) != (len(seq)-1)*cfg.Layers*cfg.TopK {
		t.Fatalf("routing shape %d tokens, %d ids; want %d tokens", g.Routing.Tokens, len(g.Routing.Experts), len(seq)-1)
	}
	p, err := m.Forward(seq, ForwardOptions{Temperature: temp})
	if err != nil {
		t.Fatal(err)
	}
	for i, lp := range g.LogProbs {
		if tr := p.LogProbs[len(prompt)-1+i]; tr != lp {
			t.Errorf("token %d: sampler log-prob %v, trainer %v", i, lp, tr)
		}
	}
	if mm, total := CompareRouting(g.Routing, p.LiveRouting); mm != 0 {
		t.Errorf("%d of %d routing sets differ at equal precision", mm, total)
	}
}

func TestSamplerDeterministicAndSeeded(t *testing.T) {
	cfg := tinyConfig()
	cfg.Context = 64
	m := roughModel(t, cfg)
	prompt := samplePrompt(cfg, 5)
	sp := SamplingParams{Temperature: 0.9, TopP: 0.9, MaxNewTokens: 30, Seed: 42}
	a, err := NewSampler(m, BF16).Generate(context.Background(), prompt, sp)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSampler(m, BF16).Generate(context.Background(), prompt, sp)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.OutputIDs, b.OutputIDs) || !slices.Equal(a.LogProbs, b.LogProbs) || !slices.Equal(a.Routing.Experts, b.Routing.Experts) {
		t.Fatal("same seed gave different generations")
	}
	sp.Seed = 43
	c, err := NewSampler(m, BF16).Generate(context.Background(), prompt, sp)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a.OutputIDs, c.OutputIDs) {
		t.Fatal("different seeds gave identical 30-token generations")
	}
	for i, lp := range a.LogProbs {
		if lp > 0 || lp < -20 {
			t.Errorf("log-prob %d = %v", i, lp)
		}
	}
}

func TestSamplerStopAndLimits(t *testing.T) {
	cfg := tinyConfig()
	cfg.Context = 32
	m := roughModel(t, cfg)
	s := NewSampler(m, BF16)
	prompt := samplePrompt(cfg, 4)
	// Greedy generation, then stop on its third token.
	g, err := s.Generate(context.Background(), prompt, SamplingParams{MaxNewTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	stop := g.OutputIDs[2]
	first := slices.Index(g.OutputIDs, stop)
	h, err := s.Generate(context.Background(), prompt, SamplingParams{MaxNewTokens: 10, StopTokenIDs: []int{stop}})
	if err != nil {
		t.Fatal(err)
	}
	if h.FinishReason != FinishStop || h.MatchedStop != stop || len(h.OutputIDs) != first+1 || !slices.Equal(h.OutputIDs, g.OutputIDs[:first+1]) {
		t.Fatalf("stop: got %v (%s, %d), want prefix %v", h.OutputIDs, h.FinishReason, h.MatchedStop, g.OutputIDs[:first+1])
	}
	// The context bounds generation.
	c, err := s.Generate(context.Background(), prompt, SamplingParams{MaxNewTokens: 100, Temperature: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.OutputIDs) != cfg.Context-len(prompt) || c.FinishReason != FinishLength || c.Routing.Tokens != cfg.Context-1 {
		t.Fatalf("context: %d tokens, %s, routing %d", len(c.OutputIDs), c.FinishReason, c.Routing.Tokens)
	}
	z, err := s.Generate(context.Background(), prompt, SamplingParams{MaxNewTokens: 0})
	if err != nil || len(z.OutputIDs) != 0 || z.Routing.Tokens != len(prompt)-1 {
		t.Fatalf("zero tokens: %+v, %v", z, err)
	}
	for _, bad := range []struct {
		prompt []int
		sp     SamplingParams
	}{
		{nil, SamplingParams{MaxNewTokens: 1}},
		{[]int{cfg.Vocab}, SamplingParams{MaxNewTokens: 1}},
		{prompt, SamplingParams{MaxNewTokens: -1}},
		{prompt, SamplingParams{MaxNewTokens: 1, TopP: 1.5}},
		{prompt, SamplingParams{MaxNewTokens: 1, Temperature: -1}},
		{make([]int, cfg.Context+1), SamplingParams{MaxNewTokens: 1}},
	} {
		if _, err := s.Generate(context.Background(), bad.prompt, bad.sp); err == nil {
			t.Errorf("prompt %v params %+v: no error", bad.prompt, bad.sp)
		}
	}
}

// TestReplayRemovesMismatches: bf16 serving flips some routing decisions
// against the f32 trainer; replaying the served routing removes them all,
// and replaying the trainer's own live routing reproduces its forward.
func TestReplayRemovesMismatches(t *testing.T) {
	cfg := tinyConfig()
	cfg.Context = 256
	m := roughModel(t, cfg)
	prompt := samplePrompt(cfg, 8)
	g, err := NewSampler(m, BF16).Generate(context.Background(), prompt, SamplingParams{Temperature: 1, MaxNewTokens: 200, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	seq := append(slices.Clone(prompt), g.OutputIDs...)
	live, err := m.Forward(seq, ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mm, total := CompareRouting(g.Routing, live.Routing)
	if mm == 0 {
		t.Fatalf("no routing mismatches in %d sets between bf16 serving and f32 training", total)
	}
	rep, err := m.Forward(seq, ForwardOptions{Replay: &g.Routing})
	if err != nil {
		t.Fatal(err)
	}
	if mm, _ := CompareRouting(g.Routing, rep.Routing); mm != 0 {
		t.Fatalf("replay left %d mismatches", mm)
	}
	self, err := m.Forward(seq, ForwardOptions{Replay: &live.Routing})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(self.LogProbs, live.LogProbs) || !slices.Equal(self.Values, live.Values) {
		t.Fatal("replaying the live routing changed the forward")
	}
	t.Logf("bf16 vs f32: %d of %d routing sets differ", mm, total)
}

// TestPrefixCacheIsExact: a multi-turn sequence reusing the cached prefix
// gives exactly what a cold sampler computes.
func TestPrefixCacheIsExact(t *testing.T) {
	cfg := tinyConfig()
	cfg.Context = 128
	m := roughModel(t, cfg)
	warm := NewSampler(m, BF16)
	sp := SamplingParams{Temperature: 1, MaxNewTokens: 12, Seed: 4}
	prompt := samplePrompt(cfg, 6)
	for turn := 0; turn < 4; turn++ {
		g, err := warm.Generate(context.Background(), prompt, sp)
		if err != nil {
			t.Fatal(err)
		}
		cold := NewSampler(m, BF16)
		cold.SetPrefixCache(0)
		c, err := cold.Generate(context.Background(), prompt, sp)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(g.OutputIDs, c.OutputIDs) || !slices.Equal(g.LogProbs, c.LogProbs) || !slices.Equal(g.Routing.Experts, c.Routing.Experts) {
			t.Fatalf("turn %d: cached generation differs from a cold one", turn)
		}
		// Next turn: the history plus an observation.
		prompt = append(append(slices.Clone(prompt), g.OutputIDs...), 3, 5, 7)
	}
	if warm.PrefixCacheHits() == 0 {
		t.Fatal("the cache was never used")
	}
}
