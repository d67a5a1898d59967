package moe

import "math"

// rmsNorm sets y = g ⊙ x / sqrt(mean(x²) + ε) and returns the inverse
// root-mean-square r that the backward pass needs. As in transformers,
// the mean, the ε and the inverse root are float32 values, and x is
// scaled by r before the gain multiplies it.
func rmsNorm(y, x, g []float32, eps float32) float32 {
	var ss float32
	for _, v := range x {
		ss += v * v
	}
	r := float32(1 / math.Sqrt(float64(ss/float32(len(x))+eps)))
	for i, v := range x {
		y[i] = v * r * g[i]
	}
	return r
}

// rmsNormBackward adds to dx the gradient through y = g⊙x·r:
// dx_i += r·g_i·dy_i − x_i·r³/D·Σ_j dy_j g_j x_j. Gain gradients are
// accumulated separately (rmsNormGainGrad) so rows can run in parallel.
func rmsNormBackward(dx, dy, x, g []float32, r float32) {
	var s float32
	for j := range x {
		s += dy[j] * g[j] * x[j]
	}
	c := r * r * r / float32(len(x)) * s
	for i := range x {
		dx[i] += r*g[i]*dy[i] - x[i]*c
	}
}

// rmsNormGainGrad adds Σ_t dy_t ⊙ x_t·r_t to dg over T rows.
func rmsNormGainGrad(dg, dy, x, r []float32) {
	D := len(dg)
	for t := range r {
		for i := 0; i < D; i++ {
			dg[i] += dy[t*D+i] * x[t*D+i] * r[t]
		}
	}
}
