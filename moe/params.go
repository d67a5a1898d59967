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
// [out, in] (PyTorch's nn.Linear layout), so y = W x is a dot product per
// output row. Hq = Heads·HeadDim, Hkv = KVHeads·HeadDim.
type LayerWeights struct {
	AttnNorm []float32   // [D] RMSNorm gain before attention (input_layernorm)
	Wq       []float32   // [Hq, D]
	Wk       []float32   // [Hkv, D]
	Wv       []float32   // [Hkv, D]
	Wo       []float32   // [D, Hq]
	QNorm    []float32   // [HeadDim] RMSNorm gain of every query head
	KNorm    []float32   // [HeadDim] RMSNorm gain of every key head
	MoENorm  []float32   // [D] RMSNorm gain before the MoE (post_attention_layernorm)
	Router   []float32   // [E, D] (mlp.gate)
	W1       [][]float32 // per expert [F, D], gate projection
	W3       [][]float32 // per expert [F, D], up projection
	W2       [][]float32 // per expert [D, F], down projection
}

// Head says what a model computes from its last hidden state.
type Head int

const (
	// LMHead is a policy's: next-token logits, by lm_head or, with tied
	// embeddings, by the embedding matrix (Qwen3MoeForCausalLM).
	LMHead Head = iota
	// ScoreHead is a critic's: one value per position, by a linear layer
	// with a bias (Qwen3MoeForTokenClassification with one label).
	ScoreHead
)

// Weights is every parameter of a model (or every gradient, same shapes).
// Tensor names are transformers' Qwen3-MoE names, as checkpoints hold them.
type Weights struct {
	Embed     []float32 // [V, D]
	Layers    []LayerWeights
	FinalNorm []float32 // [D]
	LMHead    []float32 // [V, D]; nil for a critic, and with tied embeddings (Embed serves)
	Score     []float32 // [1, D]; a critic's only
	ScoreBias []float32 // [1]; a critic's only
	Tensors   []*Tensor // all of the above, in a fixed order (checkpoint order)
}

// newWeights allocates zeroed weights of cfg's shape with head h in one
// block.
func newWeights(cfg Config, h Head) *Weights {
	w := &Weights{}
	D, F, V, E, hd := cfg.DModel, cfg.DFF, cfg.Vocab, cfg.Experts, cfg.HeadDim
	add := func(name string, shape ...int) []float32 {
		n := 1
		for _, s := range shape {
			n *= s
		}
		t := &Tensor{Name: name, Shape: shape, Data: make([]float32, n)}
		w.Tensors = append(w.Tensors, t)
		return t.Data
	}
	w.Embed = add("model.embed_tokens.weight", V, D)
	for l := 0; l < cfg.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		lw := LayerWeights{
			AttnNorm: add(p+"input_layernorm.weight", D),
			Wq:       add(p+"self_attn.q_proj.weight", cfg.qDim(), D),
			Wk:       add(p+"self_attn.k_proj.weight", cfg.kvDim(), D),
			Wv:       add(p+"self_attn.v_proj.weight", cfg.kvDim(), D),
			Wo:       add(p+"self_attn.o_proj.weight", D, cfg.qDim()),
			QNorm:    add(p+"self_attn.q_norm.weight", hd),
			KNorm:    add(p+"self_attn.k_norm.weight", hd),
			MoENorm:  add(p+"post_attention_layernorm.weight", D),
			Router:   add(p+"mlp.gate.weight", E, D),
		}
		for e := 0; e < E; e++ {
			q := fmt.Sprintf("%smlp.experts.%d.", p, e)
			lw.W1 = append(lw.W1, add(q+"gate_proj.weight", F, D))
			lw.W3 = append(lw.W3, add(q+"up_proj.weight", F, D))
			lw.W2 = append(lw.W2, add(q+"down_proj.weight", D, F))
		}
		w.Layers = append(w.Layers, lw)
	}
	w.FinalNorm = add("model.norm.weight", D)
	switch {
	case h == ScoreHead:
		w.Score = add("score.weight", 1, D)
		w.ScoreBias = add("score.bias", 1)
	case !cfg.TieEmbeddings:
		w.LMHead = add("lm_head.weight", V, D)
	}
	return w
}

