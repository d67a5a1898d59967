package moe

import (
	"errors"
	"fmt"
	"sync"
)

// Backward accumulates into m.G the gradient of a loss L given by the
// caller: a policy's through dLogProbs[t] = ∂L/∂LogProbs[t] (length T−1),
// a critic's through dValues[t] = ∂L/∂Values[t] (length T). The pass must
// come from m.Forward with unchanged weights. Replayed experts stay
// fixed; the router still gets gradients through the gate weights.
func (m *Model) Backward(p *Pass, dLogProbs, dValues []float32) error {
	cfg := m.Cfg
	T, D := len(p.IDs), cfg.DModel
	switch {
	case m.Head == LMHead && dValues != nil:
		return errors.New("moe backward: value gradients for a policy, which has no score head")
	case m.Head == ScoreHead && dLogProbs != nil:
		return errors.New("moe backward: log-prob gradients for a critic, which has no LM head")
	case dLogProbs != nil && len(dLogProbs) != T-1:
		return fmt.Errorf("moe backward: %d log-prob gradients for %d targets", len(dLogProbs), T-1)
	case dValues != nil && len(dValues) != T:
		return fmt.Errorf("moe backward: %d value gradients for %d positions", len(dValues), T)
	}
	m.bw.reset()
	f := m.bw.take
	g := m.G
	dxf := f(T * D)
	if dLogProbs != nil {
		m.lmHeadBackward(p, dLogProbs, dxf)
	}
	for t, dv := range dValues {
		if dv != 0 {
			axpyAt(dxf[t*D:(t+1)*D], dv, m.W.Score)
			axpyAt(g.Score, dv, p.xf[t*D:(t+1)*D])
			g.ScoreBias[0] += dv
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
		dx = m.layerBackward(l, p, dx)
	}
	for t, id := range p.IDs {
		axpyAt(g.Embed[id*D:(id+1)*D], 1, dx[t*D:(t+1)*D])
	}
	return nil
}

// lmHeadBackward adds to dxf the gradient through the LM head and
// accumulates the head's (or, tied, the embedding's) gradient:
// dlogits_t = dlogp_t (onehot(target) − softmax(logits_t/τ)) / τ, for the
// rows with a non-zero dlogp only (masked tokens add nothing).
func (m *Model) lmHeadBackward(p *Pass, dLogProbs, dxf []float32) {
	D, V := m.Cfg.DModel, m.Cfg.Vocab
	f := m.bw.take
	var tgt []int
	for t, d := range dLogProbs {
		if d != 0 {
			tgt = append(tgt, t)
		}
	}
	n := len(tgt)
	dlogits, xfR, dxfR := m.bw.takeDirty(n*V), m.bw.takeDirty(n*D), f(n*D)
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
	gw := m.G.LMHead
	if gw == nil {
		gw = m.G.Embed
	}
	linearBackward(dxfR, gw, dlogits, xfR, m.W.logitsMatrix(), n, V, D)
	for i, t := range tgt {
		copy(dxf[t*D:(t+1)*D], dxfR[i*D:(i+1)*D])
	}
}

// layerBackward takes the gradient dx at block l's output and returns the
// gradient at its input, accumulating the block's parameter gradients.
func (m *Model) layerBackward(l int, p *Pass, dx []float32) []float32 {
	cfg := m.Cfg
	T, D, dq, dkv, hd := len(p.IDs), cfg.DModel, cfg.qDim(), cfg.kvDim(), cfg.HeadDim
	H, KV := cfg.Heads, cfg.KVHeads
	f := m.bw.take
	lw, gl, pl := &m.W.Layers[l], &m.G.Layers[l], &p.layers[l]
	at := &pl.att
	dx2 := m.bw.takeDirty(T * D) // moeBackward copies dx into it first
	moeBackward(cfg, lw, gl, pl.moe, T, pl.x2, dx, dx2, &m.bw)
	// Attention half: x2 = x + Wo a.
	da := f(T * dq)
	linearBackward(da, gl.Wo, dx2, pl.a, lw.Wo, T, D, dq)
	dq1, dk1, dv := m.bw.takeDirty(T*dq), f(T*dkv), f(T*dkv) // attentionBackward sets dQ
	attentionBackward(dq1, dk1, dv, da, at.q, at.k, pl.v, pl.p, T, cfg, &m.bw)
	// Through RoPE (its inverse rotation), then the head norms.
	dqp, dkp := f(T*dq), f(T*dkv)
	parallel(T, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			q, k := dq1[t*dq:(t+1)*dq], dk1[t*dkv:(t+1)*dkv]
			m.rope.apply(q, t, -1)
			m.rope.apply(k, t, -1)
			for h := 0; h < H; h++ {
				s := func(b []float32) []float32 { return b[t*dq+h*hd : t*dq+(h+1)*hd] }
				rmsNormBackward(s(dqp), s(dq1), s(at.qpre), lw.QNorm, at.rq[t*H+h])
			}
			for h := 0; h < KV; h++ {
				s := func(b []float32) []float32 { return b[t*dkv+h*hd : t*dkv+(h+1)*hd] }
				rmsNormBackward(s(dkp), s(dk1), s(at.kpre), lw.KNorm, at.rk[t*KV+h])
			}
		}
	})
	rmsNormGainGrad(gl.QNorm, dq1, at.qpre, at.rq)
	rmsNormGainGrad(gl.KNorm, dk1, at.kpre, at.rk)
	dh := f(T * D)
	linearBackward(dh, gl.Wq, dqp, at.h1, lw.Wq, T, dq, D)
	linearBackward(dh, gl.Wk, dkp, at.h1, lw.Wk, T, dkv, D)
	linearBackward(dh, gl.Wv, dv, at.h1, lw.Wv, T, dkv, D)
	rmsNormGainGrad(gl.AttnNorm, dh, pl.x, at.rms1)
	ndx := dx2 // residual
	parallel(T, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			r := func(s []float32) []float32 { return s[t*D : (t+1)*D] }
			rmsNormBackward(r(ndx), r(dh), r(pl.x), lw.AttnNorm, at.rms1[t])
		}
	})
	return ndx
}

// scratch lends Backward its temporaries out of chunks kept from pass to
// pass, so that a training step does not hand the allocator and the
// collector tens of megabytes to fault in, zero and sweep. Each pass
// carves the same sizes in the same order, so from the second pass on
// everything comes from memory the first one touched; take is safe for
// Backward's goroutines.
type scratch struct {
	mu       sync.Mutex
	chunks   [][]float32
	cur, off int // the chunk being carved and how far
}

// scratchChunk is the smallest chunk, in floats.
const scratchChunk = 1 << 20

// reset reclaims everything taken: the previous Backward's temporaries
// are dead by the time the next one starts.
func (s *scratch) reset() { s.cur, s.off = 0, 0 }

// take returns n zeroed floats.
func (s *scratch) take(n int) []float32 {
	b := s.takeDirty(n)
	clear(b)
	return b
}

// takeDirty returns n floats holding whatever an earlier pass left there:
// for a buffer written in full before it is read.
func (s *scratch) takeDirty(n int) []float32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ; s.cur < len(s.chunks); s.cur, s.off = s.cur+1, 0 {
		if c := s.chunks[s.cur]; s.off+n <= len(c) {
			s.off += n
			return c[s.off-n : s.off : s.off]
		}
	}
	s.chunks = append(s.chunks, make([]float32, max(n, scratchChunk)))
	s.off = n
	return s.chunks[s.cur][:n:n]
}
