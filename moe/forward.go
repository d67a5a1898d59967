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
	// LogProbs[t] = log p(IDs[t+1] | IDs[:t+1]), length T−1; a policy's.
	LogProbs []float32
	// Values[t] is the score head at position t, length T; a critic's.
	Values []float32
	// Routing is the routing used (replayed where given); LiveRouting what
	// the router chose on its own. Both [T, L, K].
	Routing, LiveRouting Routing

	layers []passLayer
	xl     []float32 // final residual [T, D]
	xf     []float32 // final norm output [T, D]
	rmsF   []float32
	logits []float32 // [T−1, V] (a policy's)
	temp   float64   // the forward's temperature; 1 when none
}

// RouterProbs returns a copy of layer's router probabilities, [T, Experts]
// row-major: softmax(Router h2) of every token, the scores LiveRouting's
// sets are the top-k of. A copy, so a caller can reorder or rank them
// without reaching into the state Backward reads. Servers list a token's
// experts by these scores, highest first, where Routing holds them by id.
func (p *Pass) RouterProbs(layer int) []float32 {
	if layer < 0 || layer >= len(p.layers) {
		panic(fmt.Sprintf("moe: router probabilities of layer %d of %d", layer, len(p.layers)))
	}
	return append([]float32(nil), p.layers[layer].moe.probs...)
}

// attnAct is one layer's attention inputs and intermediates over n
// tokens, shared by both paths (the sampler's n is 1).
type attnAct struct {
	h1         []float32 // [n, D] norm(x)
	qpre, kpre []float32 // [n, Hq], [n, Hkv] the projections before the head norms
	q, k       []float32 // [n, Hq], [n, Hkv] after the head norms and RoPE
	rms1       []float32 // [n]
	rq, rk     []float32 // [n·Heads], [n·KVHeads] the head norms' inverse roots
}

func newAttnAct(cfg Config, n int) attnAct {
	f := func(k int) []float32 { return make([]float32, k) }
	return attnAct{h1: f(n * cfg.DModel), qpre: f(n * cfg.qDim()), kpre: f(n * cfg.kvDim()), q: f(n * cfg.qDim()), k: f(n * cfg.kvDim()),
		rms1: f(n), rq: f(n * cfg.Heads), rk: f(n * cfg.KVHeads)}
}

type passLayer struct {
	x, x2 []float32 // [T, D] the block's input and the residual after attention
	att   attnAct
	v, a  []float32 // [T, Hkv] values, [T, Hq] attention output
	p     []float32 // attention weights [heads, T, T]
	moe   *moeAct
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
		pl := passLayer{x: x, att: newAttnAct(cfg, T), v: f(T * cfg.kvDim()), a: f(T * cfg.qDim()), x2: f(T * D),
			p: f(cfg.Heads * T * T), moe: newMoEAct(cfg, T)}
		attnIn(cfg, lw, lt, m.rope, F32, 0, T, pl.x, &pl.att, pl.v, true)
		attendCausal(pl.a, pl.att.q, pl.att.k, pl.v, pl.p, T, cfg)
		attnOut(lt, F32, T, pl.a, pl.x, pl.x2, true)
		for t := 0; t < nReplay; t++ {
			copy(replay[t*K:(t+1)*K], opt.Replay.At(t, l))
		}
		xout := f(T * D)
		moeForward(cfg, lw, lt, F32, T, pl.x2, replay, nReplay, pl.moe, xout, true)
		for t := 0; t < T; t++ {
			copy(p.LiveRouting.At(t, l), pl.moe.live[t*K:(t+1)*K])
			copy(p.Routing.At(t, l), pl.moe.sel[t*K:(t+1)*K])
		}
		p.layers = append(p.layers, pl)
		x = xout
	}
	p.xl, p.xf, p.rmsF = x, f(T*D), f(T)
	finalNorm(cfg, m.W, F32, T, p.xl, p.xf, p.rmsF, true)
	if m.Head == ScoreHead {
		p.Values = f(T)
		parallel(T, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				p.Values[t] = dot(p.xf[t*D:(t+1)*D], m.W.Score) + m.W.ScoreBias[0]
			}
		})
		return p, nil
	}
	// The last position predicts nothing the sequence holds.
	p.logits, p.LogProbs = f((T-1)*V), f(T-1)
	lmHead(wt, F32, T-1, p.xf, p.logits, D)
	parallel(T-1, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			p.LogProbs[t] = logSoftmaxAtTemp(p.logits[t*V:(t+1)*V], ids[t+1], p.temp)
		}
	})
	return p, nil
}

// attnIn is the first half of attention for n tokens at positions pos0…,
// shared by both paths: h1 = norm(x); q, k, v = W h1; each query and key
// head normalised (q_norm, k_norm), then rotated (RoPE). v is written to
// its own slice (the sampler's cache row).
func attnIn(cfg Config, lw *LayerWeights, lt *layerT, rope ropeTable, p Precision, pos0, n int, x []float32, a *attnAct, v []float32, par bool) {
	D, dq, dkv, eps := cfg.DModel, cfg.qDim(), cfg.kvDim(), float32(cfg.RMSNormEps)
	H, KV := cfg.Heads, cfg.KVHeads
	rows(n, par, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			h := a.h1[t*D : (t+1)*D]
			a.rms1[t] = rmsNorm(h, x[t*D:(t+1)*D], lw.AttnNorm, eps)
			p.round(h)
		}
	})
	linear(a.qpre, a.h1, lt.wq, n, dq, D)
	linear(a.kpre, a.h1, lt.wk, n, dkv, D)
	linear(v, a.h1, lt.wv, n, dkv, D)
	rows(n, par, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			qp, kp := a.qpre[t*dq:(t+1)*dq], a.kpre[t*dkv:(t+1)*dkv]
			q, k := a.q[t*dq:(t+1)*dq], a.k[t*dkv:(t+1)*dkv]
			p.round(qp)
			p.round(kp)
			headNorm(q, qp, lw.QNorm, a.rq[t*H:(t+1)*H], eps)
			headNorm(k, kp, lw.KNorm, a.rk[t*KV:(t+1)*KV], eps)
			p.round(q)
			p.round(k)
			rope.apply(q, pos0+t, 1)
			rope.apply(k, pos0+t, 1)
			p.round(q)
			p.round(k)
			p.round(v[t*dkv : (t+1)*dkv])
		}
	})
}

// attnOut adds the output projection of the attention output a ([n, Hq],
// rounded in place) to the residual for n tokens: x2 = x + Wo·a.
func attnOut(lt *layerT, p Precision, n int, a, x, x2 []float32, par bool) {
	D, dq := len(x)/n, len(a)/n
	p.round(a[:n*dq])
	linear(x2, a, lt.wo, n, D, dq)
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

// finalNorm is the last RMSNorm for n tokens.
func finalNorm(cfg Config, w *Weights, p Precision, n int, x, xf, rms []float32, par bool) {
	D, eps := cfg.DModel, float32(cfg.RMSNormEps)
	rows(n, par, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			h := xf[t*D : (t+1)*D]
			rms[t] = rmsNorm(h, x[t*D:(t+1)*D], w.FinalNorm, eps)
			p.round(h)
		}
	})
}

// lmHead sets the logits of n normalised rows.
func lmHead(wt *weightsT, p Precision, n int, xf, logits []float32, D int) {
	V := len(wt.lmHead) / D
	linear(logits, xf, wt.lmHead, n, V, D)
	p.round(logits[:n*V])
}