// logitsMatrix is the [V, D] matrix the LM head multiplies by.
func (w *Weights) logitsMatrix() []float32 {
	if w.LMHead != nil {
		return w.LMHead
	}
	return w.Embed
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
	lmHead []float32 // nil for a critic
}

// transposeWeights builds w's transposed matrices, jobs split over
// Workers when par is set. Without experts it leaves the expert matrices
// out (the trainer multiplies by them as stored).
func transposeWeights(w *Weights, cfg Config, experts, par bool) *weightsT {
	D, F, E, V := cfg.DModel, cfg.DFF, cfg.Experts, cfg.Vocab
	wt := &weightsT{layers: make([]layerT, len(w.Layers))}
	type job struct {
		dst, src   []float32
		rows, cols int
	}
	var jobs []job
	mk := func(src []float32, rows, cols int) []float32 {
		dst := make([]float32, rows*cols)
		jobs = append(jobs, job{dst, src, rows, cols})
		return dst
	}
	if w.Score == nil {
		wt.lmHead = mk(w.logitsMatrix(), V, D)
	}
	for l := range w.Layers {
		lw, lt := &w.Layers[l], &wt.layers[l]
		lt.wq, lt.wk, lt.wv, lt.wo = mk(lw.Wq, cfg.qDim(), D), mk(lw.Wk, cfg.kvDim(), D), mk(lw.Wv, cfg.kvDim(), D), mk(lw.Wo, D, cfg.qDim())
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
// decisive enough for top-k choices to matter, a critic's score head 0.
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
		ones(lw.QNorm)
		ones(lw.KNorm)
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
	if w.LMHead != nil {
		normal(w.LMHead, 0.02)
	}
}

// Model is a decoder-only MoE transformer, a policy (LMHead) or a critic
// (ScoreHead): parameters, their gradients and the RoPE tables. The
// training path (Forward/Backward) runs in float32; Sampler runs a
// policy's serving path. A Model is not safe for concurrent mutation;
// concurrent Forward calls without Backward are safe.
type Model struct {
	Cfg  Config
	Head Head
	W    *Weights // parameters
	G    *Weights // gradients, accumulated by Backward
	rope ropeTable
	bw   scratch // Backward's temporaries
}

// NewModel builds a policy with weights initialised from cfg.Seed.
func NewModel(cfg Config) (*Model, error) {
	return newInit(cfg, LMHead)
}

// NewCritic builds a critic with weights initialised from cfg.Seed.
func NewCritic(cfg Config) (*Model, error) {
	return newInit(cfg, ScoreHead)
}

func newInit(cfg Config, h Head) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := newModel(cfg, h)
	initWeights(m.W, cfg)
	return m, nil
}

func newModel(cfg Config, h Head) *Model {
	return &Model{Cfg: cfg, Head: h, W: newWeights(cfg, h), G: newWeights(cfg, h), rope: newRope(cfg)}
}

// ZeroGrad clears the accumulated gradients.
func (m *Model) ZeroGrad() { m.G.Zero() }

// Clone returns a deep copy of the model's parameters (gradients zeroed).
func (m *Model) Clone() *Model {
	c := newModel(m.Cfg, m.Head)
	for i, t := range m.W.Tensors {
		copy(c.W.Tensors[i].Data, t.Data)
	}
	return c
}

// Critic returns a critic whose backbone is a copy of m's and whose score
// head is 0, so its first values are 0 and its features are the policy's.
func (m *Model) Critic() *Model {
	c := newModel(m.Cfg, ScoreHead)
	for _, t := range c.W.Tensors {
		if src := m.W.Tensor(t.Name); src != nil {
			copy(t.Data, src.Data)
		}
	}
	return c
}
