package moe

import (
	"fmt"
	"math"
	"sync"
)

// Precision is the arithmetic a forward pass rounds to at matmul
// boundaries. Accumulation is always float32.
type Precision int

const (
	// F32 keeps every value in float32: the training path's precision.
	F32 Precision = iota
	// BF16 rounds weights and every matmul input and output to bfloat16
	// (round to nearest even), as a bf16 serving engine does.
	BF16
)

func (p Precision) String() string {
	if p == BF16 {
		return "bf16"
	}
	return "f32"
}

// ParsePrecision reads "bf16" or "f32".
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "bf16":
		return BF16, nil
	case "f32":
		return F32, nil
	}
	return 0, fmt.Errorf("precision %q: want bf16 or f32", s)
}

// round rounds s in place to p (a no-op for F32).
func (p Precision) round(s []float32) {
	if p != BF16 {
		return
	}
	for i, x := range s {
		s[i] = bf16(x)
	}
}

// bf16 rounds x to the nearest bfloat16 (ties to even), kept as float32.
func bf16(x float32) float32 {
	b := math.Float32bits(x)
	if b&0x7f800000 == 0x7f800000 { // Inf and NaN pass through
		return x
	}
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}

// Workers is how many goroutines the training path splits work over. Work
// is split so that every output element is computed by one goroutine in a
// fixed order, so results do not depend on Workers.
var Workers = 2

