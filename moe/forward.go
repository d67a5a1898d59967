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
	x, h1, q, k, v, a, x2 []float32 // [T, D]
	rms1                  []float32 // [T]
	p                     []float32 // attention weights [heads, T, T]
	moe                   *moeAct
}

// Forward runs the float32 training forward over ids (1 ≤ len ≤ Context).
func (m *Model) Forward(ids []int, opt ForwardOptions) (*Pass, error) {
	cfg := m.Cfg
	T, D, K, L, V := len(ids), cfg.DModel, cfg.TopK, cfg.Layers, cfg.Vocab
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
	wt := transposeWeights(m.W, cfg, false, true)
	x := f(T * D)
	for t, id := range ids {
		copy(x[t*D:(t+1)*D], m.W.Embed[id*D:(id+1)*D])
	}
	var replay []int32
	nReplay := 0
	if opt.Replay != nil {
		nReplay = opt.Replay.Tokens
		replay = make([]int32, nReplay*K)
	}
	for l := 0; l < L; l++ {
		lw, lt := &m.W.Layers[l], &wt.layers[l]
		pl := passLayer{x: x, h1: f(T * D), q: f(T * D), k: f(T * D), v: f(T * D), a: f(T * D), x2: f(T * D),
			rms1: f(T), p: f(cfg.Heads * T * T), moe: newMoEAct(cfg, T)}
		attnIn(lw, lt, m.rope, F32, 0, T, pl.x, pl.h1, pl.q, pl.k, pl.v, pl.rms1, true)
		attendCausal(pl.a, pl.q, pl.k, pl.v, pl.p, T, D, cfg.Heads)
		attnOut(lt, F32, T, pl.a, pl.x, pl.x2, true)
		for t := 0; t < nReplay; t++ {
			copy(replay[t*K:(t+1)*K], opt.Replay.At(t, l))
		}
		xout := f(T * D)
		moeForward(lw, lt, F32, T, pl.x2, replay, nReplay, pl.moe, xout, true)
		for t := 0; t < T; t++ {
			copy(p.LiveRouting.At(t, l), pl.moe.live[t*K:(t+1)*K])
			copy(p.Routing.At(t, l), pl.moe.sel[t*K:(t+1)*K])
		}
		p.layers = append(p.layers, pl)
		x = xout
	}
	p.xl, p.xf, p.rmsF, p.logits = x, f(T*D), f(T), f(T*V)
	p.LogProbs, p.Values = f(T-1), f(T)
	headRows(m.W, wt, F32, T, p.xl, p.xf, p.rmsF, p.logits, true)
	parallel(T, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			p.Values[t] = dot(p.xf[t*D:(t+1)*D], m.W.ValueW) + m.W.ValueB[0]
			if t+1 < T {
				p.LogProbs[t] = logSoftmaxAtTemp(p.logits[t*V:(t+1)*V], ids[t+1], p.temp)
			}
		}
	})
	return p, nil
}

// attnIn is the first half of attention for n tokens at positions pos0…,
// shared by both paths: h1 = norm(x); q, k, v = W h1; RoPE on q and k.
func attnIn(lw *LayerWeights, lt *layerT, rope ropeTable, p Precision, pos0, n int, x, h1, q, k, v, rms []float32, par bool) {
	D := len(lw.AttnNorm)
	rows(n, par, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			h := h1[t*D : (t+1)*D]
			rms[t] = rmsNorm(h, x[t*D:(t+1)*D], lw.AttnNorm)
			p.round(h)
		}
	})
	linear(q, h1, lt.wq, n, D, D)
	linear(k, h1, lt.wk, n, D, D)
	linear(v, h1, lt.wv, n, D, D)
	rows(n, par, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			r := func(s []float32) []float32 { return s[t*D : (t+1)*D] }
			rope.apply(r(q), pos0+t, 1)
			rope.apply(r(k), pos0+t, 1)
			p.round(r(q))
			p.round(r(k))
			p.round(r(v))
		}
	})
}

// attnOut adds the output projection of the attention output a (rounded
// in place) to the residual for n tokens: x2 = x + Wo·a.
func attnOut(lt *layerT, p Precision, n int, a, x, x2 []float32, par bool) {
	D := len(x) / n
	p.round(a[:n*D])
	linear(x2, a, lt.wo, n, D, D)
	rows(n, par, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			r := x2[t*D : (t+1)*D]
			p.round(r)
			for i, v := range x[t*D : (t+1)*D] {
				r[i] += v
			}
			p.round(r)
		}
	})
}

// headRows is the final norm and the LM head for n tokens.
func headRows(w *Weights, wt *weightsT, p Precision, n int, x, xf, rms, logits []float32, par bool) {
	D, V := len(w.FinalNorm), len(wt.lmHead)/len(w.FinalNorm)
	rows(n, par, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			h := xf[t*D : (t+1)*D]
			rms[t] = rmsNorm(h, x[t*D:(t+1)*D], w.FinalNorm)
			p.round(h)
		}
	})
	linear(logits, xf, wt.lmHead, n, V, D)
	p.round(logits[:n*V])
}
