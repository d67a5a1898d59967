package moe

import (
	"fmt"
	"math"
)

// gemm is the one matrix product both paths use:
//
//	C[i,j] = (acc ? C[i,j] : 0) + Σ_{k<K} A[i·ars + k·acs] · B[k·ldb + j]
//
// for i < M, j < N, with C row-major (row stride ldc). Its numerical
// contract: every output element is summed in increasing k, one fused
// multiply-add at a time (the product and the sum rounded once, to
// float32). The order depends on neither M, N, the tiling nor the
// instruction set, so a one-row product (the sampler) gives the bits of
// the same row inside a many-row product (the trainer), and the AVX path
// (VFMADD231PS) and the portable one (fma32) agree bit for bit. Splitting
// K into consecutive calls with acc set gives the same bits as one call
// (the partial sums are stored and reloaded exactly).
func gemm(acc bool, M, N, K int, a []float32, ars, acs int, b []float32, ldb int, c []float32, ldc int) {
	if M <= 0 || N <= 0 {
		return
	}
	if K <= 0 {
		if !acc {
			for i := 0; i < M; i++ {
				clear(c[i*ldc : i*ldc+N])
			}
		}
		return
	}
	// Bounds once, so the kernels can run unchecked.
	if (M-1)*ars+(K-1)*acs >= len(a) || (K-1)*ldb+N > len(b) || (M-1)*ldc+N > len(c) || ars < 0 || acs < 0 || ldb < N || ldc < N {
		panic(fmt.Sprintf("moe: gemm %dx%dx%d out of bounds (len a %d, b %d, c %d)", M, N, K, len(a), len(b), len(c)))
	}
	if !useAVX {
		gemmGo(acc, M, N, K, a, ars, acs, b, ldb, c, ldc)
		return
	}
	// K in blocks so that a B panel of kc×16 stays in L1; the partial
	// sums go through C, which does not change any bit.
	const kc = 256
	for k0 := 0; k0 < K; k0 += kc {
		kb := min(kc, K-k0)
		gemmAVX(acc || k0 > 0, M, N, kb, a[k0*acs:], ars, acs, b[k0*ldb:], ldb, c, ldc)
	}
}

// laneMasks[r] keeps the first r of eight lanes (r = 1…7 in use).
var laneMasks = func() (m [8][8]int32) {
	for r := range m {
		for i := 0; i < r; i++ {
			m[r][i] = -1
		}
	}
	return m
}()

// gemmAVX tiles C for the assembly kernels: 6×16 blocks, their 8- and
// masked 1…7-column edges four rows and one row at a time, then the
// remaining rows as 4×16 and single rows (1×64, 1×16, …, so that a
// one-row product has independent sums in flight).
func gemmAVX(acc bool, M, N, K int, a []float32, ars, acs int, b []float32, ldb int, c []float32, ldc int) {
	n16 := N &^ 15
	n8 := N &^ 7
	mask := &laneMasks[N-n8][0]
	edge4 := func(ai, ci []float32) {
		if n16 < n8 {
			kern4x8(K, &ai[0], ars, acs, &b[n16], ldb, &ci[n16], ldc, acc)
		}
		if n8 < N {
			kern4x8m(K, &ai[0], ars, acs, &b[n8], ldb, &ci[n8], ldc, acc, mask)
		}
	}
	row := func(ai, ci []float32, j int) {
		for ; j+64 <= n16; j += 64 {
			kern1x64(K, &ai[0], acs, &b[j], ldb, &ci[j], acc)
		}
		for ; j < n16; j += 16 {
			kern1x16(K, &ai[0], acs, &b[j], ldb, &ci[j], acc)
		}
		if n16 < n8 {
			kern1x8(K, &ai[0], acs, &b[n16], ldb, &ci[n16], acc)
		}
		if n8 < N {
			kern1x8m(K, &ai[0], acs, &b[n8], ldb, &ci[n8], acc, mask)
		}
	}
	i := 0
	for ; i+6 <= M; i += 6 {
		ai, ci := a[i*ars:], c[i*ldc:]
		for j := 0; j < n16; j += 16 {
			kern6x16(K, &ai[0], ars, acs, &b[j], ldb, &ci[j], ldc, acc)
		}
		if n16 < N {
			edge4(ai, ci)
			row(a[(i+4)*ars:], c[(i+4)*ldc:], n16)
			row(a[(i+5)*ars:], c[(i+5)*ldc:], n16)
		}
	}
	for ; i+4 <= M; i += 4 {
		ai, ci := a[i*ars:], c[i*ldc:]
		for j := 0; j < n16; j += 16 {
			kern4x16(K, &ai[0], ars, acs, &b[j], ldb, &ci[j], ldc, acc)
		}
		edge4(ai, ci)
	}
	for ; i < M; i++ {
		row(a[i*ars:], c[i*ldc:], 0)
	}
}