// parallel runs f over [0,n) in up to Workers contiguous ranges.
func parallel(n int, f func(lo, hi int)) {
	w := Workers
	if w > n {
		w = n
	}
	if w <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := 0; i < w; i++ {
		lo, hi := i*n/w, (i+1)*n/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}

// rows runs f over [0,n), split over Workers when par is set (the
// trainer's many rows) and on the caller's goroutine otherwise (the
// sampler's one).
func rows(n int, par bool, f func(lo, hi int)) {
	if par {
		parallel(n, f)
	} else {
		f(0, n)
	}
}

// dot is the inner product of the value head and of the backward pass's
// gate and attention-weight gradients (matrix products go through gemm): four interleaved
// partial sums, then a fixed reduction.
func dot(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// expfs sets dst[i] = expf(src[i]) (dst may alias src).
func expfs(dst, src []float32) { expScaleShiftSum(dst, src, 1, 0) }

// expScaleShiftSum sets dst[i] = expf(src[i]·scale − shift), the product
// and the difference each rounded (dst may alias src), and returns their
// sum: eight partial sums (lane i mod 8, each in increasing i), reduced
// pairwise, so eight additions are in flight where one running sum would
// wait on each. Eight lanes at a time where the CPU has AVX2, with the
// same bits either way.
func expScaleShiftSum(dst, src []float32, scale, shift float32) float32 {
	src = src[:len(dst)]
	var s [8]float32
	i := 0
	if useAVX2 {
		i = len(dst) &^ 7
		if i > 0 {
			expf8(&dst[0], &src[0], i, scale, shift, &s)
		}
	}
	for ; i < len(dst); i++ {
		dst[i] = expf(float32(src[i]*scale) - shift)
		s[i&7] += dst[i]
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

// maxf is the largest element of x (NaN if any is). max is exact, so the
// order of comparisons does not change the result: eight lanes at a time
// where the CPU has AVX, falling back to the loop where the lanes saw a
// NaN or the maximum is a zero (VMAXPS orders neither as Go's max does).
func maxf(x []float32) float32 {
	if n := len(x) &^ 7; useAVX && n > 0 {
		if mx, ok := max8(&x[0], n); ok && mx != 0 {
			for _, v := range x[n:] {
				mx = max(mx, v)
			}
			return mx
		}
	}
	var m [8]float32
	for j := range m {
		m[j] = x[0]
	}
	i := 0
	for ; i+8 <= len(x); i += 8 {
		c := x[i : i+8]
		m[0] = max(m[0], c[0])
		m[1] = max(m[1], c[1])
		m[2] = max(m[2], c[2])
		m[3] = max(m[3], c[3])
		m[4] = max(m[4], c[4])
		m[5] = max(m[5], c[5])
		m[6] = max(m[6], c[6])
		m[7] = max(m[7], c[7])
	}
	for _, v := range x[i:] {
		m[0] = max(m[0], v)
	}
	return max(max(max(m[0], m[1]), max(m[2], m[3])), max(max(m[4], m[5]), max(m[6], m[7])))
}

// softmax writes the softmax of x into p (which may alias x); the
// denominator is expScaleShiftSum's.
func softmax(p, x []float32) {
	inv := 1 / expScaleShiftSum(p, x, 1, maxf(x))
	for i := range p {
		p[i] *= inv
	}
}

// softmaxTemp is softmax(x/temp); temp 1 is softmax.
func softmaxTemp(p, x []float32, temp float64) {
	if temp == 1 {
		softmax(p, x)
		return
	}
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(float64(v-mx) / temp)
		p[i] = float32(e)
		sum += e
	}
	inv := float32(1 / sum)
	for i := range p {
		p[i] *= inv
	}
}

// logSoftmaxAtTemp returns log softmax(logits/temp)[target] in float64,
// with the same arithmetic as the sampler's tempered draw, so that serving
// at float32 and training agree exactly; temp 1 is logSoftmaxAt.
func logSoftmaxAtTemp(logits []float32, target int, temp float64) float32 {
	if temp == 1 {
		return logSoftmaxAt(logits, target)
	}
	mx := logits[0]
	for _, v := range logits[1:] {
		mx = max(mx, v)
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v-mx) / temp)
	}
	return float32(float64(logits[target]-mx)/temp - math.Log(sum))
}

// logSoftmaxAt returns log softmax(logits)[target] in float64 (logSumExp).
func logSoftmaxAt(logits []float32, target int) float32 {
	lse := logSumExp(logits)
	return float32(float64(logits[target]) - lse)
}

// logSumExp is log Σ e^x in float64, the terms e^(x−max) by expf (eight
// lanes at a time) in chunks of a stack buffer, added in index order.
func logSumExp(x []float32) float64 {
	mx := maxf(x)
	var buf [256]float32
	var sum float64
	for i := 0; i < len(x); i += len(buf) {
		c := buf[:min(len(buf), len(x)-i)]
		expScaleShiftSum(c, x[i:i+len(c)], 1, mx)
		for _, e := range c {
			sum += float64(e)
		}
	}
	return float64(mx) + math.Log(sum)
}

// silus sets dst[i] = silu(x[i]) = x/(1 + e^−x) (dst must not alias x).
func silus(dst, x []float32) {
	x = x[:len(dst)]
	expScaleShiftSum(dst, x, -1, 0)
	for i, v := range x {
		dst[i] = v / (1 + dst[i])
	}
}

// sigmoids sets dst[i] = 1/(1 + e^−x[i]) (dst must not alias x).
func sigmoids(dst, x []float32) {
	x = x[:len(dst)]
	expScaleShiftSum(dst, x, -1, 0)
	for i := range dst {
		dst[i] = 1 / (1 + dst[i])
	}
}

// expf is e^x in float32 arithmetic (Cephes' expf: x = n·ln2 + r,
// |r| ≤ ln2/2, a degree-7 polynomial for e^r, then the exponent bits;
// within about 1 ulp, results below the smallest normal flush to 0). It
// is the exponential of softmax and silu: a few times cheaper than
// math.Exp, and, written in plain float32 operations with every product
// rounded (no fusion), the same bits on every machine.
func expf(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 88.72283:
		return float32(math.Inf(1))
	case x < -87.33654:
		return 0
	}
	t := float32(x * 1.442695)
	fn := float32(math.Floor(float64(t + 0.5)))
	n := int32(fn)
	r := x - float32(fn*0.693359375)
	r -= float32(fn * -2.12194440e-4)
	p := float32(1.9875691500e-4*r) + 1.3981999507e-3
	p = float32(p*r) + 8.3334519073e-3
	p = float32(p*r) + 4.1665795894e-2
	p = float32(p*r) + 1.6666665459e-1
	p = float32(p*r) + 5.0000001201e-1
	p = float32(float32(p*r)*r) + r + 1
	if n > 127 {
		return p * math.Float32frombits(254<<23) * 2 // 2^127·2: n = 128 has no exponent bits of its own
	}
	return p * math.Float32frombits(uint32(n+127)<<23)
}
