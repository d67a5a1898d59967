package moe

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// AdamConfig is Adam at the learning rate LR (a trainer that schedules it
// sets LR before each step). WeightDecay, when above 0, is AdamW's
// decoupled decay: each step first shrinks every matrix by LR·WeightDecay
// of itself, leaving the norms' gains alone. The recipe's PPO and critic
// updates use neither a schedule nor decay.
type AdamConfig struct {
	LR          float64 `json:"lr"`
	Beta1       float64 `json:"beta1"`
	Beta2       float64 `json:"beta2"`
	Eps         float64 `json:"eps"`
	WeightDecay float64 `json:"weight_decay,omitzero"`
}

// DefaultAdam is lr 1e-3, β 0.9/0.95, ε 1e-8.
func DefaultAdam() AdamConfig { return AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8} }

// Adam holds the moment estimates for one model's parameters.
type Adam struct {
	Cfg  AdamConfig
	m    *Model
	mom  *Weights
	vel  *Weights
	step int
}

// NewAdam creates an optimiser for m's parameters.
func NewAdam(m *Model, cfg AdamConfig) *Adam {
	return &Adam{Cfg: cfg, m: m, mom: newWeights(m.Cfg, m.Head), vel: newWeights(m.Cfg, m.Head)}
}

// Mark returns a function that puts the moments and the step count back
// as they are now, so that an update that is not taken leaves the
// optimiser as it found it.
func (a *Adam) Mark() (restore func()) {
	mom, vel, step := CloneData(a.mom.Tensors), CloneData(a.vel.Tensors), a.step
	return func() {
		for i := range mom {
			copy(a.mom.Tensors[i].Data, mom[i])
			copy(a.vel.Tensors[i].Data, vel[i])
		}
		a.step = step
	}
}

// CloneData copies the tensors' values, tensor by tensor.
func CloneData(ts []*Tensor) [][]float32 {
	out := make([][]float32, len(ts))
	for i, t := range ts {
		out[i] = slices.Clone(t.Data)
	}
	return out
}

// Steps is the number of updates applied.
func (a *Adam) Steps() int { return a.step }

// Step applies one bias-corrected Adam update from m.G to m.W. It does not
// clear the gradients.
func (a *Adam) Step() { a.stepScaled(1, false) }

// stepScaled is Step with every gradient first multiplied by scale (in
// float32, the bits of scaling m.G in place), clearing each gradient
// once it is used when zero is set: Update's clip, step and ZeroGrad in
// one pass over the parameters.
func (a *Adam) stepScaled(scale float32, zero bool) {
	a.step++
	c := a.Cfg
	bc1 := 1 - math.Pow(c.Beta1, float64(a.step))
	bc2 := 1 - math.Pow(c.Beta2, float64(a.step))
	k := [8]float32{float32(c.Beta1), float32(1 - c.Beta1), float32(c.Beta2), float32(1 - c.Beta2),
		float32(c.LR / bc1), float32(1 / math.Sqrt(bc2)), float32(c.Eps), scale}
	shrink := float32(1 - c.LR*c.WeightDecay)
	for i, t := range a.m.W.Tensors {
		if c.WeightDecay > 0 && len(t.Shape) > 1 {
			for j := range t.Data {
				t.Data[j] *= shrink
			}
		}
		adamStep(t.Data, a.m.G.Tensors[i].Data, a.mom.Tensors[i].Data, a.vel.Tensors[i].Data, &k, zero)
	}
}

// adamStep updates w and the moments m, v from the gradient g in float32,
// as torch.optim.Adam does: m' = β1·m + (1−β1)·g, v' = β2·v + (1−β2)·g·g,
// w −= lr/bc1 · m' / (√v'/√bc2 + ε), with k = β1, 1−β1, β2, 1−β2, lr/bc1,
// 1/√bc2, ε and the gradient's scale. Eight lanes at a time where the CPU
// has AVX, the same operations in the same order either way, each
// product rounded before it is added, so the bits do not depend on the
// path. zero clears g.
func adamStep(w, g, m, v []float32, k *[8]float32, zero bool) {
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	j := 0
	if useAVX {
		j = len(w) &^ 7
		if j > 0 {
			adam8(&w[0], &g[0], &m[0], &v[0], j, k, zero)
		}
	}
	for ; j < len(w); j++ {
		gj := float32(g[j] * k[7])
		mj := float32(k[0]*m[j]) + float32(k[1]*gj)
		vj := float32(k[2]*v[j]) + float32(float32(k[3]*gj)*gj)
		m[j], v[j] = mj, vj
		d := float32(float32(math.Sqrt(float64(vj)))*k[5]) + k[6]
		w[j] -= float32(k[4] * (mj / d))
		if zero {
			g[j] = 0
		}
	}
}

