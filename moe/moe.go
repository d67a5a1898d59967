package moe

import (
	"fmt"
	"slices"
)

// Routing is the set of experts each token used at each MoE layer:
// Experts[(t*Layers+l)*TopK + j], ids sorted ascending within each
// (token, layer) set. It is SGLang's routed_experts array,
// reshape(Tokens, Layers, TopK).
type Routing struct {
	Tokens  int     `json:"tokens"`
	Layers  int     `json:"layers"`
	TopK    int     `json:"top_k"`
	Experts []int32 `json:"experts"`
}

// NewRouting allocates a routing record for tokens×layers×topK.
func NewRouting(tokens, layers, topK int) Routing {
	return Routing{Tokens: tokens, Layers: layers, TopK: topK, Experts: make([]int32, tokens*layers*topK)}
}

// At returns the experts of token t at layer l.
func (r Routing) At(t, l int) []int32 {
	i := (t*r.Layers + l) * r.TopK
	return r.Experts[i : i+r.TopK]
}

// Slice returns the routing of tokens [lo, hi), sharing storage.
func (r Routing) Slice(lo, hi int) Routing {
	n := r.Layers * r.TopK
	return Routing{Tokens: hi - lo, Layers: r.Layers, TopK: r.TopK, Experts: r.Experts[lo*n : hi*n]}
}

// Validate checks the shape against cfg and that every set holds distinct
// expert ids in range.
func (r Routing) Validate(cfg Config) error {
	if r.Layers != cfg.Layers || r.TopK != cfg.TopK {
		return fmt.Errorf("routing: shape [%d, %d, %d] does not match the model's %d layers, top_k %d", r.Tokens, r.Layers, r.TopK, cfg.Layers, cfg.TopK)
	}
	if len(r.Experts) != r.Tokens*r.Layers*r.TopK {
		return fmt.Errorf("routing: %d expert ids for shape [%d, %d, %d]", len(r.Experts), r.Tokens, r.Layers, r.TopK)
	}
	for t := 0; t < r.Tokens; t++ {
		for l := 0; l < r.Layers; l++ {
			set := r.At(t, l)
			for j, e := range set {
				if e < 0 || int(e) >= cfg.Experts {
					return fmt.Errorf("routing: token %d layer %d: expert %d outside [0,%d)", t, l, e, cfg.Experts)
				}
				if slices.Contains(set[:j], e) {
					return fmt.Errorf("routing: token %d layer %d: expert %d selected twice", t, l, e)
				}
			}
		}
	}
	return nil
}

// CompareRouting counts the (token, layer) pairs, over the tokens both
// records cover, whose expert sets differ.
func CompareRouting(a, b Routing) (mismatches, total int) {
	n := min(a.Tokens, b.Tokens)
	if a.Layers != b.Layers || a.TopK != b.TopK {
		return n * max(a.Layers, b.Layers), n * max(a.Layers, b.Layers)
	}
	for t := 0; t < n; t++ {
		for l := 0; l < a.Layers; l++ {
			x, y := slices.Clone(a.At(t, l)), slices.Clone(b.At(t, l))
			slices.Sort(x)
			slices.Sort(y)
			if !slices.Equal(x, y) {
				mismatches++
			}
			total++
		}
	}
	return mismatches, total
}

// topK writes into sel the k experts with the highest router probability,
// ties to the lower id, sorted by id.
func topK(sel []int32, probs []float32) {
	k := len(sel)
	for j := 0; j < k; j++ {
		best := int32(-1)
		for e, p := range probs {
			if slices.Contains(sel[:j], int32(e)) {
				continue
			}
			if best < 0 || p > probs[best] {
				best = int32(e)
			}
		}
		sel[j] = best
	}
	slices.Sort(sel)
}

