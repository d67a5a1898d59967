package moe

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestExpf: expf stays within 2 ulp of the float64 exponential over the
// range softmax and silu use, and handles the edges.
func TestExpf(t *testing.T) {
	worst := 0.0
	for x := float32(-87); x < 88.7; x += 0.00137 {
		got, want := float64(expf(x)), math.Exp(float64(x))
		ulp := float64(math.Nextafter32(float32(want), float32(math.Inf(1)))) - float64(float32(want))
		if d := math.Abs(got-want) / ulp; d > worst {
			worst = d
		}
	}
	if worst > 2 {
		t.Errorf("expf is off by %.2f ulp", worst)
	}
	for _, c := range []struct{ x, want float32 }{{0, 1}, {-200, 0}, {200, float32(math.Inf(1))}, {float32(math.Inf(-1)), 0}} {
		if got := expf(c.x); got != c.want {
			t.Errorf("expf(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if nan := float32(math.NaN()); expf(nan) == expf(nan) {
		t.Error("expf(NaN) is not NaN")
	}
}

// TestExpfsMatchesExpf: the vector exponential gives expf's bits for every
// input class: the normal range, both clamps, n = 128, subnormal results,
// ±0, ±Inf and NaN.
func TestExpfsMatchesExpf(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 on this machine: only the scalar exponential exists")
	}
	var xs []float32
	for x := float32(-105); x < 105; x += 0.0173 {
		xs = append(xs, x)
	}
	for x := float32(88.3); x < 88.8; x += 1e-4 {
		xs = append(xs, x, -x+1)
	}
	inf := float32(math.Inf(1))
	xs = append(xs, 0, float32(math.Copysign(0, -1)), inf, -inf, float32(math.NaN()), 1e-40, -1e-40, 88.72283, -87.33654)
	for len(xs)%8 != 5 {
		xs = append(xs, 1)
	}
	got := make([]float32, len(xs))
	expfs(got, xs)
	for i, x := range xs {
		want := expf(x)
		if math.Float32bits(got[i]) != math.Float32bits(want) && !(want != want && got[i] != got[i]) {
			t.Fatalf("expfs(%v) = %v, expf %v", x, got[i], want)
		}
	}
	for _, n := range []int{3, 8, 13, 64, 517} {
		x := xs[len(xs)-n:]
		scale, shift := float32(-0.7), float32(2.5)
		vec := make([]float32, n)
		sv := expScaleShiftSum(vec, x, scale, shift)
		useAVX2 = false
		one := make([]float32, n)
		so := expScaleShiftSum(one, x, scale, shift)
		useAVX2 = true
		same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
		if !slices.EqualFunc(vec, one, same) || !same(sv, so) {
			t.Fatalf("expScaleShiftSum of %d: vector sum %v, scalar %v", n, sv, so)
		}
	}
}

// TestAdamPathsAgree: the vector Adam step gives the scalar step's bits.
func TestAdamPathsAgree(t *testing.T) {
	if !useAVX {
		t.Skip("no AVX on this machine: only the scalar step exists")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	n := 1003
	mk := func(scale float64) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.NormFloat64() * scale)
		}
		return s
	}
	w, g, m, v := mk(1), mk(1e-3), mk(1e-4), mk(1e-6)
	for i := range v {
		v[i] = v[i] * v[i]
	}
	for _, c := range []struct {
		scale float32
		zero  bool
	}{{1, false}, {0.37, true}} {
		k := [8]float32{0.9, 1 - 0.9, 0.95, 1 - 0.95, float32(1e-3 / (1 - math.Pow(0.9, 3))), float32(1 / math.Sqrt(1-math.Pow(0.95, 3))), 1e-8, c.scale}
		w1, g1, m1, v1 := slices.Clone(w), slices.Clone(g), slices.Clone(m), slices.Clone(v)
		w2, g2, m2, v2 := slices.Clone(w), slices.Clone(g), slices.Clone(m), slices.Clone(v)
		adamStep(w1, g1, m1, v1, &k, c.zero)
		useAVX = false
		adamStep(w2, g2, m2, v2, &k, c.zero)
		useAVX = true
		for i := range w {
			if math.Float32bits(w1[i]) != math.Float32bits(w2[i]) || m1[i] != m2[i] || v1[i] != v2[i] || g1[i] != g2[i] {
				t.Fatalf("scale %v, element %d: vector (%v, %v, %v, %v), scalar (%v, %v, %v, %v)", c.scale, i, w1[i], m1[i], v1[i], g1[i], w2[i], m2[i], v2[i], g2[i])
			}
			if c.zero && g1[i] != 0 || !c.zero && g1[i] != g[i] {
				t.Fatalf("scale %v, zero %v: gradient %d is %v after the step", c.scale, c.zero, i, g1[i])
			}
		}
	}
}

// TestGradNormPathsAgree: the vector sum of squares gives the scalar
// partial sums' bits, over tensors of every length mod 4.
func TestGradNormPathsAgree(t *testing.T) {
	if !useAVX {
		t.Skip("no AVX on this machine: only the scalar sum exists")
	}
	m := roughModel(t, wideConfig())
	rng := rand.New(rand.NewPCG(5, 6))
	for _, g := range m.G.Tensors {
		for i := range g.Data {
			g.Data[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()*4))
		}
	}
	vec := m.GradNorm()
	useAVX = false
	one := m.GradNorm()
	useAVX = true
	if math.Float64bits(vec) != math.Float64bits(one) {
		t.Fatalf("gradient norm %v with AVX, %v without", vec, one)
	}
}

// TestMaxfPathsAgree: the vector maximum gives the loop's bits, NaN, ±0
// and infinities among the elements included.
func TestMaxfPathsAgree(t *testing.T) {
	if !useAVX {
		t.Skip("no AVX on this machine: only the loop exists")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	nan, inf, negz := float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1))
	for _, n := range []int{1, 7, 8, 9, 16, 31, 512} {
		for _, special := range []float32{1, nan, inf, -inf, 0, negz} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
				if special == 0 || special == negz {
					x[i] = -float32(math.Abs(float64(x[i]))) // a zero is the largest
				}
			}
			x[rng.IntN(n)] = special
			vec := maxf(x)
			useAVX = false
			one := maxf(x)
			useAVX = true
			if math.Float32bits(vec) != math.Float32bits(one) && !(vec != vec && one != one) {
				t.Fatalf("%d elements with %v: max %v with AVX, %v without", n, special, vec, one)
			}
		}
	}
}
