package moe

import "math"

// rmsNorm sets y = g ⊙ x / sqrt(mean(x²) + ε) and returns the inverse
// root-mean-square r that the backward pass needs. As in transformers,
// the mean, the ε and the inverse root are float32 values, and x is
// scaled by r before the gain multiplies it. The sum of squares runs in
// four interleaved partial sums (independent additions in flight),
// reduced in a fixed order.
func rmsNorm(y, x, g []float32, eps float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		c := x[i : i+4 : i+4]
		s0 += c[0] * c[0]
		s1 += c[1] * c[1]
		s2 += c[2] * c[2]
		s3 += c[3] * c[3]
	}
	for _, v := range x[i:] {
		s0 += v * v
	}
	ss := (s0 + s1) + (s2 + s3)
	r := float32(1 / math.Sqrt(float64(ss/float32(len(x))+eps)))
	y, g = y[:len(x)], g[:len(x)]
	for i, v := range x {
		y[i] = v * r * g[i]
	}
	return r
}

// rmsNormBackward adds to dx the gradient through y = g⊙x·r:
// dx_i += r·g_i·dy_i − x_i·r³/D·Σ_j dy_j g_j x_j, the sum in rmsNorm's
// four partial sums. Gain gradients are accumulated separately
// (rmsNormGainGrad) so rows can run in parallel.
func rmsNormBackward(dx, dy, x, g []float32, r float32) {
	n := len(x)
	dx, dy, g = dx[:n], dy[:n], g[:n]
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= n; j += 4 {
		s0 += dy[j] * g[j] * x[j]
		s1 += dy[j+1] * g[j+1] * x[j+1]
		s2 += dy[j+2] * g[j+2] * x[j+2]
		s3 += dy[j+3] * g[j+3] * x[j+3]
	}
	for ; j < n; j++ {
		s0 += dy[j] * g[j] * x[j]
	}
	s := (s0 + s1) + (s2 + s3)
	c := r * r * r / float32(n) * s
	for i := range x {
		dx[i] += r*g[i]*dy[i] - x[i]*c
	}
}

// rmsNormGainGrad adds Σ_t dy_t ⊙ x_t·r_t to dg over T rows.
func rmsNormGainGrad(dg, dy, x, r []float32) {
	D := len(dg)
	for t, rt := range r {
		dyt, xt := dy[t*D:(t+1)*D], x[t*D:(t+1)*D]
		for i := range dg {
			dg[i] += dyt[i] * xt[i] * rt
		}
	}
}