// moeAct is one layer's MoE half over n tokens: its inputs, routing and
// intermediates, kept by the trainer for the backward pass. Slot
// s = t·K + j is token t's j-th used expert; the per-expert arrays hold
// the slots grouped by expert (rows off[e]..off[e+1] are expert e's, in
// token order), and row[s] is slot s's row there. Grouping lets each
// expert run as one matrix product over all its tokens. The expert
// intermediates are kept transposed, one block per expert: expert e's
// m = off[e+1]−off[e] rows of width W occupy [off[e]·W, off[e+1]·W) as
// [W, m], so the trainer multiplies by the weights as stored (W1 · hgᵀ)
// rather than transposing every expert's matrices on each forward. With
// m = 1 (the sampler) the block is the row itself.
type moeAct struct {
	h2, probs, gates []float32 // [n,D], [n,E], [n,K]
	rms              []float32 // [n]
	live, sel        []int32   // [n·K]: the router's choice, the set used
	row              []int32   // [n·K]
	off              []int     // [E+1]
	hg               []float32 // [n·K, D] h2 of each row (rows, not blocks)
	e1, e3, act      []float32 // per expert [F, m]: W1 h2, W3 h2, silu(e1) ⊙ e3
	eout             []float32 // [n·K, D] W2 act of each row (rows, not blocks)
}

func newMoEAct(cfg Config, n int) *moeAct {
	D, E, K, F := cfg.DModel, cfg.Experts, cfg.TopK, cfg.DFF
	f := func(k int) []float32 { return make([]float32, k) }
	return &moeAct{h2: f(n * D), probs: f(n * E), gates: f(n * K), rms: f(n),
		live: make([]int32, n*K), sel: make([]int32, n*K), row: make([]int32, n*K), off: make([]int, E+1),
		hg: f(n * K * D), e1: f(n * K * F), e3: f(n * K * F), act: f(n * K * F), eout: f(n * K * D)}
}

// moeForward is the MoE half of a block for n tokens, shared by both
// paths: h2 = norm(x2); probs = softmax(router h2); live = topK(probs);
// the used set is the replayed one (sorted) for the first nReplay tokens
// (replay holds their sets, [nReplay·K]), else live; gates are probs at
// the used set, renormalised over it when cfg.NormTopKProb (so under
// replay they stay differentiable in the router scores); xout = x2 +
// Σ_j gate_j · W2 (silu(W1 h2) ⊙ W3 h2), summed over j in order (the
// experts' ascending ids, as transformers adds them). par splits the work
// over Workers.
func moeForward(cfg Config, lw *LayerWeights, lt *layerT, p Precision, n int, x2 []float32, replay []int32, nReplay int, ma *moeAct, xout []float32, par bool) {
	D, E, K, F, eps := cfg.DModel, cfg.Experts, cfg.TopK, cfg.DFF, float32(cfg.RMSNormEps)
	rows(n, par, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			h := ma.h2[t*D : (t+1)*D]
			ma.rms[t] = rmsNorm(h, x2[t*D:(t+1)*D], lw.MoENorm, eps)
			p.round(h)
		}
	})
	gemmPar(false, n, E, D, ma.h2, D, 1, lt.router, E, ma.probs, E)
	for t := 0; t < n; t++ {
		probs, live, sel, gates := ma.probs[t*E:(t+1)*E], ma.live[t*K:(t+1)*K], ma.sel[t*K:(t+1)*K], ma.gates[t*K:(t+1)*K]
		p.round(probs)
		softmax(probs, probs)
		topK(live, probs)
		if t < nReplay {
			copy(sel, replay[t*K:(t+1)*K])
			slices.Sort(sel)
		} else {
			copy(sel, live)
		}
		var sum float32
		for j, e := range sel {
			gates[j] = probs[e]
			sum += gates[j]
		}
		if cfg.NormTopKProb {
			for j := range gates {
				gates[j] /= sum
			}
		}
	}
	groupExperts(ma, E)
	for s, r := range ma.row {
		t := s / K
		copy(ma.hg[int(r)*D:int(r+1)*D], ma.h2[t*D:(t+1)*D])
	}
	rows(E, par && n > 1, func(lo, hi int) {
		var hgT []float32
		for e := lo; e < hi; e++ {
			r0, r1 := ma.off[e], ma.off[e+1]
			m := r1 - r0
			if m == 0 {
				continue
			}
			e1, e3, act, o := ma.e1[r0*F:r1*F], ma.e3[r0*F:r1*F], ma.act[r0*F:r1*F], ma.eout[r0*D:r1*D]
			if m == 1 && lt.w1 != nil {
				// One row (the sampler): by the transposed weights.
				h := ma.hg[r0*D : r1*D]
				gemm(false, 1, F, D, h, D, 1, lt.w1[e], F, e1, F)
				gemm(false, 1, F, D, h, D, 1, lt.w3[e], F, e3, F)
				expertAct(p, e1, e3, act)
				gemm(false, 1, D, F, act, F, 1, lt.w2[e], D, o, D)
			} else {
				// Many rows (the trainer): Wᵀ-free, in the blocks' layout.
				hgT = slices.Grow(hgT[:0], m*D)[:m*D]
				transpose(hgT, ma.hg[r0*D:r1*D], m, D)
				gemm(false, F, m, D, lw.W1[e], D, 1, hgT, m, e1, m)
				gemm(false, F, m, D, lw.W3[e], D, 1, hgT, m, e3, m)
				expertAct(p, e1, e3, act)
				gemm(false, D, m, F, lw.W2[e], F, 1, act, m, o, m)
				// Back to rows: the gate sums and their gradients read
				// each token's output whole.
				transpose(hgT, o, D, m)
				copy(o, hgT)
			}
			p.round(o)
		}
	})
	rows(n, par, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			xo := xout[t*D : (t+1)*D]
			clear(xo)
			for j := 0; j < K; j++ {
				r := int(ma.row[t*K+j])
				axpyAt(xo, ma.gates[t*K+j], ma.eout[r*D:(r+1)*D])
			}
			for i, v := range x2[t*D : (t+1)*D] {
				xo[i] += v
			}
			p.round(xo)
		}
	})
}

