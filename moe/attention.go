package moe

import "math"

// ropeTable holds cos/sin of pos·θ^(−2i/hd) for every position and pair,
// computed as transformers (and the engines) compute them: the inverse
// frequencies and each angle are float32 values, so positions far into a
// long context get the angles the reference gets, not better ones.
type ropeTable struct {
	half     int // pairs per head: dimension i rotates with i+half
	cos, sin []float32
}

func newRope(cfg Config) ropeTable {
	hd := cfg.HeadDim
	half := hd / 2
	t := ropeTable{half: half, cos: make([]float32, cfg.Context*half), sin: make([]float32, cfg.Context*half)}
	inv := make([]float32, half)
	for i := range inv {
		e := float32(2*i) / float32(hd)
		inv[i] = 1 / float32(math.Pow(cfg.RopeTheta, float64(e)))
	}
	for p := 0; p < cfg.Context; p++ {
		for i, f := range inv {
			a := float64(float32(p) * f)
			t.cos[p*half+i] = float32(math.Cos(a))
			t.sin[p*half+i] = float32(math.Sin(a))
		}
	}
	return t
}

// apply rotates the halves of each head of v (all heads, a multiple of
// the head size): (v_i, v_{i+half}) by the angle of pair i at position
// pos, as transformers' rotate_half does; sign −1 applies the inverse
// rotation (the backward pass, since the rotation is orthogonal).
func (r ropeTable) apply(v []float32, pos int, sign float32) {
	cs := r.cos[pos*r.half : (pos+1)*r.half]
	sn := r.sin[pos*r.half : (pos+1)*r.half]
	for h := 0; h < len(v); h += 2 * r.half {
		x1, x2 := v[h:h+r.half], v[h+r.half:h+2*r.half]
		for i := range x1 {
			a, b := x1[i], x2[i]
			c, s := cs[i], sign*sn[i]
			x1[i] = float32(a*c) - float32(b*s)
			x2[i] = float32(b*c) + float32(a*s)
		}
	}
}

// headNorm is the per-head RMSNorm of queries and keys (q_norm, k_norm):
// each head of pre ([heads·hd]) is normalised with gain g into out, its
// inverse root-mean-square stored in rms[h].
func headNorm(out, pre, g, rms []float32, eps float32) {
	hd := len(g)
	for h := range rms {
		rms[h] = rmsNorm(out[h*hd:(h+1)*hd], pre[h*hd:(h+1)*hd], g, eps)
	}
}

// attnBlock is the query-row block of the trainer's attention: scores
// and weights are computed for rows [t0, t0+attnBlock) at once. Two
// heights of gemm's 6-row kernel, so no row falls to its one-row edge.
const attnBlock = 12

// attnWeights turns one query's raw scores q·k_j (j ≤ pos) into its
// attention weights, in place: scaled, then softmax. Both paths call it.
// Rounding is monotonic, so the largest scaled score is the largest score
// scaled, and the scaling happens inside the exponential's pass.
func attnWeights(s []float32, scale float32) {
	inv := 1 / expScaleShiftSum(s, s, scale, float32(maxf(s)*scale))
	for j := range s {
		s[j] *= inv
	}
}

// attendCausal is the trainer's causal grouped-query attention over T
// rows: out_t,h = Σ_{j≤t} P_h[t,j] v_j,g(h) with P_h[t,:] =
// attnWeights(q_t,h·k_j,g(h)), where query head h reads key/value head
// g(h) = h / (Heads/KVHeads). Q and out are [T, Heads·hd], K and V
// [T, KVHeads·hd]. It keeps P ([heads, T, T], zero above the diagonal)
// for the backward pass. Per element it does the sampler's arithmetic
// (attendOne): the scores are gemm sums over the head dimension, and each
// output sums over j in increasing order (a gemm over the block's common
// prefix, continued with axpyAt), so the F32 sampler reproduces it bit for
// bit.
func attendCausal(out, Q, K, V, P []float32, T int, cfg Config) {
	hd, H, KV := cfg.HeadDim, cfg.Heads, cfg.KVHeads
	dq, dkv := H*hd, KV*hd
	scale := float32(1 / math.Sqrt(float64(hd)))
	parallel(H, func(h0, h1 int) {
		kt := make([]float32, hd*T)
		kg := -1
		for h := h0; h < h1; h++ {
			g := h / (H / KV)
			lo, klo := h*hd, g*hd
			if g != kg { // the group's keys, transposed once for its query heads
				for t := 0; t < T; t++ {
					for d, v := range K[t*dkv+klo : t*dkv+klo+hd] {
						kt[d*T+t] = v
					}
				}
				kg = g
			}
			ph := P[h*T*T : (h+1)*T*T]
			for t0 := 0; t0 < T; t0 += attnBlock {
				t1 := min(t0+attnBlock, T)
				gemm(false, t1-t0, t1, hd, Q[t0*dq+lo:], dq, 1, kt, T, ph[t0*T:], T)
				for t := t0; t < t1; t++ {
					attnWeights(ph[t*T:t*T+t+1], scale)
					clear(ph[t*T+t+1 : t*T+t1])
				}
				gemm(false, t1-t0, hd, t0+1, ph[t0*T:], T, 1, V[klo:], dkv, out[t0*dq+lo:], dq)
				for t := t0 + 1; t < t1; t++ {
					o := out[t*dq+lo : t*dq+lo+hd]
					for j := t0 + 1; j <= t; j++ {
						axpyAt(o, ph[t*T+j], V[j*dkv+klo:j*dkv+klo+hd])
					}
				}
			}
		}
	})
}