// gemmGo is the portable gemm: the same sums in the same order.
func gemmGo(acc bool, M, N, K int, a []float32, ars, acs int, b []float32, ldb int, c []float32, ldc int) {
	for i := 0; i < M; i++ {
		ci := c[i*ldc : i*ldc+N]
		if !acc {
			clear(ci)
		}
		for k := 0; k < K; k++ {
			av := a[i*ars+k*acs]
			bk := b[k*ldb : k*ldb+N]
			for j, bv := range bk {
				ci[j] = fma32(av, bv, ci[j])
			}
		}
	}
}

// fma32 is x·y + z rounded once to float32, the bits of the hardware's
// single-precision FMA. The product is exact in float64 (24+24 bits); the
// sum is rounded to float64 with round-to-odd (the error of the sum, from
// TwoSum, decides the last bit), so rounding that to float32 is rounding
// the exact x·y + z: rounding to float64 with round-to-nearest instead
// would round twice, wrongly at the float32 halfway points.
func fma32(x, y, z float32) float32 {
	p, c := float64(x)*float64(y), float64(z)
	s := p + c
	if s-s != 0 { // Inf or NaN
		return float32(s)
	}
	d := s - p
	if e := (p - (s - d)) + (c - d); e != 0 {
		if b := math.Float64bits(s); b&1 == 0 {
			if (e > 0) == (s > 0) {
				b++
			} else {
				b--
			}
			s = math.Float64frombits(b)
		}
	}
	return float32(s)
}

// gemmPar is gemm with the rows of C split over Workers goroutines (in
// multiples of 4, the kernel height); each element is still computed by
// one goroutine in the same order.
func gemmPar(acc bool, M, N, K int, a []float32, ars, acs int, b []float32, ldb int, c []float32, ldc int) {
	if Workers <= 1 || M*N*K < 1<<16 || M < 8 {
		gemm(acc, M, N, K, a, ars, acs, b, ldb, c, ldc)
		return
	}
	tiles := (M + 3) / 4
	parallel(tiles, func(lo, hi int) {
		r0, r1 := lo*4, min(hi*4, M)
		gemm(acc, r1-r0, N, K, a[r0*ars:], ars, acs, b, ldb, c[r0*ldc:], ldc)
	})
}

// axpyAt adds a·x to y with gemm's arithmetic (one fused multiply-add
// per element), so a sum continued this way matches one gemm over more k.
func axpyAt(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	if useAVX {
		if len(y) > 0 {
			axpyFMA(&y[0], a, &x[0], len(y))
		}
		return
	}
	for i := range y {
		y[i] = fma32(a, x[i], y[i])
	}
}

// transpose writes the [cols, rows] transpose of the row-major [rows,
// cols] src into dst, in 8×8 blocks.
func transpose(dst, src []float32, rows, cols int) {
	const bs = 8
	_ = src[rows*cols-1]
	_ = dst[rows*cols-1]
	for r0 := 0; r0 < rows; r0 += bs {
		r1 := min(r0+bs, rows)
		for c0 := 0; c0 < cols; c0 += bs {
			c1 := min(c0+bs, cols)
			for r := r0; r < r1; r++ {
				for c := c0; c < c1; c++ {
					dst[c*rows+r] = src[r*cols+c]
				}
			}
		}
	}
}

// linear sets out[T,O] = in[T,I] · wT[I,O] (wT is the transposed [O,I]
// weight), rows split over Workers.
func linear(out, in, wT []float32, T, O, I int) {
	gemmPar(false, T, O, I, in, I, 1, wT, O, out, O)
}

// linearBackward is the backward of out = in · Wᵀ over T rows for the
// [O,I] weight W: dIn += dOut · W (skipped when dIn is nil) and
// dW += dOutᵀ · in.
func linearBackward(dIn, dW, dOut, in, W []float32, T, O, I int) {
	if dIn != nil {
		gemmPar(true, T, I, O, dOut, O, 1, W, I, dIn, I)
	}
	gemmPar(true, O, I, T, dOut, 1, O, in, I, dW, I)
}
