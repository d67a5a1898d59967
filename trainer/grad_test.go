package trainer

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/rl"
)

// The gradients of rl's losses through the reference model's backward
// pass, checked against finite differences: rl is pure arithmetic over
// per-token slices, and the trainer is where it meets the model.

func tiny(t *testing.T) *moe.Model {
	t.Helper()
	m, err := moe.NewModel(moe.Config{Vocab: 24, Layers: 2, DModel: 8, Heads: 2, KVHeads: 1, HeadDim: 4, RopeTheta: 10000, RMSNormEps: 1e-6, NormTopKProb: true, Experts: 4, TopK: 2, DFF: 8, Context: 32, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

type fixture struct {
	ids    []int
	loss   []bool
	old    []float32
	adv    []float32
	replay moe.Routing
}

func newFixture(t *testing.T, m *moe.Model) fixture {
	rng := rand.New(rand.NewPCG(1, 2))
	f := fixture{}
	for i := 0; i < 14; i++ {
		f.ids = append(f.ids, rng.IntN(m.Cfg.Vocab))
		f.loss = append(f.loss, i >= 3 && i != 8)
	}
	p, err := m.Forward(f.ids, moe.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.replay = p.Routing
	lp, _ := rl.ActionLogProbs(f.loss, p.LogProbs)
	f.old = make([]float32, len(lp))
	f.adv = make([]float32, len(lp))
	for i := range lp {
		// Old log-probs a little off, so that ratios spread across the
		// clip band; ±advantages.
		f.old[i] = lp[i] + float32(rng.NormFloat64()*0.3)
		f.adv[i] = float32(rng.NormFloat64())
	}
	return f
}

func (f fixture) policyLoss(t *testing.T, m *moe.Model, eps float64, backward bool) (float64, rl.PolicyStats) {
	t.Helper()
	p, err := m.Forward(f.ids, moe.ForwardOptions{Replay: &f.replay})
	if err != nil {
		t.Fatal(err)
	}
	lp, _ := rl.ActionLogProbs(f.loss, p.LogProbs)
	n := 0
	for _, l := range f.loss {
		if l {
			n++
		}
	}
	var s rl.PolicyStats
	g, err := rl.PolicyGrad(&s, f.loss, lp, f.old, f.adv, eps, n)
	if err != nil {
		t.Fatal(err)
	}
	if backward {
		if err := m.Backward(p, g[1:], nil); err != nil {
			t.Fatal(err)
		}
	}
	return s.MeanLoss(), s
}

// The analytic gradient of the clipped surrogate, through the model's
// backward pass, matches central finite differences of the loss.
func TestPolicyGradFiniteDifferences(t *testing.T) {
	m := tiny(t)
	f := newFixture(t, m)
	const eps = 0.2
	_, s := f.policyLoss(t, m, eps, true)
	if s.Clipped == 0 || s.Clipped == s.Tokens {
		t.Fatalf("fixture should clip some but not all tokens: %d of %d", s.Clipped, s.Tokens)
	}
	checkFD(t, m, func() float64 { l, _ := f.policyLoss(t, m, eps, false); return l })
}

// The clipped value loss's gradient through the score head and the
// network matches finite differences.
func TestValueGradFiniteDifferences(t *testing.T) {
	pol := tiny(t)
	f := newFixture(t, pol)
	m := pol.Critic()
	// A fresh score head is 0, which would leave the backbone no gradient.
	for i := range m.W.Score {
		m.W.Score[i] = float32(math.Sin(float64(i)))
	}
	p, _ := m.Forward(f.ids, moe.ForwardOptions{})
	v0, _ := rl.ActionValues(f.loss, p.Values)
	rng := rand.New(rand.NewPCG(3, 4))
	vOld := make([]float32, len(v0))
	ret := make([]float32, len(v0))
	for i := range v0 {
		vOld[i] = v0[i] + float32(rng.NormFloat64()*0.3)
		ret[i] = float32(rng.NormFloat64())
	}
	const c = 0.2
	n := 0
	for _, l := range f.loss {
		if l {
			n++
		}
	}
	loss := func(backward bool) float64 {
		p, err := m.Forward(f.ids, moe.ForwardOptions{Replay: &f.replay})
		if err != nil {
			t.Fatal(err)
		}
		v, _ := rl.ActionValues(f.loss, p.Values)
		var s rl.ValueStats
		g, err := rl.ValueGrad(&s, f.loss, v, vOld, ret, c, n)
		if err != nil {
			t.Fatal(err)
		}
		if backward {
			// Action t's value is the head at t−1.
			dv := make([]float32, len(p.Values))
			copy(dv, g[1:])
			if err := m.Backward(p, nil, dv); err != nil {
				t.Fatal(err)
			}
		}
		return s.MeanLoss()
	}
	loss(true)
	checkFD(t, m, func() float64 { return loss(false) })
}

// checkFD compares m.G with central differences of loss along random
// directions in a few tensors (float32 model, so tolerances are loose).
func checkFD(t *testing.T, m *moe.Model, loss func() float64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(9, 9))
	head := "lm_head.weight"
	if m.Head == moe.ScoreHead {
		head = "score.weight"
	}
	for _, name := range []string{head, "model.layers.1.mlp.gate.weight", "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_norm.weight",
		"model.layers.1.mlp.experts.2.gate_proj.weight"} {
		w, g := m.W.Tensor(name), m.G.Tensor(name)
		if w == nil || g == nil {
			t.Fatalf("no tensor %s", name)
		}
		dir := make([]float64, len(w.Data))
		var analytic, norm float64
		for i := range dir {
			dir[i] = rng.NormFloat64()
			norm += dir[i] * dir[i]
		}
		norm = math.Sqrt(norm)
		for i := range dir {
			dir[i] /= norm
			analytic += dir[i] * float64(g.Data[i])
		}
		const h = 1e-2
		orig := append([]float32(nil), w.Data...)
		shift := func(s float64) {
			for i := range w.Data {
				w.Data[i] = orig[i] + float32(s*dir[i])
			}
		}
		shift(h)
		up := loss()
		shift(-h)
		down := loss()
		copy(w.Data, orig)
		numeric := (up - down) / (2 * h)
		if math.Abs(numeric-analytic) > 2e-3+0.05*math.Abs(numeric) {
			t.Errorf("%s: analytic directional derivative %.6g, numeric %.6g", name, analytic, numeric)
		}
	}
}

// Replaying the routing a sampler recorded gives zero mismatches; the
// live router on a bf16-served sequence does not always agree.
func TestReplayHasNoMismatches(t *testing.T) {
	m, err := moe.NewModel(moe.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	s := moe.NewSampler(m, moe.BF16)
	prompt := []int{256, 40, 41, 42, 43, 44, 45, 46}
	g, err := s.Generate(t.Context(), prompt, moe.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 48, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	seq := append(append([]int(nil), prompt...), g.OutputIDs...)
	var on, off rl.Mismatch
	p, err := m.Forward(seq, moe.ForwardOptions{Replay: &g.Routing})
	if err != nil {
		t.Fatal(err)
	}
	on.Add(moe.CompareRouting(g.Routing, p.Routing))
	q, err := m.Forward(seq, moe.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	off.Add(moe.CompareRouting(g.Routing, q.LiveRouting))
	if on.Mismatches != 0 || on.Sets != g.Routing.Tokens*m.Cfg.Layers {
		t.Fatalf("replay on: %d of %d sets differ", on.Mismatches, on.Sets)
	}
	t.Logf("replay off: %d of %d sets differ (%.4f)", off.Mismatches, off.Sets, off.Rate())
}
