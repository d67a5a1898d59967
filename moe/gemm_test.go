package moe

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestGemmPathsAgree: the assembly kernels and the portable gemm give the
// same bits for shapes that exercise every tile and edge (rows mod 4,
// columns mod 16 and mod 8, K across the L1 block), strided and
// transposed A, accumulation, and values spanning many magnitudes; and
// one row of a product equals the one-row product (the sampler's case).
func TestGemmPathsAgree(t *testing.T) {
	if !useAVX {
		t.Skip("no AVX on this machine: only the portable path exists")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()*3))
		}
		return s
	}
	for _, sh := range [][3]int{{1, 1, 1}, {4, 16, 8}, {5, 23, 7}, {7, 130, 300}, {13, 72, 64}, {1, 200, 33}, {9, 8, 600}, {3, 5, 2}, {6, 32, 9}, {12, 53, 257}, {16, 17, 1},
		{192, 16, 5}, {197, 131, 300}, {194, 300, 20}, {200, 520, 9}, {193, 23, 513}, {198, 144, 40}} {
		M, N, K := sh[0], sh[1], sh[2]
		for _, trans := range []bool{false, true} {
			ars, acs := K+3, 1
			if trans {
				ars, acs = 1, M+2
			}
			a := fill((M-1)*ars + (K-1)*acs + 1)
			ldb, ldc := N+5, N+1
			b := fill((K-1)*ldb + N)
			c0 := fill((M-1)*ldc + N)
			for _, acc := range []bool{false, true} {
				want := append([]float32(nil), c0...)
				useAVX = false
				gemm(acc, M, N, K, a, ars, acs, b, ldb, want, ldc)
				useAVX = true
				got := append([]float32(nil), c0...)
				gemm(acc, M, N, K, a, ars, acs, b, ldb, got, ldc)
				for i := range want {
					if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
						t.Fatalf("%dx%dx%d trans %v acc %v: element %d: avx %v, portable %v", M, N, K, trans, acc, i, got[i], want[i])
					}
				}
				r := M - 1
				row := append([]float32(nil), c0[r*ldc:r*ldc+N]...)
				gemm(acc, 1, N, K, a[r*ars:], ars, acs, b, ldb, row, N)
				for j := range row {
					if math.Float32bits(row[j]) != math.Float32bits(got[r*ldc+j]) {
						t.Fatalf("%dx%dx%d: row %d alone differs at %d", M, N, K, r, j)
					}
				}
			}
		}
	}
}

func TestGemmRejectsOutOfBounds(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a gemm reading past its operands did not panic")
		}
	}()
	gemm(false, 2, 2, 2, make([]float32, 3), 2, 1, make([]float32, 4), 2, make([]float32, 4), 2)
}

// TestTrainingSameWithoutAVX: training steps and bf16 sampling give the
// same bits on the assembly path and on the portable one, so a machine
// without AVX reproduces a run's digests.
func TestTrainingSameWithoutAVX(t *testing.T) {
	if !useAVX {
		t.Skip("no AVX on this machine: only the portable path exists")
	}
	run := func(avx bool) (*Model, *Generation) {
		useAVX, useAVX2 = avx, avx && cpu.X86.HasAVX2
		defer func() { useAVX, useAVX2 = true, cpu.X86.HasAVX2 }()
		cfg := wideConfig()
		m := roughModel(t, cfg)
		opt := NewAdam(m, DefaultAdam())
		seqs := [][]int{samplePrompt(cfg, 40), samplePrompt(cfg, 23)}
		for i := 0; i < 2; i++ {
			nllStep(t, m, opt, seqs)
		}
		g, err := NewSampler(m, BF16).Generate(context.Background(), samplePrompt(cfg, 5), SamplingParams{Temperature: 1, MaxNewTokens: 30, Seed: 2})
		if err != nil {
			t.Fatal(err)
		}
		return m, g
	}
	a, ga := run(true)
	b, gb := run(false)
	for i, ta := range a.W.Tensors {
		for j, v := range ta.Data {
			if math.Float32bits(v) != math.Float32bits(b.W.Tensors[i].Data[j]) {
				t.Fatalf("%s[%d]: %v with AVX, %v without", ta.Name, j, v, b.W.Tensors[i].Data[j])
			}
		}
	}
	if !slices.Equal(ga.OutputIDs, gb.OutputIDs) || !slices.Equal(ga.LogProbs, gb.LogProbs) || !slices.Equal(ga.Routing.Experts, gb.Routing.Experts) {
		t.Fatal("bf16 generation differs between the AVX and the portable path")
	}
}

// TestFMA32MatchesHardware: the portable fused multiply-add rounds as the
// CPU's does, at the cases where rounding the float64 sum to nearest and
// then to float32 would not (exact value a hair off a float32 halfway
// point, subnormal results, cancellation), and over random operands.
func TestFMA32MatchesHardware(t *testing.T) {
	if !useAVX {
		t.Skip("no FMA on this machine")
	}
	f := math.Float32frombits
	one, ulp := float32(1), float32(math.Ldexp(1, -23))
	cases := [][3]float32{
		{1 + ulp, float32(math.Ldexp(1, -24)) * (1 - ulp), 1 + ulp}, // just below a halfway point
		{1 + ulp, float32(math.Ldexp(1, -24)) * (1 + ulp), 1},       // just above one
		{-(1 + ulp), float32(math.Ldexp(1, -24)) * (1 - ulp), -(1 + ulp)},
		{f(1), f(0x3f000000), f(0x00000001)}, // subnormals
		{float32(math.Ldexp(1, -75)), float32(math.Ldexp(1.5, -75)) * (1 - ulp), float32(math.Ldexp(1, -149))},
		{3, 1.0 / 3, -1},
		{one, float32(math.Inf(1)), 1}, {0, float32(math.Inf(1)), 1}, {float32(math.NaN()), 1, 1},
		{f(0x80000000), 1, 0}, {f(0x80000000), 1, f(0x80000000)},
		{math.MaxFloat32, 2, -math.MaxFloat32},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200000; i++ {
		x, y := float32(rng.NormFloat64()*math.Exp(rng.NormFloat64()*20)), float32(rng.NormFloat64())
		z := float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()*20))
		if i%2 == 0 {
			z = -x * y * (1 + float32(rng.NormFloat64())*1e-6) // near cancellation
		}
		cases = append(cases, [3]float32{x, y, z})
	}
	for _, c := range cases {
		want := []float32{c[2]}
		axpyFMA(&want[0], c[0], &c[1], 1)
		if got := fma32(c[0], c[1], c[2]); math.Float32bits(got) != math.Float32bits(want[0]) {
			t.Fatalf("fma32(%g, %g, %g) = %g (%#x), hardware %g (%#x)", c[0], c[1], c[2], got, math.Float32bits(got), want[0], math.Float32bits(want[0]))
		}
	}
}
