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

// dot is the one inner product both paths use; its summation order (four
// interleaved partial sums, then a fixed reduction) is part of the
// numerical contract between the sampler and the trainer.
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

// matvec sets out[r] = W[r,:]·x for a [rows, len(x)] matrix W.
func matvec(out, W, x []float32) {
	cols := len(x)
	for r := range out {
		out[r] = dot(W[r*cols:(r+1)*cols], x)
	}
}

// axpy adds a·x to y.
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// linearForward applies out_t = W in_t to T rows in parallel.
func linearForward(out, W, in []float32, T, O, I int) {
	parallel(T, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			matvec(out[t*O:(t+1)*O], W, in[t*I:(t+1)*I])
		}
	})
}

// linearBackward is the backward of out_t = W in_t over T rows:
// dIn_t += Wᵀ dOut_t and dW += Σ_t dOut_t ⊗ in_t. dIn may be nil.
func linearBackward(dIn, dW, dOut, in, W []float32, T, O, I int) {
	if dIn != nil {
		parallel(T, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				di := dIn[t*I : (t+1)*I]
				for o := 0; o < O; o++ {
					if g := dOut[t*O+o]; g != 0 {
						axpy(di, g, W[o*I:(o+1)*I])
					}
				}
			}
		})
	}
	parallel(O, func(lo, hi int) {
		for o := lo; o < hi; o++ {
			dw := dW[o*I : (o+1)*I]
			for t := 0; t < T; t++ {
				if g := dOut[t*O+o]; g != 0 {
					axpy(dw, g, in[t*I:(t+1)*I])
				}
			}
		}
	})
}

// softmax writes the softmax of x into p (which may alias x).
func softmax(p, x []float32) {
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float32
	for i, v := range x {
		e := float32(math.Exp(float64(v - mx)))
		p[i] = e
		sum += e
	}
	inv := 1 / sum
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

// logSoftmaxAt returns log softmax(logits)[target], computed in float64.
func logSoftmaxAt(logits []float32, target int) float32 {
	lse := logSumExp(logits)
	return float32(float64(logits[target]) - lse)
}

func logSumExp(x []float32) float64 {
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v - mx))
	}
	return float64(mx) + math.Log(sum)
}

func silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

// siluGrad is d silu(x)/dx.
func siluGrad(x float32) float32 {
	s := 1 / (1 + float32(math.Exp(float64(-x))))
	return s * (1 + x*(1-s))
}
