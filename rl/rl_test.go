package rl

import (
	"math"
	"math/rand/v2"
	"testing"
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

// The gradients of both losses with respect to their per-token inputs
// match central finite differences, away from the clip kinks.
func TestGradsFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const T, eps = 16, 0.2
	loss := make([]bool, T)
	newLP, oldLP, adv, vOld, ret := make([]float32, T), make([]float32, T), make([]float32, T), make([]float32, T), make([]float32, T)
	n := 0
	for i := range loss {
		loss[i] = i >= 2 && i != 7
		if !loss[i] {
			continue
		}
		n++
		oldLP[i] = float32(-1 - rng.Float64())
		// Ratios spread over both sides of the clip band, none on its edge.
		r := []float64{0.5, 0.9, 1.05, 1.6}[i%4]
		newLP[i] = oldLP[i] + float32(math.Log(r))
		adv[i] = float32(rng.NormFloat64())
		vOld[i] = float32(rng.NormFloat64())
		ret[i] = float32(rng.NormFloat64())
	}
	v := make([]float32, T)
	for i := range v {
		v[i] = vOld[i] + float32([]float64{-0.5, -0.1, 0.1, 0.5}[i%4])
	}
	policy := func() float64 {
		var s PolicyStats
		if _, err := PolicyGrad(&s, loss, newLP, oldLP, adv, eps, n); err != nil {
			t.Fatal(err)
		}
		return s.Loss / float64(n)
	}
	value := func() float64 {
		var s ValueStats
		if _, err := ValueGrad(&s, loss, v, vOld, ret, 0.2, n); err != nil {
			t.Fatal(err)
		}
		return s.Loss / float64(n)
	}
	var ps PolicyStats
	gp, err := PolicyGrad(&ps, loss, newLP, oldLP, adv, eps, n)
	if err != nil {
		t.Fatal(err)
	}
	var vs ValueStats
	gv, err := ValueGrad(&vs, loss, v, vOld, ret, 0.2, n)
	if err != nil {
		t.Fatal(err)
	}
	checkFD(t, "policy", newLP, gp, policy)
	checkFD(t, "value", v, gv, value)
}

// checkFD compares g with central differences of loss along each entry of x.
func checkFD(t *testing.T, name string, x, g []float32, loss func() float64) {
	t.Helper()
	const h = 1e-3
	for i := range x {
		orig := x[i]
		x[i] = orig + h
		up := loss()
		x[i] = orig - h
		down := loss()
		x[i] = orig
		numeric := (up - down) / float64(float32(orig+h)-float32(orig-h))
		if math.Abs(numeric-float64(g[i])) > 1e-4+1e-2*math.Abs(numeric) {
			t.Errorf("%s loss, token %d: gradient %.6g, numeric %.6g", name, i, g[i], numeric)
		}
	}
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

// Three actions whose proximal policy gives them e^0.5, e^−0.5 and e^2
// times the probability the behaviour policy did, capped at 2: weights
// 1.6487, 0.6065 and 2 (the last truncated). With ρ = 1 (the update's
// first step) and A = 1, each term of the loss is −w/n and its gradient
// −w/n: the decoupled objective is the on-policy one scaled per action.
func TestBehaviourWeightsTruncated(t *testing.T) {
	loss := []bool{false, true, true, true}
	behaviour := []float32{0, -2, -1, -3}
	prox := []float32{0, -1.5, -1.5, -1}
	var bs BehaviourStats
	w, err := BehaviourWeights(&bs, loss, prox, behaviour, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0, math.Exp(0.5), math.Exp(-0.5), 2}
	for i := range want {
		if math.Abs(float64(w[i])-want[i]) > 1e-6 {
			t.Fatalf("weight %d = %v, want %v", i, w[i], want[i])
		}
	}
	if bs.Tokens != 3 || bs.Truncated != 1 || math.Abs(bs.TruncatedFraction()-1.0/3) > 1e-12 {
		t.Fatalf("stats %+v", bs)
	}
	k3 := func(x float64) float64 { return math.Exp(x) - 1 - x }
	if kl := (k3(0.5) + k3(-0.5) + k3(2)) / 3; math.Abs(bs.KLMean()-kl) > 1e-9 {
		t.Fatalf("behaviour KL %v, want %v", bs.KLMean(), kl)
	}
	adv := []float32{0, 1, 1, 1}
	var plain, dec PolicyStats
	g0, _ := PolicyGrad(&plain, loss, prox, prox, adv, 0.2, 3)
	g1, err := DecoupledPolicyGrad(&dec, loss, prox, prox, adv, w, 0.2, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range loss {
		if math.Abs(float64(g1[i])-want[i]*float64(g0[i])) > 1e-6 {
			t.Fatalf("gradient %d = %v, want %v·%v", i, g1[i], want[i], g0[i])
		}
	}
	if wantLoss := -(want[1] + want[2] + want[3]) / 3; math.Abs(dec.MeanLoss()-wantLoss) > 1e-6 {
		t.Fatalf("decoupled loss %v, want %v", dec.MeanLoss(), wantLoss)
	}
	if _, err := BehaviourWeights(&bs, loss, prox, behaviour, 0); err == nil {
		t.Fatal("a cap of 0 was accepted")
	}
	if _, err := DecoupledPolicyGrad(&dec, loss, prox, prox, adv, w[:2], 0.2, 3); err == nil {
		t.Fatal("weights of the wrong length were accepted")
	}
}
