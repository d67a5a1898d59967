package moe

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Tensor is one named parameter: a row-major float32 array.
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32
}

// LayerWeights are the parameters of one transformer block. Matrices are
// [out, in] so that y = W x is a dot product per output row.
type LayerWeights struct {
	AttnNorm []float32   // [D] RMSNorm gain before attention
	Wq       []float32   // [D, D]
	Wk       []float32   // [D, D]
	Wv       []float32   // [D, D]
	Wo       []float32   // [D, D]
	MoENorm  []float32   // [D] RMSNorm gain before the MoE
	Router   []float32   // [E, D]
	W1       [][]float32 // per expert [F, D], gate projection
	W3       [][]float32 // per expert [F, D], up projection
	W2       [][]float32 // per expert [D, F], down projection
}

// Weights is every parameter of a model (or every gradient, same shapes).
type Weights struct {
	Embed     []float32 // [V, D]
	Layers    []LayerWeights
	FinalNorm []float32 // [D]
	LMHead    []float32 // [V, D]
	ValueW    []float32 // [D] value head (used by a critic)
	ValueB    []float32 // [1]
	Tensors   []*Tensor // all of the above, in a fixed order (checkpoint order)
}

// newWeights allocates zeroed weights of cfg's shape in one block.
func newWeights(cfg Config) *Weights {
	w := &Weights{}
	D, F, V, E := cfg.DModel, cfg.DFF, cfg.Vocab, cfg.Experts
	add := func(name string, shape ...int) []float32 {
		n := 1
		for _, s := range shape {
			n *= s
		}
		t := &Tensor{Name: name, Shape: shape, Data: make([]float32, n)}
		w.Tensors = append(w.Tensors, t)
		return t.Data
	}
	w.Embed = add("embed", V, D)
	for l := 0; l < cfg.Layers; l++ {
		p := fmt.Sprintf("layers.%d.", l)
		lw := LayerWeights{
			AttnNorm: add(p+"attn_norm", D),
			Wq:       add(p+"attn.wq", D, D),
			Wk:       add(p+"attn.wk", D, D),
			Wv:       add(p+"attn.wv", D, D),
			Wo:       add(p+"attn.wo", D, D),
			MoENorm:  add(p+"moe_norm", D),
			Router:   add(p+"moe.router", E, D),
		}
		for e := 0; e < E; e++ {
			q := fmt.Sprintf("%smoe.experts.%d.", p, e)
			lw.W1 = append(lw.W1, add(q+"w1", F, D))
			lw.W3 = append(lw.W3, add(q+"w3", F, D))
			lw.W2 = append(lw.W2, add(q+"w2", D, F))
		}
		w.Layers = append(w.Layers, lw)
	}
	w.FinalNorm = add("final_norm", D)
	w.LMHead = add("lm_head", V, D)
	w.ValueW = add("value_head.w", D)
	w.ValueB = add("value_head.b", 1)
	return w
}

// layerT holds one block's matrices transposed to [in, out], the layout
// gemm reads for out = in · Wᵀ. The expert matrices are only there for
// the sampler.
type layerT struct {
	wq, wk, wv, wo, router []float32
	w1, w3, w2             [][]float32
}

// weightsT is every matrix a forward multiplies by, transposed.
type weightsT struct {
	layers []layerT
	lmHead []float32
}

