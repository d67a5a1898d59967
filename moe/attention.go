package moe

import "math"

// ropeTable holds cos/sin of pos·θ^(−2i/hd) for every position and pair.
type ropeTable struct {
	half     int // pairs per head
	cos, sin []float32
}

func newRope(cfg Config) ropeTable {
	hd := cfg.headDim()
	half := hd / 2
	t := ropeTable{half: half, cos: make([]float32, cfg.Context*half), sin: make([]float32, cfg.Context*half)}
	for p := 0; p < cfg.Context; p++ {
		for i := 0; i < half; i++ {
			a := float64(p) * math.Pow(cfg.ropeTheta(), -2*float64(i)/float64(hd))
			t.cos[p*half+i] = float32(math.Cos(a))
			t.sin[p*half+i] = float32(math.Sin(a))
		}
	}
	return t
}

// apply rotates each head's pairs (2i, 2i+1) of v (all heads, [D]) by the
// angle of position pos; sign −1 applies the inverse rotation (the
// backward pass, since the rotation is orthogonal).
func (r ropeTable) apply(v []float32, pos int, sign float32) {
	cs := r.cos[pos*r.half : (pos+1)*r.half]
	sn := r.sin[pos*r.half : (pos+1)*r.half]
	for h := 0; h < len(v); h += 2 * r.half {
		for i := 0; i < r.half; i++ {
			a, b := v[h+2*i], v[h+2*i+1]
			c, s := cs[i], sign*sn[i]
			v[h+2*i] = a*c - b*s
			v[h+2*i+1] = a*s + b*c
		}
	}
}

// attendRow computes causal multi-head attention for one query at position
// pos: out_h = Σ_{j≤pos} softmax_j(q_h·k_{j,h}/√hd) v_{j,h}. K and V hold
// rows [0, pos] of width D (a KV cache or the training pass's K and V);
// scores is scratch of length ≥ pos+1. Both paths call this, so the
// sampler with F32 reproduces the trainer exactly.
func attendRow(out, q, K, V []float32, pos, heads int, scores []float32) {
	D := len(q)
	hd := D / heads
	scale := float32(1 / math.Sqrt(float64(hd)))
	n := pos + 1
	s := scores[:n]
	for h := 0; h < heads; h++ {
		lo, hi := h*hd, (h+1)*hd
		qh := q[lo:hi]
		for j := 0; j < n; j++ {
			s[j] = dot(qh, K[j*D+lo:j*D+hi]) * scale
		}
		softmax(s, s)
		oh := out[lo:hi]
		clear(oh)
		for j := 0; j < n; j++ {
			axpy(oh, s[j], V[j*D+lo:j*D+hi])
		}
	}
}

// attentionBackward adds to dQ, dK, dV (all [T, D], post-RoPE) the
// gradient of the causal attention whose output gradient is dA. It
// recomputes the attention weights rather than storing T² of them; heads
// run in parallel, each owning its columns.
func attentionBackward(dQ, dK, dV, dA, Q, K, V []float32, T, D, heads int) {
	hd := D / heads
	scale := float32(1 / math.Sqrt(float64(hd)))
	parallel(heads, func(h0, h1 int) {
		p := make([]float32, T)
		dp := make([]float32, T)
		for h := h0; h < h1; h++ {
			lo, hi := h*hd, (h+1)*hd
			for t := 0; t < T; t++ {
				n := t + 1
				qh := Q[t*D+lo : t*D+hi]
				for j := 0; j < n; j++ {
					p[j] = dot(qh, K[j*D+lo:j*D+hi]) * scale
				}
				softmax(p[:n], p[:n])
				da := dA[t*D+lo : t*D+hi]
				var sum float32
				for j := 0; j < n; j++ {
					dp[j] = dot(da, V[j*D+lo:j*D+hi])
					sum += p[j] * dp[j]
					axpy(dV[j*D+lo:j*D+hi], p[j], da)
				}
				dq := dQ[t*D+lo : t*D+hi]
				for j := 0; j < n; j++ {
					ds := p[j] * (dp[j] - sum) * scale
					if ds == 0 {
						continue
					}
					axpy(dq, ds, K[j*D+lo:j*D+hi])
					axpy(dK[j*D+lo:j*D+hi], ds, qh)
				}
			}
		}
	})
}
