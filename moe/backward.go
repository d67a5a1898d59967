package moe

import "fmt"

// Backward accumulates into m.G the gradient of a loss L given by the
// caller through dLogProbs[t] = ∂L/∂LogProbs[t] (length T−1, or nil) and
// dValues[t] = ∂L/∂Values[t] (length T, or nil). The pass must come from
// m.Forward with unchanged weights. Replayed experts stay fixed; the
// router still gets gradients through the gate weights.
func (m *Model) Backward(p *Pass, dLogProbs, dValues []float32) error {
	cfg := m.Cfg
	T, D, E, K, F, V := len(p.IDs), cfg.DModel, cfg.Experts, cfg.TopK, cfg.DFF, cfg.Vocab
	if dLogProbs != nil && len(dLogProbs) != T-1 {
		return fmt.Errorf("moe backward: %d log-prob gradients for %d targets", len(dLogProbs), T-1)
	}
	if dValues != nil && len(dValues) != T {
		return fmt.Errorf("moe backward: %d value gradients for %d positions", len(dValues), T)
	}
	f := func(n int) []float32 { return make([]float32, n) }
	g := m.G
	// Heads: dlogits_t = dlogp_t (onehot(target) − softmax(logits_t/τ)) / τ.
	dlogits := f(T * V)
	if dLogProbs != nil {
		parallel(T-1, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				d := dLogProbs[t] / float32(p.temp)
				if d == 0 {
					continue
				}
				row, dr := p.logits[t*V:(t+1)*V], dlogits[t*V:(t+1)*V]
				softmaxTemp(dr, row, p.temp)
				for i := range dr {
					dr[i] *= -d
				}
				dr[p.IDs[t+1]] += d
			}
		})
	}
	dxf := f(T * D)
	linearBackward(dxf, g.LMHead, dlogits, p.xf, m.W.LMHead, T, V, D)
	if dValues != nil {
		for t := 0; t < T; t++ {
			if dv := dValues[t]; dv != 0 {
				axpy(dxf[t*D:(t+1)*D], dv, m.W.ValueW)
				axpy(g.ValueW, dv, p.xf[t*D:(t+1)*D])
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
		// MoE half.
		dx2, dh2, dS := f(T*D), f(T*D), f(T*E)
		dh1, dh3 := f(T*K*F), f(T*K*F)
		sel := p.Routing
		parallel(T, func(lo, hi int) {
			dact := f(F)
			for t := lo; t < hi; t++ {
				r := func(s []float32) []float32 { return s[t*D : (t+1)*D] }
				moeRowBackward(lw, r(dx), r(dx2), r(dh2), dS[t*E:(t+1)*E], r(pl.x2), pl.rms2[t], sel.At(t, l),
					pl.gates[t*K:(t+1)*K], pl.e1[t*K*F:(t+1)*K*F], pl.e3[t*K*F:(t+1)*K*F], pl.eout[t*K*D:(t+1)*K*D],
					dh1[t*K*F:(t+1)*K*F], dh3[t*K*F:(t+1)*K*F], dact)
			}
		})
		rmsNormGainGrad(gl.MoENorm, dh2, pl.x2, pl.rms2)
		linearBackward(nil, gl.Router, dS, pl.h2, lw.Router, T, E, D)
		// Expert weights: each goroutine owns a range of experts and walks
		// the tokens in order, so sums are deterministic.
		parallel(E, func(lo, hi int) {
			act := f(F)
			for t := 0; t < T; t++ {
				for j, e := range sel.At(t, l) {
					if int(e) < lo || int(e) >= hi {
						continue
					}
					a1, a3 := pl.e1[(t*K+j)*F:(t*K+j+1)*F], pl.e3[(t*K+j)*F:(t*K+j+1)*F]
					for i := range act {
						act[i] = silu(a1[i]) * a3[i]
					}
					gate, dxo := pl.gates[t*K+j], dx[t*D:(t+1)*D]
					w2 := gl.W2[e]
					for d := 0; d < D; d++ {
						if v := gate * dxo[d]; v != 0 {
							axpy(w2[d*F:(d+1)*F], v, act)
						}
					}
					h2 := pl.h2[t*D : (t+1)*D]
					d1, d3 := dh1[(t*K+j)*F:(t*K+j+1)*F], dh3[(t*K+j)*F:(t*K+j+1)*F]
					w1, w3 := gl.W1[e], gl.W3[e]
					for i := 0; i < F; i++ {
						if d1[i] != 0 {
							axpy(w1[i*D:(i+1)*D], d1[i], h2)
						}
						if d3[i] != 0 {
							axpy(w3[i*D:(i+1)*D], d3[i], h2)
						}
					}
				}
			}
		})
		// Attention half: x2 = x + Wo a.
		da := f(T * D)
		linearBackward(da, gl.Wo, dx2, pl.a, lw.Wo, T, D, D)
		dq, dk, dv := f(T*D), f(T*D), f(T*D)
		attentionBackward(dq, dk, dv, da, pl.q, pl.k, pl.v, T, D, cfg.Heads)
		for t := 0; t < T; t++ {
			m.rope.apply(dq[t*D:(t+1)*D], t, -1)
			m.rope.apply(dk[t*D:(t+1)*D], t, -1)
		}
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
		axpy(g.Embed[id*D:(id+1)*D], 1, dx[t*D:(t+1)*D])
	}
	return nil
}
