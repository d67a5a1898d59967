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

// moeRow is the MoE half of a block for one token, shared by both paths:
// h2 = norm(x2); probs = softmax(router h2); live = topK(probs); the used
// set is replay (sorted) if given, else live; gates are probs at the used
// set renormalised over it (so they stay differentiable in the router
// scores under replay); xout = x2 + Σ_j gate_j · W2 (silu(W1 h2) ⊙ W3 h2).
// e1, e3 ([K·F]) and eout ([K·D]) keep the experts' intermediates; act is
// scratch of length F. It returns the norm's inverse RMS.
func moeRow(lw *LayerWeights, p Precision, x2, h2, probs []float32, live, replay, sel []int32, gates, e1, e3, eout, act, xout []float32) float32 {
	D, F := len(x2), len(act)
	r := rmsNorm(h2, x2, lw.MoENorm)
	p.round(h2)
	matvec(probs, lw.Router, h2)
	p.round(probs)
	softmax(probs, probs)
	topK(live, probs)
	if replay != nil {
		copy(sel, replay)
		slices.Sort(sel)
	} else {
		copy(sel, live)
	}
	var sum float32
	for j, e := range sel {
		gates[j] = probs[e]
		sum += gates[j]
	}
	for j := range gates {
		gates[j] /= sum
	}
	for i := range xout {
		xout[i] = 0
	}
	for j, e := range sel {
		a1, a3, o := e1[j*F:(j+1)*F], e3[j*F:(j+1)*F], eout[j*D:(j+1)*D]
		matvec(a1, lw.W1[e], h2)
		matvec(a3, lw.W3[e], h2)
		p.round(a1)
		p.round(a3)
		for f := range act {
			act[f] = silu(a1[f]) * a3[f]
		}
		p.round(act)
		matvec(o, lw.W2[e], act)
		p.round(o)
		axpy(xout, gates[j], o)
	}
	for i := range xout {
		xout[i] += x2[i]
	}
	p.round(xout)
	return r
}

// moeRowBackward backpropagates dxout through moeRow for one token. It adds
// to dx2 (residual and norm paths), writes dh2 (the norm output gradient,
// for the gain gradient), dS (router score gradients, [E]) and, per used
// expert j, dh1/dh3 ([K·F]) for the weight-gradient pass.
func moeRowBackward(lw *LayerWeights, dxout, dx2, dh2, dS []float32, x2 []float32, rms float32, sel []int32, gates, e1, e3, eout, dh1, dh3, dact []float32) {
	D, F := len(dxout), len(dact)
	clear(dh2)
	clear(dS)
	var gdg float32
	dg := make([]float32, len(sel))
	for j, e := range sel {
		dg[j] = dot(dxout, eout[j*D:(j+1)*D])
		gdg += gates[j] * dg[j]
		// dact = W2ᵀ (g_j dxout)
		clear(dact)
		w2 := lw.W2[e]
		for d := 0; d < D; d++ {
			if g := gates[j] * dxout[d]; g != 0 {
				axpy(dact, g, w2[d*F:(d+1)*F])
			}
		}
		a1, a3 := e1[j*F:(j+1)*F], e3[j*F:(j+1)*F]
		d1, d3 := dh1[j*F:(j+1)*F], dh3[j*F:(j+1)*F]
		for f := 0; f < F; f++ {
			d1[f] = dact[f] * a3[f] * siluGrad(a1[f])
			d3[f] = dact[f] * silu(a1[f])
		}
		w1, w3 := lw.W1[e], lw.W3[e]
		for f := 0; f < F; f++ {
			if d1[f] != 0 {
				axpy(dh2, d1[f], w1[f*D:(f+1)*D])
			}
			if d3[f] != 0 {
				axpy(dh2, d3[f], w3[f*D:(f+1)*D])
			}
		}
	}
	// gate_j = softmax over the used set of the router scores, so
	// dS_e = g_j (dg_j − Σ_i g_i dg_i) at used experts and 0 elsewhere.
	for j, e := range sel {
		dS[e] = gates[j] * (dg[j] - gdg)
		if dS[e] != 0 {
			axpy(dh2, dS[e], lw.Router[int(e)*D:(int(e)+1)*D])
		}
	}
	for i := range dx2 {
		dx2[i] += dxout[i]
	}
	rmsNormBackward(dx2, dh2, x2, lw.MoENorm, rms)
}