// expertAct rounds an expert's two projections and sets act = silu(e1) ⊙ e3.
func expertAct(p Precision, e1, e3, act []float32) {
	p.round(e1)
	p.round(e3)
	silus(act, e1)
	for i, v := range e3 {
		act[i] *= v
	}
	p.round(act)
}

// groupExperts fills ma.off and ma.row from ma.sel: a counting sort of the
// slots by expert, stable in slot (token) order.
func groupExperts(ma *moeAct, E int) {
	clear(ma.off)
	for _, e := range ma.sel {
		ma.off[e+1]++
	}
	for e := 0; e < E; e++ {
		ma.off[e+1] += ma.off[e]
	}
	next := slices.Clone(ma.off[:E])
	for s, e := range ma.sel {
		ma.row[s] = int32(next[e])
		next[e]++
	}
}

// moeBackward backpropagates dxout through moeForward over T tokens: it
// sets dx2 (residual and norm paths) and adds the router, expert and norm
// gain gradients to gl. Each expert's gradients come from one goroutine
// walking its rows in token order, so sums do not depend on Workers.
func moeBackward(cfg Config, lw, gl *LayerWeights, ma *moeAct, T int, x2, dxout, dx2 []float32, sc *scratch) {
	D, E, F, K := cfg.DModel, cfg.Experts, cfg.DFF, cfg.TopK
	f := sc.take
	dS, dh2 := f(T*E), f(T*D)
	// dO, dact, d1, d3 are per-expert blocks like ma.e1; dhg rows. Every
	// slot's row of each is written before it is read.
	dirty := sc.takeDirty
	dO, dact, d1, d3, dhg := dirty(T*K*D), dirty(T*K*F), dirty(T*K*F), dirty(T*K*F), dirty(T*K*D)
	dOr := dirty(T * K * D) // dO's rows, written whole, then transposed into blocks per expert
	// With dg_j = dxout·eout_j (the expert output gradient is g_j dxout):
	// normalised, gate_j is a softmax over the used set of the router
	// scores, so dS_e = g_j (dg_j − Σ_i g_i dg_i) at used experts and 0
	// elsewhere; not normalised, gate_j = p_e of the softmax over all
	// experts, so dS_e = p_e ([e used] dg_e − Σ_i g_i dg_i) at every e.
	parallel(T, func(lo, hi int) {
		dg := make([]float32, K)
		for t := lo; t < hi; t++ {
			dx := dxout[t*D : (t+1)*D]
			var gdg float32
			for j := 0; j < K; j++ {
				s := t*K + j
				r, g := int(ma.row[s]), ma.gates[s]
				dg[j] = dot(dx, ma.eout[r*D:(r+1)*D])
				gdg += g * dg[j]
				for i, v := range dx {
					dOr[r*D+i] = g * v
				}
			}
			if !cfg.NormTopKProb {
				for e, pe := range ma.probs[t*E : (t+1)*E] {
					dS[t*E+e] = pe * -gdg
				}
			}
			for j, e := range ma.sel[t*K : (t+1)*K] {
				dS[t*E+int(e)] = ma.gates[t*K+j] * (dg[j] - gdg)
			}
		}
	})
	parallel(E, func(lo, hi int) {
		var act []float32
		for e := lo; e < hi; e++ {
			r0, r1 := ma.off[e], ma.off[e+1]
			m := r1 - r0
			if m == 0 {
				continue
			}
			bF := func(s []float32) []float32 { return s[r0*F : r1*F] }
			transpose(dO[r0*D:r1*D], dOr[r0*D:r1*D], m, D)
			// dactᵀ = W2ᵀ dOᵀ, [F, m].
			gemm(false, F, m, D, lw.W2[e], 1, F, dO[r0*D:], m, bF(dact), m)
			// silu'(x) = s (1 + x (1 − s)) with s = sigmoid(x).
			e1, e3, da, g1, g3 := bF(ma.e1), bF(ma.e3), bF(dact), bF(d1), bF(d3)
			sigmoids(g1, e1)
			e3, da, g3 = e3[:len(e1)], da[:len(e1)], g3[:len(e1)]
			for i, x := range e1 {
				s := g1[i]
				g1[i] = da[i] * e3[i] * (s * (1 + x*(1-s)))
				g3[i] = da[i] * (x * s)
			}
			gemm(false, m, D, F, d1[r0*F:], 1, m, lw.W1[e], D, dhg[r0*D:], D)
			gemm(true, m, D, F, d3[r0*F:], 1, m, lw.W3[e], D, dhg[r0*D:], D)
			act = slices.Grow(act[:0], m*F)[:m*F]
			transpose(act, bF(ma.act), F, m)
			gemm(true, D, F, m, dO[r0*D:], m, 1, act, F, gl.W2[e], F)
			gemm(true, F, D, m, d1[r0*F:], m, 1, ma.hg[r0*D:], D, gl.W1[e], D)
			gemm(true, F, D, m, d3[r0*F:], m, 1, ma.hg[r0*D:], D, gl.W3[e], D)
		}
	})
	parallel(T, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			dh := dh2[t*D : (t+1)*D]
			for j := 0; j < K; j++ {
				r := int(ma.row[t*K+j])
				for i, v := range dhg[r*D : (r+1)*D] {
					dh[i] += v
				}
			}
		}
	})
	gemmPar(true, T, D, E, dS, E, 1, lw.Router, D, dh2, D)
	gemmPar(true, E, D, T, dS, 1, E, ma.h2, D, gl.Router, D)
	rmsNormGainGrad(gl.MoENorm, dh2, x2, ma.rms)
	parallel(T, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			r := func(s []float32) []float32 { return s[t*D : (t+1)*D] }
			copy(r(dx2), r(dxout))
			rmsNormBackward(r(dx2), r(dh2), r(x2), lw.MoENorm, ma.rms[t])
		}
	})
}
