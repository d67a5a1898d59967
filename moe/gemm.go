package moe

import (
	"fmt"
	"math"
	"sync"
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
	// K in blocks of packK so that a B strip of packK×16 stays in L1; the partial
	// sums go through C, which does not change any bit.
	for k0 := 0; k0 < K; k0 += packK {
		kb := min(packK, K-k0)
		ak, bk, acck := a[k0*acs:], b[k0*ldb:], acc || k0 > 0
		m6 := 0
		if M >= packMinRows && N >= 16 && (N%16 != 0 || aliasedA(acs, N)) {
			m6 = M - M%6
			gemmPacked(acck, m6, N, kb, ak, ars, acs, bk, ldb, c, ldc)
		}
		if m6 < M {
			gemmAVX(acck, M-m6, N, kb, ak[m6*ars:], ars, acs, bk, ldb, c[m6*ldc:], ldc)
		}
	}
}

// Packing: B in blocks of packK rows × packN columns, copied into
// contiguous 16-column strips (zero-padded past N) that the 6×16 kernel
// streams for every 6-row block, and A six rows at a time where its
// stride defeats L1 (aliasedA). It pays where gemmAVX's tiles lose most:
// N not a multiple of 16 (the edge kernels run a few columns at a
// fraction of the rate, and rows straddle lines) and an aliased A, in
// products of at least packMinRows rows (fewer pay more for the copy than
// they gain).
const (
	packK       = 256
	packN       = 256
	packMinRows = 192
)

// aliasedA reports whether A's column stride (a transposed operand's row
// stride) is a multiple of 1 KiB, so that the lines of successive k fall
// in a few L1 sets and evict each other before the next strip reads
// them, in a product wide enough (eight strips) to repay copying its six
// rows out once per block.
func aliasedA(acs, N int) bool { return acs%256 == 0 && N >= 128 }

type packBuf struct{ a, b []float32 }

var packPool = sync.Pool{New: func() any {
	return &packBuf{a: make([]float32, 6*packK), b: make([]float32, packK*packN)}
}}

// gemmPacked is gemm's AVX path for M a multiple of 6 and K ≤ packK. Each
// element gets the same fused multiply-adds in the same order as in
// gemmAVX: packing moves operands, not arithmetic, and the last strip's
// padded columns are computed into a scratch tile and dropped.
func gemmPacked(acc bool, M, N, K int, a []float32, ars, acs int, b []float32, ldb int, c []float32, ldc int) {
	buf := packPool.Get().(*packBuf)
	defer packPool.Put(buf)
	for j0 := 0; j0 < N; j0 += packN {
		nb := min(packN, N-j0)
		strips := (nb + 15) / 16
		bp := buf.b[:strips*16*K]
		for s := range strips {
			w := min(16, nb-16*s)
			for k := 0; k < K; k++ {
				row := bp[(s*K+k)*16 : (s*K+k+1)*16]
				src := b[k*ldb+j0+16*s:]
				if w == 16 {
					*(*[16]float32)(row) = *(*[16]float32)(src)
					continue
				}
				copy(row, src[:w])
				clear(row[w:])
			}
		}
		for i := 0; i < M; i += 6 {
			ai, aRow, aCol := a[i*ars:], ars, acs
			if aliasedA(acs, N) {
				ap := buf.a[:6*K]
				for k := 0; k < K; k++ {
					d := ap[k*6 : k*6+6 : k*6+6]
					if ars == 1 {
						s := ai[k*acs : k*acs+6 : k*acs+6]
						d[0], d[1], d[2], d[3], d[4], d[5] = s[0], s[1], s[2], s[3], s[4], s[5]
						continue
					}
					for r := range d {
						d[r] = ai[r*ars+k*acs]
					}
				}
				ai, aRow, aCol = ap, 1, 6
			}
			ci := c[i*ldc+j0:]
			for s := range strips {
				w := min(16, nb-16*s)
				if w == 16 {
					kern6x16(K, &ai[0], aRow, aCol, &bp[s*K*16], 16, &ci[16*s], ldc, acc)
					continue
				}
				var t [6 * 16]float32
				if acc {
					for r := 0; r < 6; r++ {
						copy(t[r*16:r*16+w], ci[r*ldc+16*s:])
					}
				}
				kern6x16(K, &ai[0], aRow, aCol, &bp[s*K*16], 16, &t[0], 16, acc)
				for r := 0; r < 6; r++ {
					copy(ci[r*ldc+16*s:r*ldc+16*s+w], t[r*16:])
				}
			}
		}
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
