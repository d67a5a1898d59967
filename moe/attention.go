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

// attnBlock is the query-row block of the trainer's attention: scores
// and weights are computed for rows [t0, t0+attnBlock) at once.
const attnBlock = 8

// attnWeights turns one query's raw scores q·k_j (j ≤ pos) into its
// attention weights, in place: scaled, then softmax. Both paths call it.
func attnWeights(s []float32, scale float32) {
	for j := range s {
		s[j] *= scale
	}
	softmax(s, s)
}

// attendCausal is the trainer's causal multi-head attention over T rows:
// out_t,h = Σ_{j≤t} P_h[t,j] v_j,h with P_h[t,:] = attnWeights(q_t,h·k_j,h).
// It keeps P ([heads, T, T], zero above the diagonal) for the backward
// pass. Per element it does the sampler's arithmetic (attendOne): the
// scores are gemm sums over the head dimension, and each output sums over
// j in increasing order (a gemm over the block's common prefix, continued
// with axpyAt), so the F32 sampler reproduces it bit for bit.
func attendCausal(out, Q, K, V, P []float32, T, D, heads int) {
	hd := D / heads
	scale := float32(1 / math.Sqrt(float64(hd)))
	parallel(heads, func(h0, h1 int) {
		kt := make([]float32, hd*T)
		kh := make([]float32, T*hd)
		for h := h0; h < h1; h++ {
			lo := h * hd
			for t := 0; t < T; t++ {
				copy(kh[t*hd:(t+1)*hd], K[t*D+lo:t*D+lo+hd])
			}
			transpose(kt, kh, T, hd)
			ph := P[h*T*T : (h+1)*T*T]
			for t0 := 0; t0 < T; t0 += attnBlock {
				t1 := min(t0+attnBlock, T)
				gemm(false, t1-t0, t1, hd, Q[t0*D+lo:], D, 1, kt, T, ph[t0*T:], T)
				for t := t0; t < t1; t++ {
					attnWeights(ph[t*T:t*T+t+1], scale)
					clear(ph[t*T+t+1 : t*T+t1])
				}
				gemm(false, t1-t0, hd, t0+1, ph[t0*T:], T, 1, V[lo:], D, out[t0*D+lo:], D)
				for t := t0 + 1; t < t1; t++ {
					o := out[t*D+lo : t*D+lo+hd]
					for j := t0 + 1; j <= t; j++ {
						axpyAt(o, ph[t*T+j], V[j*D+lo:j*D+lo+hd])
					}
				}
			}
		}
	})
}

// attendOne is the sampler's attention for one query at position pos over
// its cache: Kt holds the keys transposed ([D, capacity], row d the d-th
// key component of every position), V the values as rows [capacity, D];
// s is scratch of length ≥ pos+1.
func attendOne(out, q, Kt, V []float32, pos, capacity, heads int, s []float32) {
	D := len(q)
	hd := D / heads
	scale := float32(1 / math.Sqrt(float64(hd)))
	n := pos + 1
	s = s[:n]
	for h := 0; h < heads; h++ {
		lo := h * hd
		gemm(false, 1, n, hd, q[lo:], hd, 1, Kt[lo*capacity:], capacity, s, n)
		attnWeights(s, scale)
		gemm(false, 1, hd, n, s, n, 1, V[lo:], D, out[lo:], hd)
	}
}

// attentionBackward sets dQ, dK, dV (all [T, D], post-RoPE) to the
// gradient of attendCausal whose output gradient is dA, from the kept
// weights P. Heads run in parallel, each owning its columns; the products
// skip the all-zero blocks above the diagonal.
func attentionBackward(dQ, dK, dV, dA, Q, K, V, P []float32, T, D, heads int) {
	hd := D / heads
	scale := float32(1 / math.Sqrt(float64(hd)))
	parallel(heads, func(h0, h1 int) {
		vt := make([]float32, hd*T)
		vh := make([]float32, T*hd)
		dS := make([]float32, T*T)
		for h := h0; h < h1; h++ {
			lo := h * hd
			ph := P[h*T*T : (h+1)*T*T]
			for t := 0; t < T; t++ {
				copy(vh[t*hd:(t+1)*hd], V[t*D+lo:t*D+lo+hd])
			}
			transpose(vt, vh, T, hd)
			clear(dS)
			for b0 := 0; b0 < T; b0 += attnBlock {
				b1 := min(b0+attnBlock, T)
				// dV_j = Σ_{t≥j} P[t,j] dA_t.
				gemm(false, b1-b0, hd, T-b0, ph[b0*T+b0:], 1, T, dA[b0*D+lo:], D, dV[b0*D+lo:], D)
				// dP[t,j] = dA_t·v_j, then dS = P ⊙ (dP − Σ_j P dP) · scale.
				gemm(false, b1-b0, b1, hd, dA[b0*D+lo:], D, 1, vt, T, dS[b0*T:], T)
				for t := b0; t < b1; t++ {
					p, d := ph[t*T:t*T+t+1], dS[t*T:t*T+t+1]
					var sum float32
					for j := range p {
						sum += p[j] * d[j]
					}
					for j := range p {
						d[j] = p[j] * (d[j] - sum) * scale
					}
					clear(dS[t*T+t+1 : t*T+b1])
				}
			}
			for b0 := 0; b0 < T; b0 += attnBlock {
				b1 := min(b0+attnBlock, T)
				// dQ_t = Σ_{j≤t} dS[t,j] k_j; dK_j = Σ_{t≥j} dS[t,j] q_t.
				gemm(false, b1-b0, hd, b1, dS[b0*T:], T, 1, K[lo:], D, dQ[b0*D+lo:], D)
				gemm(false, b1-b0, hd, T-b0, dS[b0*T+b0:], 1, T, Q[b0*D+lo:], D, dK[b0*D+lo:], D)
			}
		}
	})
}
