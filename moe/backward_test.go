package moe

import (
	"context"
	"math"
	"slices"
	"testing"
)

// chatSeqs tokenises the embedded corpus into chunks of length n.
func chatSeqs(t testing.TB, n, count int) [][]int {
	tok, err := DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(Corpus())
	var out [][]int
	for i := 0; i+n <= len(ids) && len(out) < count; i += n {
		out = append(out, ids[i:i+n])
	}
	return out
}

// nllStep is one supervised step of next-token NLL over every target of
// seqs, gradient norm clipped to 1: what trainer.SFTStep does with
// unmasked sequences, for tests that need a model that has trained a
// little (this package's tests cannot import trainer).
func nllStep(t testing.TB, m *Model, opt *Adam, seqs [][]int) float64 {
	t.Helper()
	n := 0
	for _, s := range seqs {
		n += len(s) - 1
	}
	var loss float64
	for _, s := range seqs {
		p, err := m.Forward(s, ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d := make([]float32, len(s)-1)
		for i := range d {
			d[i] = -1 / float32(n)
			loss -= float64(p.LogProbs[i]) / float64(n)
		}
		if err := m.Backward(p, d, nil); err != nil {
			t.Fatal(err)
		}
	}
	opt.Update(1)
	return loss
}

// A critic's score head, read at every position, regresses to a target
// through Backward's value gradients; a policy takes no value gradients
// and a critic no log-prob ones.
func TestValueHeadFitsValues(t *testing.T) {
	cfg := tinyConfig()
	m, err := NewCritic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opt := NewAdam(m, AdamConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	ids := samplePrompt(cfg, 10)
	target := float32(2.5)
	mse := func() float64 {
		p, err := m.Forward(ids, ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var s float64
		for _, x := range p.Values {
			s += float64((x - target) * (x - target))
		}
		return s / float64(len(p.Values))
	}
	before := mse()
	for i := 0; i < 30; i++ {
		p, err := m.Forward(ids, ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d := make([]float32, len(ids))
		for j, v := range p.Values {
			d[j] = 2 * (v - target) / float32(len(ids))
		}
		if err := m.Backward(p, nil, d); err != nil {
			t.Fatal(err)
		}
		opt.Update(1)
	}
	if after := mse(); !(after < before/4) {
		t.Fatalf("value MSE %.4f -> %.4f", before, after)
	}
	p, err := m.Forward(ids, ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.LogProbs != nil || m.Backward(p, make([]float32, len(ids)-1), nil) == nil {
		t.Fatal("a critic computed or took log-probs")
	}
	pol, err := NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = pol.Forward(ids, ForwardOptions{}); err != nil || p.Values != nil || pol.Backward(p, nil, make([]float32, len(ids))) == nil {
		t.Fatalf("a policy computed or took values: %v", err)
	}
}

func TestTrainingDeterministic(t *testing.T) {
	run := func(workers int) *Model {
		old := Workers
		Workers = workers
		defer func() { Workers = old }()
		cfg := tinyConfig()
		m := roughModel(t, cfg)
		opt := NewAdam(m, DefaultAdam())
		seqs := [][]int{samplePrompt(cfg, 12), samplePrompt(cfg, 9)}
		for i := 0; i < 3; i++ {
			nllStep(t, m, opt, seqs)
		}
		return m
	}
	a, b := run(1), run(3)
	for i, ta := range a.W.Tensors {
		for j, v := range ta.Data {
			if v != b.W.Tensors[i].Data[j] {
				t.Fatalf("%s[%d] differs between 1 and 3 workers: %v vs %v", ta.Name, j, v, b.W.Tensors[i].Data[j])
			}
		}
	}
}

func TestClipGradNorm(t *testing.T) {
	m := roughModel(t, tinyConfig())
	p, err := m.Forward(samplePrompt(m.Cfg, 6), ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := []float32{10, 10, 10, 10, 10}
	if err := m.Backward(p, d, nil); err != nil {
		t.Fatal(err)
	}
	before := m.ClipGradNorm(0.5)
	if before <= 0.5 {
		t.Fatalf("norm %.3f already below the clip", before)
	}
	if n := m.GradNorm(); n < 0.4999 || n > 0.5001 {
		t.Fatalf("clipped norm %.6f", n)
	}
	if err := m.Backward(p, d[:2], nil); err == nil {
		t.Fatal("wrong gradient length accepted")
	}
}

// TestPolicyGradientWithReplay is the PPO use of the API: sample at bf16,
// replay the served routing, push the log-probs of a positively rewarded
// sequence up through ∂L/∂logp = −A·ratio/N, and check they went up.
func TestPolicyGradientWithReplay(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Context = 128
	m, err := NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	prompt := samplePrompt(cfg, 10)
	g, err := NewSampler(m, BF16).Generate(context.Background(), prompt, SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 40, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	seq := append(slices.Clone(prompt), g.OutputIDs...)
	opt := NewAdam(m, AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	score := func() float64 {
		p, err := m.Forward(seq, ForwardOptions{Replay: &g.Routing})
		if err != nil {
			t.Fatal(err)
		}
		var s float64
		for i := range g.OutputIDs {
			s += float64(p.LogProbs[len(prompt)-1+i])
		}
		return s
	}
	before := score()
	const adv = 1.0
	for step := 0; step < 3; step++ {
		p, err := m.Forward(seq, ForwardOptions{Replay: &g.Routing})
		if err != nil {
			t.Fatal(err)
		}
		if mm, _ := CompareRouting(g.Routing, p.Routing); mm != 0 {
			t.Fatalf("replay used %d different sets", mm)
		}
		d := make([]float32, len(seq)-1)
		for i := range g.OutputIDs {
			tgt := len(prompt) - 1 + i
			ratio := math.Exp(float64(p.LogProbs[tgt] - g.LogProbs[i]))
			d[tgt] = float32(-adv * ratio / float64(len(g.OutputIDs)))
		}
		if err := m.Backward(p, d, nil); err != nil {
			t.Fatal(err)
		}
		opt.Update(1)
	}
	if after := score(); !(after > before) {
		t.Fatalf("sequence log-prob %.4f -> %.4f", before, after)
	}
}

// Weight decay shrinks every matrix by lr·decay of itself before the Adam
// step and leaves the norms' gains alone: with zero gradients that is
// all a step does.
func TestAdamWeightDecayShrinksMatrices(t *testing.T) {
	m, err := NewModel(tinyConfig())
	if err != nil {
		t.Fatal(err)
	}
	before := CloneData(m.W.Tensors)
	opt := NewAdam(m, AdamConfig{LR: 0.01, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 5})
	opt.Step()
	for i, tn := range m.W.Tensors {
		want := float32(1)
		if len(tn.Shape) > 1 {
			want = float32(1 - 0.01*5)
		}
		for j, w := range tn.Data {
			if w != before[i][j]*want {
				t.Fatalf("%s[%d]: %g after a zero-gradient step from %g, want ×%g", tn.Name, j, w, before[i][j], want)
			}
		}
	}
}

// TestBackwardIgnoresStaleScratch: Backward's temporaries come from
// chunks kept between passes; poisoning them with NaN changes no gradient
// bit, so nothing reads a buffer before writing it. The second pass is
// shorter, then longer, than the one before.
func TestBackwardIgnoresStaleScratch(t *testing.T) {
	cfg := wideConfig()
	m := roughModel(t, cfg)
	grads := func(m *Model, seq []int) [][]float32 {
		p, err := m.Forward(seq, ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d := make([]float32, len(seq)-1)
		for i := range d {
			d[i] = -1 / float32(1+i%3) // some rows masked out below
		}
		d[2] = 0
		m.ZeroGrad()
		if err := m.Backward(p, d, nil); err != nil {
			t.Fatal(err)
		}
		return CloneData(m.G.Tensors)
	}
	for _, n := range []int{23, 41} {
		seq := samplePrompt(cfg, n)
		want := grads(m.Clone(), seq)
		grads(m, samplePrompt(cfg, 31))
		for _, c := range m.bw.chunks {
			for i := range c {
				c[i] = float32(math.NaN())
			}
		}
		got := grads(m, seq)
		for i, g := range got {
			for j, v := range g {
				if math.Float32bits(v) != math.Float32bits(want[i][j]) {
					t.Fatalf("%d tokens: %s[%d] = %v after poisoned scratch, %v fresh", n, m.G.Tensors[i].Name, j, v, want[i][j])
				}
			}
		}
	}
}
