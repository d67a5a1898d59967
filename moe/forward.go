package moe

import (
	"errors"
	"fmt"
	"math"
)

// ForwardOptions selects how the training forward routes.
type ForwardOptions struct {
	// Replay, when set, fixes the experts of the first Replay.Tokens tokens
	// (R³). It may cover all tokens or all but the last (the sampler's
	// [prompt+generated−1] record: the last token's output feeds no
	// log-prob); uncovered tokens route live.
	Replay *Routing
	// Temperature divides the logits before the log-softmax, as the
	// sampler did when it drew the tokens, so training log-probs are those
	// of the distribution the tokens came from. 0 and 1 leave the logits
	// alone (greedy sampling reports untempered log-probs too).
	Temperature float64
}

// Pass is one float32 forward over a whole sequence, with everything the
// backward pass needs.
type Pass struct {
	IDs []int
	// LogProbs[t] = log p(IDs[t+1] | IDs[:t+1]), length T−1.
	LogProbs []float32
	// Values[t] is the value head at position t, length T.
	Values []float32
	// Routing is the routing used (replayed where given); LiveRouting what
	// the router chose on its own. Both [T, L, K].
	Routing, LiveRouting Routing

	layers []passLayer
	xl     []float32 // final residual [T, D]
	xf     []float32 // final norm output [T, D]
	rmsF   []float32
	logits []float32 // [T, V]
	temp   float64   // the forward's temperature; 1 when none
}

type passLayer struct {
	x, h1, q, k, v, a, x2, h2 []float32 // [T, D]
	rms1, rms2                []float32 // [T]
	probs                     []float32 // [T, E]
	gates                     []float32 // [T, K]
	e1, e3                    []float32 // [T, K, F]
	eout                      []float32 // [T, K, D]
}

// Forward runs the float32 training forward over ids (1 ≤ len ≤ Context).
func (m *Model) Forward(ids []int, opt ForwardOptions) (*Pass, error) {
	cfg := m.Cfg
	T, D, E, K, F, L, V := len(ids), cfg.DModel, cfg.Experts, cfg.TopK, cfg.DFF, cfg.Layers, cfg.Vocab
	if T == 0 {
		return nil, errors.New("moe forward: empty sequence")
	}
	if T > cfg.Context {
		return nil, fmt.Errorf("moe forward: %d tokens exceed the context of %d", T, cfg.Context)
	}
	for i, id := range ids {
		if id < 0 || id >= V {
			return nil, fmt.Errorf("moe forward: token %d: id %d outside the vocabulary [0,%d)", i, id, V)
		}
	}
	if r := opt.Replay; r != nil {
		if r.Tokens != T && r.Tokens != T-1 {
			return nil, fmt.Errorf("moe forward: replayed routing covers %d tokens, want %d or %d", r.Tokens, T, T-1)
		}
		if err := r.Validate(cfg); err != nil {
			return nil, fmt.Errorf("moe forward: replay: %w", err)
		}
	}
	if tp := opt.Temperature; tp < 0 || math.IsNaN(tp) || math.IsInf(tp, 0) {
		return nil, fmt.Errorf("moe forward: temperature %g", tp)
	}
	p := &Pass{IDs: append([]int(nil), ids...), Routing: NewRouting(T, L, K), LiveRouting: NewRouting(T, L, K), temp: 1}
	if opt.Temperature > 0 {
		p.temp = opt.Temperature
	}
	f := func(n int) []float32 { return make([]float32, n) }
	x := f(T * D)
	for t, id := range ids {
		copy(x[t*D:(t+1)*D], m.W.Embed[id*D:(id+1)*D])
	}
	for l := 0; l < L; l++ {
		lw := &m.W.Layers[l]
		pl := passLayer{x: x, h1: f(T * D), q: f(T * D), k: f(T * D), v: f(T * D), a: f(T * D), x2: f(T * D), h2: f(T * D),
			rms1: f(T), rms2: f(T), probs: f(T * E), gates: f(T * K), e1: f(T * K * F), e3: f(T * K * F), eout: f(T * K * D)}
		parallel(T, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				r := func(s []float32) []float32 { return s[t*D : (t+1)*D] }
				pl.rms1[t] = attnIn(lw, m.rope, F32, t, r(pl.x), r(pl.h1), r(pl.q), r(pl.k), r(pl.v))
			}
		})
		xout := f(T * D)
		parallel(T, func(lo, hi int) {
			scores, act := f(T), f(F)
			for t := lo; t < hi; t++ {
				r := func(s []float32) []float32 { return s[t*D : (t+1)*D] }
				attnOut(lw, F32, t, cfg.Heads, r(pl.q), pl.k, pl.v, r(pl.a), r(pl.x), r(pl.x2), scores)
				var replay []int32
				if opt.Replay != nil && t < opt.Replay.Tokens {
					replay = opt.Replay.At(t, l)
				}
				pl.rms2[t] = moeRow(lw, F32, r(pl.x2), r(pl.h2), pl.probs[t*E:(t+1)*E], p.LiveRouting.At(t, l), replay, p.Routing.At(t, l),
					pl.gates[t*K:(t+1)*K], pl.e1[t*K*F:(t+1)*K*F], pl.e3[t*K*F:(t+1)*K*F], pl.eout[t*K*D:(t+1)*K*D], act, r(xout))
			}
		})
		p.layers = append(p.layers, pl)
		x = xout
	}
	p.xl, p.xf, p.rmsF, p.logits = x, f(T*D), f(T), f(T*V)
	p.LogProbs, p.Values = f(T-1), f(T)
	parallel(T, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			xf := p.xf[t*D : (t+1)*D]
			p.rmsF[t] = headRow(m.W, F32, p.xl[t*D:(t+1)*D], xf, p.logits[t*V:(t+1)*V])
			p.Values[t] = dot(xf, m.W.ValueW) + m.W.ValueB[0]
			if t+1 < T {
				p.LogProbs[t] = logSoftmaxAtTemp(p.logits[t*V:(t+1)*V], ids[t+1], p.temp)
			}
		}
	})
	return p, nil
}

// attnIn is the first half of attention for one token, shared by both
// paths: h1 = norm(x); q, k, v = W h1; RoPE on q and k at pos.
func attnIn(lw *LayerWeights, rope ropeTable, p Precision, pos int, x, h1, q, k, v []float32) float32 {
	r := rmsNorm(h1, x, lw.AttnNorm)
	p.round(h1)
	matvec(q, lw.Wq, h1)
	matvec(k, lw.Wk, h1)
	matvec(v, lw.Wv, h1)
	rope.apply(q, pos, 1)
	rope.apply(k, pos, 1)
	p.round(q)
	p.round(k)
	p.round(v)
	return r
}

// attnOut attends from q at pos over K, V rows [0, pos] and adds the output
// projection to the residual: x2 = x + Wo·attn.
func attnOut(lw *LayerWeights, p Precision, pos, heads int, q, K, V, a, x, x2, scores []float32) {
	attendRow(a, q, K, V, pos, heads, scores)
	p.round(a)
	matvec(x2, lw.Wo, a)
	p.round(x2)
	for i := range x2 {
		x2[i] += x[i]
	}
	p.round(x2)
}

// headRow is the final norm and the LM head for one token.
func headRow(w *Weights, p Precision, x, xf, logits []float32) float32 {
	r := rmsNorm(xf, x, w.FinalNorm)
	p.round(xf)
	matvec(logits, w.LMHead, xf)
	p.round(logits)
	return r
}
