//go:build !amd64 || purego

package moe

// Without the assembly kernels gemm runs gemmGo, which gives the same bits.
var useAVX, useAVX2 = false, false

func expf8(dst, src *float32, n int, scale, shift float32, sums *[8]float32) {
	panic("moe: no assembly kernels in this build")
}

func kern4x16(k int, a *float32, ars, acs int, b *float32, ldb int, c *float32, ldc int, acc bool) {
	panic("moe: no assembly kernels in this build")
}

func kern4x8(k int, a *float32, ars, acs int, b *float32, ldb int, c *float32, ldc int, acc bool) {
	panic("moe: no assembly kernels in this build")
}

func kern1x64(k int, a *float32, acs int, b *float32, ldb int, c *float32, acc bool) {
	panic("moe: no assembly kernels in this build")
}

func kern1x16(k int, a *float32, acs int, b *float32, ldb int, c *float32, acc bool) {
	panic("moe: no assembly kernels in this build")
}

func kern1x8(k int, a *float32, acs int, b *float32, ldb int, c *float32, acc bool) {
	panic("moe: no assembly kernels in this build")
}

func adam8(w, grad, mom, vel *float32, n int, k *[8]float32, zero bool) {
	panic("moe: no assembly kernels in this build")
}

func kern4x8m(k int, a *float32, ars, acs int, b *float32, ldb int, c *float32, ldc int, acc bool, mask *int32) {
	panic("moe: no assembly kernels in this build")
}

func kern1x8m(k int, a *float32, acs int, b *float32, ldb int, c *float32, acc bool, mask *int32) {
	panic("moe: no assembly kernels in this build")
}

func kern6x16(k int, a *float32, ars, acs int, b *float32, ldb int, c *float32, ldc int, acc bool) {
	panic("moe: no assembly kernels in this build")
}

func axpyFMA(y *float32, a float32, x *float32, n int) {
	panic("moe: no assembly kernels in this build")
}

func sumSquares4(x *float32, n int, s *[4]float64) { panic("moe: no assembly kernels in this build") }

func max8(x *float32, n int) (m float32, ok bool) { panic("moe: no assembly kernels in this build") }
