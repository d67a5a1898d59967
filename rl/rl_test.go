package rl

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/t1pipe/t1/moe"
)

// Two chunks, three actions: values 0.5, 0.2 (chunk 0), 0.4 (chunk 1),
// reward 1, γ = 0.9, λ = 0.8, by hand:
//
//	δ3 = 1 − 0.4 = 0.6                A3 = 0.6
//	δ2 = 0.9·0.4 − 0.2 = 0.16         A2 = 0.16 + 0.72·0.6 = 0.592
//	δ1 = 0.9·0.2 − 0.5 = −0.32        A1 = −0.32 + 0.72·0.592 = 0.10624
func TestGAEByHand(t *testing.T) {
	chunks := []Chunk{
		{Loss: []bool{false, true, false, true}, Values: []float32{0, 0.5, 0, 0.2}},
		{Loss: []bool{false, false, true}, Values: []float32{0, 0, 0.4}},
	}
	adv, ret, err := GAE(chunks, 1, 0.9, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float64{{0, 0.10624, 0, 0.592}, {0, 0, 0.6}}
	wantRet := [][]float64{{0, 0.60624, 0, 0.792}, {0, 0, 1.0}}
	for c := range want {
		for i := range want[c] {
			if math.Abs(float64(adv[c][i])-want[c][i]) > 1e-6 || math.Abs(float64(ret[c][i])-wantRet[c][i]) > 1e-6 {
				t.Fatalf("chunk %d token %d: A %v G %v, want %v %v", c, i, adv[c][i], ret[c][i], want[c][i], wantRet[c][i])
			}
		}
	}
	// γ = λ = 1: every return is the reward.
	_, ret, _ = GAE(chunks, 2.5, 1, 1)
	for c := range ret {
		for i, l := range chunks[c].Loss {
			if l && ret[c][i] != 2.5 {
				t.Fatalf("Monte Carlo return %v", ret[c][i])
			}
		}
	}
	if _, _, err := GAE(chunks, 1, 1.5, 1); err == nil {
		t.Fatal("gamma 1.5 accepted")
	}
	if _, _, err := GAE([]Chunk{{Loss: []bool{true}, Values: nil}}, 1, 1, 1); err == nil {
		t.Fatal("misaligned chunk accepted")
	}
}

func TestExplainedVariance(t *testing.T) {
	loss := []bool{true, true, true, false}
	y := []float32{1, 2, 3, 100}
	var m Moments
	m.Add(loss, y, y)
	if ev := m.ExplainedVariance(); ev != 1 {
		t.Fatalf("perfect critic EV %v", ev)
	}
	var c Moments
	c.Add(loss, y, []float32{2, 2, 2, 0})
	if ev := c.ExplainedVariance(); math.Abs(ev) > 1e-12 {
		t.Fatalf("mean predictor EV %v", ev)
	}
	var b Moments
	b.Add(loss, y, []float32{3, 2, 1, 0})
	if ev := b.ExplainedVariance(); ev >= 0 {
		t.Fatalf("anti-correlated critic EV %v", ev)
	}
}

func tiny(t *testing.T) *moe.Model {
	t.Helper()
	m, err := moe.NewModel(moe.Config{Vocab: 24, Layers: 2, DModel: 8, Heads: 2, Experts: 4, TopK: 2, DFF: 8, Context: 32, Seed: 5})
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
	lp, _ := ActionLogProbs(f.loss, p.LogProbs)
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

func (f fixture) policyLoss(t *testing.T, m *moe.Model, eps float64, backward bool) (float64, PolicyStats) {
	t.Helper()
	p, err := m.Forward(f.ids, moe.ForwardOptions{Replay: &f.replay})
	if err != nil {
		t.Fatal(err)
	}
	lp, _ := ActionLogProbs(f.loss, p.LogProbs)
	n := 0
	for _, l := range f.loss {
		if l {
			n++
		}
	}
	var s PolicyStats
	g, err := PolicyGrad(&s, f.loss, lp, f.old, f.adv, eps, n)
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

// The clipped value loss's gradient through the value head and the
// network matches finite differences.
func TestValueGradFiniteDifferences(t *testing.T) {
	m := tiny(t)
	f := newFixture(t, m)
	p, _ := m.Forward(f.ids, moe.ForwardOptions{})
	v0, _ := ActionValues(f.loss, p.Values)
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
		v, _ := ActionValues(f.loss, p.Values)
		var s ValueStats
		g, err := ValueGrad(&s, f.loss, v, vOld, ret, c, n)
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
	for _, name := range []string{"lm_head", "layers.1.moe.router", "layers.0.attn.wq", "layers.1.moe.experts.2.w1", "value_head.w"} {
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
	var on, off Mismatch
	p, err := m.Forward(seq, moe.ForwardOptions{Replay: &g.Routing})
	if err != nil {
		t.Fatal(err)
	}
	on.Add(g.Routing, p.Routing)
	q, err := m.Forward(seq, moe.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	off.Add(g.Routing, q.LiveRouting)
	if on.Mismatches != 0 || on.Sets != g.Routing.Tokens*m.Cfg.Layers {
		t.Fatalf("replay on: %d of %d sets differ", on.Mismatches, on.Sets)
	}
	t.Logf("replay off: %d of %d sets differ (%.4f)", off.Mismatches, off.Sets, off.Rate())
}

func TestPolicyGradCases(t *testing.T) {
	loss := []bool{false, true, true, true, true}
	lp := func(r float64) float32 { return float32(math.Log(r)) }
	newLP := []float32{0, lp(1.5), lp(1.5), lp(0.5), lp(1.0)}
	old := make([]float32, 5)
	adv := []float32{0, 1, -1, -1, 2}
	var s PolicyStats
	g, err := PolicyGrad(&s, loss, newLP, old, adv, 0.2, 4)
	if err != nil {
		t.Fatal(err)
	}
	// ρ=1.5, A>0: clipped, constant → 0. ρ=1.5, A<0: unclipped min →
	// −ρA/n = 1.5/4. ρ=0.5, A<0: clipped → 0. ρ=1, A=2: −2/4.
	want := []float32{0, 0, 0.375, 0, -0.5}
	for i := range want {
		if math.Abs(float64(g[i]-want[i])) > 1e-6 {
			t.Fatalf("grad %v, want %v", g, want)
		}
	}
	if s.Clipped != 3 || s.Tokens != 4 {
		t.Fatalf("stats %+v", s)
	}
	// Loss: −[1.2·1, 1.5·(−1), 0.8·(−1)... min terms] / 4
	wantLoss := -(1.2 + -1.5 + -0.8 + 2) / 4
	if math.Abs(s.MeanLoss()-wantLoss) > 1e-6 {
		t.Fatalf("loss %v, want %v", s.MeanLoss(), wantLoss)
	}
}

// FuzzGAE: for any masks, values, reward, γ and λ, returns are advantages
// plus values at actions, everything else is 0, and with γ = λ = 1 every
// return is the reward.
func FuzzGAE(f *testing.F) {
	f.Add([]byte{1, 0, 1, 1, 0, 1}, []byte{3, 200, 7, 90, 1, 5}, 1.0, 0.9, 0.8, uint8(2))
	f.Add([]byte{0, 0}, []byte{1, 2}, -2.0, 1.0, 1.0, uint8(1))
	f.Fuzz(func(t *testing.T, mask, vals []byte, reward, gamma, lambda float64, split uint8) {
		n := min(len(mask), len(vals))
		if n == 0 || math.IsNaN(reward) || math.IsInf(reward, 0) || math.Abs(reward) > 1e6 {
			return
		}
		cut := int(split) % (n + 1)
		var chunks []Chunk
		for _, r := range [][2]int{{0, cut}, {cut, n}} {
			c := Chunk{}
			for i := r[0]; i < r[1]; i++ {
				c.Loss = append(c.Loss, mask[i]%2 == 1)
				c.Values = append(c.Values, float32(vals[i])/64-2)
			}
			chunks = append(chunks, c)
		}
		adv, ret, err := GAE(chunks, reward, gamma, lambda)
		if !(gamma >= 0 && gamma <= 1 && lambda >= 0 && lambda <= 1) {
			if err == nil {
				t.Fatalf("gamma %g lambda %g accepted", gamma, lambda)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		_, mcRet, err := GAE(chunks, reward, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		for c, ch := range chunks {
			for i, l := range ch.Loss {
				if !l {
					if adv[c][i] != 0 || ret[c][i] != 0 {
						t.Fatalf("non-action token %d of chunk %d has A %v G %v", i, c, adv[c][i], ret[c][i])
					}
					continue
				}
				if d := float64(ret[c][i]) - float64(adv[c][i]) - float64(ch.Values[i]); math.Abs(d) > 1e-3*(1+math.Abs(float64(ret[c][i]))) {
					t.Fatalf("G − A − V = %v", d)
				}
				if d := float64(mcRet[c][i]) - reward; math.Abs(d) > 1e-3*(1+math.Abs(reward)) {
					t.Fatalf("Monte Carlo return %v, reward %v", mcRet[c][i], reward)
				}
			}
		}
	})
}
