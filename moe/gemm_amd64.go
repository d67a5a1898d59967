//go:build amd64 && !purego

package moe

import "golang.org/x/sys/cpu"

// useAVX selects the assembly kernels at run time, so one GOAMD64=v1
// binary runs everywhere and uses them where the CPU (and OS) have AVX
// and FMA (the gemm kernels fuse each multiply into its add). Both
// paths give the same bits; tests flip it to check.
var useAVX = cpu.X86.HasAVX && cpu.X86.HasFMA

// useAVX2 selects the vector exponential (expfs), which needs AVX2's
// integer lanes; it too gives the portable bits.
var useAVX2 = cpu.X86.HasAVX2

//go:noescape
func expf8(dst, src *float32, n int, scale, shift float32, sums *[8]float32)

//go:noescape
func kern4x16(k int, a *float32, ars, acs int, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func kern4x8(k int, a *float32, ars, acs int, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func kern1x64(k int, a *float32, acs int, b *float32, ldb int, c *float32, acc bool)

//go:noescape
func kern1x16(k int, a *float32, acs int, b *float32, ldb int, c *float32, acc bool)

//go:noescape
func kern1x8(k int, a *float32, acs int, b *float32, ldb int, c *float32, acc bool)

//go:noescape
func adam8(w, grad, mom, vel *float32, n int, k *[8]float32, zero bool)

//go:noescape
func kern4x8m(k int, a *float32, ars, acs int, b *float32, ldb int, c *float32, ldc int, acc bool, mask *int32)

//go:noescape
func kern1x8m(k int, a *float32, acs int, b *float32, ldb int, c *float32, acc bool, mask *int32)

//go:noescape
func kern6x16(k int, a *float32, ars, acs int, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func sumSquares4(x *float32, n int, s *[4]float64)

//go:noescape
func axpyFMA(y *float32, a float32, x *float32, n int)

//go:noescape
func max8(x *float32, n int) (m float32, ok bool)