// Update ends one optimiser step of every trainer: it clips m.G's global
// norm to maxNorm (0: no clipping), applies Step and clears the
// gradients, in one pass after the norm's. It returns the norm before
// clipping.
func (a *Adam) Update(maxNorm float64) float64 {
	n := a.m.GradNorm()
	scale := float32(1)
	if maxNorm > 0 && n > maxNorm {
		scale = float32(maxNorm / n)
	}
	a.stepScaled(scale, true)
	return n
}

// GradNorm is the global L2 norm of m.G, summed in float64: four
// interleaved partial sums per tensor (independent additions in flight),
// reduced in a fixed order.
func (m *Model) GradNorm() float64 {
	var s float64
	for _, t := range m.G.Tensors {
		d := t.Data
		var p [4]float64
		i := 0
		if useAVX {
			i = len(d) &^ 3
			if i > 0 {
				sumSquares4(&d[0], i, &p)
			}
		}
		for ; i+4 <= len(d); i += 4 {
			for j, v := range d[i : i+4] {
				p[j] += float64(float64(v) * float64(v))
			}
		}
		for ; i < len(d); i++ {
			p[0] += float64(float64(d[i]) * float64(d[i]))
		}
		s += (p[0] + p[1]) + (p[2] + p[3])
	}
	return math.Sqrt(s)
}

// ClipGradNorm scales m.G so its global norm is at most maxNorm (when
// maxNorm > 0) and returns the norm before clipping.
func (m *Model) ClipGradNorm(maxNorm float64) float64 {
	n := m.GradNorm()
	if maxNorm > 0 && n > maxNorm {
		s := float32(maxNorm / n)
		for _, t := range m.G.Tensors {
			for i := range t.Data {
				t.Data[i] *= s
			}
		}
	}
	return n
}

// stateTensors lists the moment estimates as tensors named m.<param> and
// v.<param>, the layout of optimizer.safetensors.
func (a *Adam) stateTensors() []*Tensor {
	var out []*Tensor
	for i, t := range a.mom.Tensors {
		out = append(out, &Tensor{Name: "m." + t.Name, Shape: t.Shape, Data: t.Data})
		out = append(out, &Tensor{Name: "v." + t.Name, Shape: t.Shape, Data: a.vel.Tensors[i].Data})
	}
	return out
}

// optimizerMeta records the step count and hyper-parameters.
func (a *Adam) meta() map[string]string {
	return map[string]string{"step": strconv.Itoa(a.step), "lr": fmtF(a.Cfg.LR), "beta1": fmtF(a.Cfg.Beta1),
		"beta2": fmtF(a.Cfg.Beta2), "eps": fmtF(a.Cfg.Eps)}
}

func fmtF(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// restoreAdam rebuilds an optimiser for m from optimizer.safetensors.
func restoreAdam(m *Model, tensors map[string]*Tensor, meta map[string]string) (*Adam, error) {
	var cfg AdamConfig
	var step int
	var err error
	parse := func(key string, dst *float64) {
		if err == nil {
			if *dst, err = strconv.ParseFloat(meta[key], 64); err != nil {
				err = fmt.Errorf("metadata %s: %w", key, err)
			}
		}
	}
	parse("lr", &cfg.LR)
	parse("beta1", &cfg.Beta1)
	parse("beta2", &cfg.Beta2)
	parse("eps", &cfg.Eps)
	if err == nil {
		if step, err = strconv.Atoi(meta["step"]); err != nil || step < 0 {
			err = fmt.Errorf("metadata step %q is not a step count", meta["step"])
		}
	}
	if err != nil {
		return nil, err
	}
	a := NewAdam(m, cfg)
	a.step = step
	for i, t := range a.mom.Tensors {
		for _, p := range []struct {
			name string
			dst  *Tensor
		}{{"m." + t.Name, t}, {"v." + t.Name, a.vel.Tensors[i]}} {
			g, ok := tensors[p.name]
			if !ok {
				return nil, fmt.Errorf("tensor %q missing", p.name)
			}
			if !slices.Equal(g.Shape, p.dst.Shape) {
				return nil, fmt.Errorf("tensor %q: shape %v, want %v", p.name, g.Shape, p.dst.Shape)
			}
			copy(p.dst.Data, g.Data)
		}
	}
	if len(tensors) != 2*len(a.mom.Tensors) {
		return nil, fmt.Errorf("%d tensors, want %d", len(tensors), 2*len(a.mom.Tensors))
	}
	return a, nil
}
