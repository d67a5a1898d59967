package moe

import "fmt"

// Backward accumulates into m.G the gradient of a loss L given by the
// caller through dLogProbs[t] = ∂L/∂LogProbs[t] (length T−1, or nil) and
// dValues[t] = ∂L/∂Values[t] (length T, or nil). The pass must come from
// m.Forward with unchanged weights. Replayed experts stay fixed; the
// router still gets gradients through the gate weights.
func (m *Model) Backward(p *Pass, dLogProbs, dValues []float32) error {
	cfg := m.Cfg
	T, D, V := len(p.IDs), cfg.DModel, cfg.Vocab
	if dLogProbs != nil && len(dLogProbs) != T-1 {
		return fmt.Errorf("moe backward: %d log-prob gradients for %d targets", len(dLogProbs), T-1)
	}
	if dValues != nil && len(dValues) != T {
		return fmt.Errorf("moe backward: %d value gradients for %d positions", len(dValues), T)
	}
	f := func(n int) []float32 { return make([]float32, n) }
	g := m.G
	// Heads: dlogits_t = dlogp_t (onehot(target) − softmax(logits_t/τ)) / τ,
	// for the rows with a non-zero dlogp only (masked tokens add nothing).
	var tgt []int
	if dLogProbs != nil {
		for t, d := range dLogProbs {
			if d != 0 {
				tgt = append(tgt, t)
			}
		}
	}
	n := len(tgt)
	dlogits, xfR, dxfR := f(n*V), f(n*D), f(n*D)
	parallel(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			t := tgt[i]
			d := dLogProbs[t] / float32(p.temp)
			dr := dlogits[i*V : (i+1)*V]
			softmaxTemp(dr, p.logits[t*V:(t+1)*V], p.temp)
			for j := range dr {
				dr[j] *= -d
			}
			dr[p.IDs[t+1]] += d
			copy(xfR[i*D:(i+1)*D], p.xf[t*D:(t+1)*D])
		}
	})
	linearBackward(dxfR, g.LMHead, dlogits, xfR, m.W.LMHead, n, V, D)
	dxf := f(T * D)
	for i, t := range tgt {
		copy(dxf[t*D:(t+1)*D], dxfR[i*D:(i+1)*D])
	}
	if dValues != nil {
		for t := 0; t < T; t++ {
			if dv := dValues[t]; dv != 0 {
				axpyAt(dxf[t*D:(t+1)*D], dv, m.W.ValueW)
				axpyAt(g.ValueW, dv, p.xf[t*D:(t+1)*D])
				g.ValueB[0] += dv
			}
		}
	}
	rmsNormGainGrad(g.FinalNorm, dxf, p.xl, p.rmsF)
	dx := f(T * D)
	parallel(T, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			r := func(s []float32) []float32 { return s[t*D : (t+1)*D] }
			rmsNormBackward(r(dx), r(dxf), r(p.xl), m.W.FinalNorm, p.rmsF[t])
		}
	})
	for l := cfg.Layers - 1; l >= 0; l-- {
		lw, gl, pl := &m.W.Layers[l], &g.Layers[l], &p.layers[l]
		dx2 := f(T * D)
		moeBackward(lw, gl, pl.moe, T, pl.x2, dx, dx2)
		// Attention half: x2 = x + Wo a.
		da := f(T * D)
		linearBackward(da, gl.Wo, dx2, pl.a, lw.Wo, T, D, D)
		dq, dk, dv := f(T*D), f(T*D), f(T*D)
		attentionBackward(dq, dk, dv, da, pl.q, pl.k, pl.v, pl.p, T, D, cfg.Heads)
		parallel(T, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				m.rope.apply(dq[t*D:(t+1)*D], t, -1)
				m.rope.apply(dk[t*D:(t+1)*D], t, -1)
			}
		})
		dh := f(T * D)
		linearBackward(dh, gl.Wq, dq, pl.h1, lw.Wq, T, D, D)
		linearBackward(dh, gl.Wk, dk, pl.h1, lw.Wk, T, D, D)
		linearBackward(dh, gl.Wv, dv, pl.h1, lw.Wv, T, D, D)
		rmsNormGainGrad(gl.AttnNorm, dh, pl.x, pl.rms1)
		ndx := dx2 // residual
		parallel(T, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				r := func(s []float32) []float32 { return s[t*D : (t+1)*D] }
				rmsNormBackward(r(ndx), r(dh), r(pl.x), lw.AttnNorm, pl.rms1[t])
			}
		})
		dx = ndx
	}
	for t, id := range p.IDs {
		axpyAt(g.Embed[id*D:(id+1)*D], 1, dx[t*D:(t+1)*D])
	}
	return nil
}