// transposeWeights builds w's transposed matrices, jobs split over
// Workers when par is set. Without experts it leaves the expert matrices
// out (the trainer multiplies by them as stored).
func transposeWeights(w *Weights, cfg Config, experts, par bool) *weightsT {
	D, F, E, V := cfg.DModel, cfg.DFF, cfg.Experts, cfg.Vocab
	wt := &weightsT{layers: make([]layerT, len(w.Layers)), lmHead: make([]float32, V*D)}
	type job struct {
		dst, src   []float32
		rows, cols int
	}
	jobs := []job{{wt.lmHead, w.LMHead, V, D}}
	for l := range w.Layers {
		lw, lt := &w.Layers[l], &wt.layers[l]
		mk := func(src []float32, rows, cols int) []float32 {
			dst := make([]float32, rows*cols)
			jobs = append(jobs, job{dst, src, rows, cols})
			return dst
		}
		lt.wq, lt.wk, lt.wv, lt.wo = mk(lw.Wq, D, D), mk(lw.Wk, D, D), mk(lw.Wv, D, D), mk(lw.Wo, D, D)
		lt.router = mk(lw.Router, E, D)
		for e := 0; e < E && experts; e++ {
			lt.w1 = append(lt.w1, mk(lw.W1[e], F, D))
			lt.w3 = append(lt.w3, mk(lw.W3[e], F, D))
			lt.w2 = append(lt.w2, mk(lw.W2[e], D, F))
		}
	}
	rows(len(jobs), par, func(lo, hi int) {
		for _, j := range jobs[lo:hi] {
			transpose(j.dst, j.src, j.rows, j.cols)
		}
	})
	return wt
}

// NumParams is the total number of scalars.
func (w *Weights) NumParams() int {
	n := 0
	for _, t := range w.Tensors {
		n += len(t.Data)
	}
	return n
}

// Zero sets every value to 0.
func (w *Weights) Zero() {
	for _, t := range w.Tensors {
		clear(t.Data)
	}
}

// Tensor returns the tensor called name, or nil.
func (w *Weights) Tensor(name string) *Tensor {
	for _, t := range w.Tensors {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// initWeights fills w deterministically from cfg.Seed: norm gains 1,
// matrices N(0, 0.02²) with the residual output projections scaled by
// 1/sqrt(2·layers) (GPT-2), the router N(0, 0.1²) so that routing starts
// decisive enough for top-k choices to matter, the value head 0.
func initWeights(w *Weights, cfg Config) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7431_6d6f_6531))
	normal := func(s []float32, std float64) {
		for i := range s {
			s[i] = float32(rng.NormFloat64() * std)
		}
	}
	ones := func(s []float32) {
		for i := range s {
			s[i] = 1
		}
	}
	resid := 0.02 / math.Sqrt(2*float64(cfg.Layers))
	normal(w.Embed, 0.02)
	for _, lw := range w.Layers {
		ones(lw.AttnNorm)
		normal(lw.Wq, 0.02)
		normal(lw.Wk, 0.02)
		normal(lw.Wv, 0.02)
		normal(lw.Wo, resid)
		ones(lw.MoENorm)
		normal(lw.Router, 0.1)
		for e := range lw.W1 {
			normal(lw.W1[e], 0.02)
			normal(lw.W3[e], 0.02)
			normal(lw.W2[e], resid)
		}
	}
	ones(w.FinalNorm)
	normal(w.LMHead, 0.02)
}

// Model is a decoder-only MoE transformer: parameters, their gradients and
// the RoPE tables. The training path (Forward/Backward) runs in float32;
// Sampler runs the serving path. A Model is not safe for concurrent
// mutation; concurrent Forward calls without Backward are safe.
type Model struct {
	Cfg  Config
	W    *Weights // parameters
	G    *Weights // gradients, accumulated by Backward
	rope ropeTable
}

// NewModel builds a model with weights initialised from cfg.Seed.
func NewModel(cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := newModel(cfg)
	initWeights(m.W, cfg)
	return m, nil
}

func newModel(cfg Config) *Model {
	return &Model{Cfg: cfg, W: newWeights(cfg), G: newWeights(cfg), rope: newRope(cfg)}
}

// ZeroGrad clears the accumulated gradients.
func (m *Model) ZeroGrad() { m.G.Zero() }

// Clone returns a deep copy of the model's parameters (gradients zeroed).
func (m *Model) Clone() *Model {
	c := newModel(m.Cfg)
	for i, t := range m.W.Tensors {
		copy(c.W.Tensors[i].Data, t.Data)
	}
	return c
}
