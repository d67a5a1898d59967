package moe

import "math"

// AdamConfig is Adam with a constant learning rate (no schedule, no weight
// decay), as the recipe prescribes.
type AdamConfig struct {
	LR    float64 `json:"lr"`
	Beta1 float64 `json:"beta1"`
	Beta2 float64 `json:"beta2"`
	Eps   float64 `json:"eps"`
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
	return &Adam{Cfg: cfg, m: m, mom: newWeights(m.Cfg), vel: newWeights(m.Cfg)}
}

// Steps is the number of updates applied.
func (a *Adam) Steps() int { return a.step }

// Step applies one bias-corrected Adam update from m.G to m.W. It does not
// clear the gradients.
func (a *Adam) Step() {
	a.step++
	c := a.Cfg
	bc1 := 1 - math.Pow(c.Beta1, float64(a.step))
	bc2 := 1 - math.Pow(c.Beta2, float64(a.step))
	for i, t := range a.m.W.Tensors {
		g, mo, ve := a.m.G.Tensors[i].Data, a.mom.Tensors[i].Data, a.vel.Tensors[i].Data
		for j := range t.Data {
			gj := float64(g[j])
			mj := c.Beta1*float64(mo[j]) + (1-c.Beta1)*gj
			vj := c.Beta2*float64(ve[j]) + (1-c.Beta2)*gj*gj
			mo[j], ve[j] = float32(mj), float32(vj)
			t.Data[j] -= float32(c.LR * (mj / bc1) / (math.Sqrt(vj/bc2) + c.Eps))
		}
	}
}

// GradNorm is the global L2 norm of m.G, summed in float64.
func (m *Model) GradNorm() float64 {
	var s float64
	for _, t := range m.G.Tensors {
		for _, v := range t.Data {
			s += float64(v) * float64(v)
		}
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