// attendOne is the sampler's attention for one query q ([Heads·hd]) at
// position pos over its cache: Kt holds the keys transposed ([KVHeads·hd,
// capacity], row d the d-th key component of every position), V the
// values as rows [capacity, KVHeads·hd]; s is scratch of length ≥ pos+1.
func attendOne(out, q, Kt, V []float32, pos, capacity int, cfg Config, s []float32) {
	hd, H, KV := cfg.HeadDim, cfg.Heads, cfg.KVHeads
	dkv := KV * hd
	scale := float32(1 / math.Sqrt(float64(hd)))
	n := pos + 1
	s = s[:n]
	for h := 0; h < H; h++ {
		lo, klo := h*hd, (h/(H/KV))*hd
		gemm(false, 1, n, hd, q[lo:], hd, 1, Kt[klo*capacity:], capacity, s, n)
		attnWeights(s, scale)
		gemm(false, 1, hd, n, s, n, 1, V[klo:], dkv, out[lo:], hd)
	}
}

// attentionBackward sets dQ ([T, Heads·hd]) and adds to dK, dV ([T,
// KVHeads·hd], zero on entry; all post-RoPE) the gradient of
// attendCausal whose output gradient is dA, from the kept weights P. Key
// heads run in parallel, each owning its columns and walking its query
// heads in order, so the sums of a group do not depend on Workers; the
// products skip the all-zero blocks above the diagonal.
func attentionBackward(dQ, dK, dV, dA, Q, K, V, P []float32, T int, cfg Config, sc *scratch) {
	hd, H, KV := cfg.HeadDim, cfg.Heads, cfg.KVHeads
	dq, dkv, group := H*hd, KV*hd, H/KV
	scale := float32(1 / math.Sqrt(float64(hd)))
	parallel(KV, func(g0, g1 int) {
		vt, vh, dS := sc.takeDirty(hd*T), sc.takeDirty(T*hd), sc.takeDirty(T*T) // dS cleared per head
		for g := g0; g < g1; g++ {
			klo := g * hd
			for t := 0; t < T; t++ {
				copy(vh[t*hd:(t+1)*hd], V[t*dkv+klo:t*dkv+klo+hd])
			}
			transpose(vt, vh, T, hd)
			for h := g * group; h < (g+1)*group; h++ {
				lo := h * hd
				ph := P[h*T*T : (h+1)*T*T]
				clear(dS)
				for b0 := 0; b0 < T; b0 += attnBlock {
					b1 := min(b0+attnBlock, T)
					// dV_j += Σ_{t≥j} P[t,j] dA_t.
					gemm(true, b1-b0, hd, T-b0, ph[b0*T+b0:], 1, T, dA[b0*dq+lo:], dq, dV[b0*dkv+klo:], dkv)
					// dP[t,j] = dA_t·v_j, then dS = P ⊙ (dP − Σ_j P dP) · scale.
					gemm(false, b1-b0, b1, hd, dA[b0*dq+lo:], dq, 1, vt, T, dS[b0*T:], T)
					for t := b0; t < b1; t++ {
						p, d := ph[t*T:t*T+t+1], dS[t*T:t*T+t+1]
						sum := dot(p, d)
						for j := range p {
							d[j] = p[j] * (d[j] - sum) * scale
						}
						clear(dS[t*T+t+1 : t*T+b1])
					}
				}
				for b0 := 0; b0 < T; b0 += attnBlock {
					b1 := min(b0+attnBlock, T)
					// dQ_t = Σ_{j≤t} dS[t,j] k_j; dK_j += Σ_{t≥j} dS[t,j] q_t.
					gemm(false, b1-b0, hd, b1, dS[b0*T:], T, 1, K[klo:], dkv, dQ[b0*dq+lo:], dq)
					gemm(true, b1-b0, hd, T-b0, dS[b0*T+b0:], 1, T, Q[b0*dq+lo:], dq, dK[b0*dkv+klo:], dkv)
				}
			}
		}
	})
}
