//go:build amd64 && !purego

#include "textflag.h"

// AVX2 kernels for gemm (gemm.go). Each output element is summed in increasing k,
// one VFMADD231PS (product and sum rounded once) at a time, so the bits
// equal gemmGo's fma32.

// func kern4x16(k int, a *float32, ars, acs int, b *float32, ldb int, c *float32, ldc int, acc bool)
TEXT ·kern4x16(SB), NOSPLIT, $0-65
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ ars+16(FP), R8
	SHLQ $2, R8
	MOVQ acs+24(FP), R10
	SHLQ $2, R10
	MOVQ b+32(FP), DI
	MOVQ ldb+40(FP), R11
	SHLQ $2, R11
	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R12
	SHLQ $2, R12
	LEAQ (SI)(R8*2), R9
	LEAQ (DX)(R12*2), R13
	MOVBLZX acc+64(FP), AX
	TESTQ AX, AX
	JZ kern4x16_zero
	VMOVUPS (DX), Y4
	VMOVUPS 32(DX), Y5
	VMOVUPS (DX)(R12*1), Y6
	VMOVUPS 32(DX)(R12*1), Y7
	VMOVUPS (R13), Y8
	VMOVUPS 32(R13), Y9
	VMOVUPS (R13)(R12*1), Y10
	VMOVUPS 32(R13)(R12*1), Y11
	JMP kern4x16_loop
kern4x16_zero:
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
kern4x16_loop:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VBROADCASTSS (SI), Y2
	VFMADD231PS Y0, Y2, Y4
	VFMADD231PS Y1, Y2, Y5
	VBROADCASTSS (SI)(R8*1), Y13
	VFMADD231PS Y0, Y13, Y6
	VFMADD231PS Y1, Y13, Y7
	VBROADCASTSS (R9), Y14
	VFMADD231PS Y0, Y14, Y8
	VFMADD231PS Y1, Y14, Y9
	VBROADCASTSS (R9)(R8*1), Y15
	VFMADD231PS Y0, Y15, Y10
	VFMADD231PS Y1, Y15, Y11
	ADDQ R10, SI
	ADDQ R10, R9
	ADDQ R11, DI
	DECQ CX
	JNZ kern4x16_loop
	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	VMOVUPS Y6, (DX)(R12*1)
	VMOVUPS Y7, 32(DX)(R12*1)
	VMOVUPS Y8, (R13)
	VMOVUPS Y9, 32(R13)
	VMOVUPS Y10, (R13)(R12*1)
	VMOVUPS Y11, 32(R13)(R12*1)
	VZEROUPPER
	RET

// func kern4x8(k int, a *float32, ars, acs int, b *float32, ldb int, c *float32, ldc int, acc bool)
TEXT ·kern4x8(SB), NOSPLIT, $0-65
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ ars+16(FP), R8
	SHLQ $2, R8
	MOVQ acs+24(FP), R10
	SHLQ $2, R10
	MOVQ b+32(FP), DI
	MOVQ ldb+40(FP), R11
	SHLQ $2, R11
	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R12
	SHLQ $2, R12
	LEAQ (SI)(R8*2), R9
	LEAQ (DX)(R12*2), R13
	MOVBLZX acc+64(FP), AX
	TESTQ AX, AX
	JZ kern4x8_zero
	VMOVUPS (DX), Y4
	VMOVUPS (DX)(R12*1), Y5
	VMOVUPS (R13), Y6
	VMOVUPS (R13)(R12*1), Y7
	JMP kern4x8_loop
kern4x8_zero:
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
kern4x8_loop:
	VMOVUPS (DI), Y0
	VBROADCASTSS (SI), Y2
	VFMADD231PS Y0, Y2, Y4
	VBROADCASTSS (SI)(R8*1), Y8
	VFMADD231PS Y0, Y8, Y5
	VBROADCASTSS (R9), Y9
	VFMADD231PS Y0, Y9, Y6
	VBROADCASTSS (R9)(R8*1), Y10
	VFMADD231PS Y0, Y10, Y7
	ADDQ R10, SI
	ADDQ R10, R9
	ADDQ R11, DI
	DECQ CX
	JNZ kern4x8_loop
	VMOVUPS Y4, (DX)
	VMOVUPS Y5, (DX)(R12*1)
	VMOVUPS Y6, (R13)
	VMOVUPS Y7, (R13)(R12*1)
	VZEROUPPER
	RET

// func kern1x64(k int, a *float32, acs int, b *float32, ldb int, c *float32, acc bool)
TEXT ·kern1x64(SB), NOSPLIT, $0-49
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ acs+16(FP), R10
	SHLQ $2, R10
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R11
	SHLQ $2, R11
	MOVQ c+40(FP), DX
	MOVBLZX acc+48(FP), AX
	TESTQ AX, AX
	JZ kern1x64_zero
	VMOVUPS (DX), Y4
	VMOVUPS 32(DX), Y5
	VMOVUPS 64(DX), Y6
	VMOVUPS 96(DX), Y7
	VMOVUPS 128(DX), Y8
	VMOVUPS 160(DX), Y9
	VMOVUPS 192(DX), Y10
	VMOVUPS 224(DX), Y11
	JMP kern1x64_loop
kern1x64_zero:
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
kern1x64_loop:
	VBROADCASTSS (SI), Y2
	VFMADD231PS (DI), Y2, Y4
	VFMADD231PS 32(DI), Y2, Y5
	VFMADD231PS 64(DI), Y2, Y6
	VFMADD231PS 96(DI), Y2, Y7
	VFMADD231PS 128(DI), Y2, Y8
	VFMADD231PS 160(DI), Y2, Y9
	VFMADD231PS 192(DI), Y2, Y10
	VFMADD231PS 224(DI), Y2, Y11
	ADDQ R10, SI
	ADDQ R11, DI
	DECQ CX
	JNZ kern1x64_loop
	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	VMOVUPS Y6, 64(DX)
	VMOVUPS Y7, 96(DX)
	VMOVUPS Y8, 128(DX)
	VMOVUPS Y9, 160(DX)
	VMOVUPS Y10, 192(DX)
	VMOVUPS Y11, 224(DX)
	VZEROUPPER
	RET

// func kern1x16(k int, a *float32, acs int, b *float32, ldb int, c *float32, acc bool)
TEXT ·kern1x16(SB), NOSPLIT, $0-49
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ acs+16(FP), R10
	SHLQ $2, R10
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R11
	SHLQ $2, R11
	MOVQ c+40(FP), DX
	MOVBLZX acc+48(FP), AX
	TESTQ AX, AX
	JZ kern1x16_zero
	VMOVUPS (DX), Y4
	VMOVUPS 32(DX), Y5
	JMP kern1x16_loop
kern1x16_zero:
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
kern1x16_loop:
	VBROADCASTSS (SI), Y2
	VFMADD231PS (DI), Y2, Y4
	VFMADD231PS 32(DI), Y2, Y5
	ADDQ R10, SI
	ADDQ R11, DI
	DECQ CX
	JNZ kern1x16_loop
	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	VZEROUPPER
	RET

// func kern1x8(k int, a *float32, acs int, b *float32, ldb int, c *float32, acc bool)
TEXT ·kern1x8(SB), NOSPLIT, $0-49
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ acs+16(FP), R10
	SHLQ $2, R10
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R11
	SHLQ $2, R11
	MOVQ c+40(FP), DX
	MOVBLZX acc+48(FP), AX
	TESTQ AX, AX
	JZ kern1x8_zero
	VMOVUPS (DX), Y4
	JMP kern1x8_loop
kern1x8_zero:
	VXORPS Y4, Y4, Y4
kern1x8_loop:
	VBROADCASTSS (SI), Y2
	VFMADD231PS (DI), Y2, Y4
	ADDQ R10, SI
	ADDQ R11, DI
	DECQ CX
	JNZ kern1x8_loop
	VMOVUPS Y4, (DX)
	VZEROUPPER
	RET

// expf8 constants, each broadcast from memory.
DATA expfC<>+0(SB)/4, $1.442695
DATA expfC<>+4(SB)/4, $0.5
DATA expfC<>+8(SB)/4, $0.693359375
DATA expfC<>+12(SB)/4, $-2.12194440e-4
DATA expfC<>+16(SB)/4, $1.9875691500e-4
DATA expfC<>+20(SB)/4, $1.3981999507e-3
DATA expfC<>+24(SB)/4, $8.3334519073e-3
DATA expfC<>+28(SB)/4, $4.1665795894e-2
DATA expfC<>+32(SB)/4, $1.6666665459e-1
DATA expfC<>+36(SB)/4, $5.0000001201e-1
DATA expfC<>+40(SB)/4, $1.0
DATA expfC<>+44(SB)/4, $88.72283
DATA expfC<>+48(SB)/4, $-87.33654
DATA expfC<>+52(SB)/4, $127
DATA expfC<>+56(SB)/4, $0x7f800000
GLOBL expfC<>(SB), RODATA|NOPTR, $60

// func expf8(dst, src *float32, n int, scale, shift float32, sums *[8]float32)
// dst[i] = expf(src[i]·scale − shift) for n a multiple of 8 (product and
// difference each rounded), with expf's operations (kernels.go) lane by
// lane, so the bits are the scalar function's; lane j of sums adds
// dst[8q+j] in increasing q.
TEXT ·expf8(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ sums+32(FP), DX
	SHRQ $3, CX
	JZ expf8_done
	VBROADCASTSS shift+28(FP), Y13
	VMOVUPS (DX), Y12
	VBROADCASTSS expfC<>+44(SB), Y14 // hi
	VBROADCASTSS expfC<>+48(SB), Y15 // lo
expf8_loop:
	VBROADCASTSS scale+24(FP), Y3
	VMULPS (SI), Y3, Y0
	VSUBPS Y13, Y0, Y0               // x
	VMAXPS Y15, Y0, Y1
	VMINPS Y14, Y1, Y1               // x clamped, so the integer part stays small
	VBROADCASTSS expfC<>+0(SB), Y2
	VMULPS Y2, Y1, Y2                // t = x·log2e
	VBROADCASTSS expfC<>+4(SB), Y3
	VADDPS Y3, Y2, Y2
	VROUNDPS $1, Y2, Y2              // fn = floor(t + 0.5)
	VBROADCASTSS expfC<>+8(SB), Y3
	VMULPS Y3, Y2, Y3
	VSUBPS Y3, Y1, Y4                // r = x − fn·ln2hi
	VBROADCASTSS expfC<>+12(SB), Y3
	VMULPS Y3, Y2, Y3
	VSUBPS Y3, Y4, Y4                // r −= fn·ln2lo
	VBROADCASTSS expfC<>+16(SB), Y5
	VMULPS Y4, Y5, Y5
	VBROADCASTSS expfC<>+20(SB), Y3
	VADDPS Y3, Y5, Y5
	VMULPS Y4, Y5, Y5
	VBROADCASTSS expfC<>+24(SB), Y3
	VADDPS Y3, Y5, Y5
	VMULPS Y4, Y5, Y5
	VBROADCASTSS expfC<>+28(SB), Y3
	VADDPS Y3, Y5, Y5
	VMULPS Y4, Y5, Y5
	VBROADCASTSS expfC<>+32(SB), Y3
	VADDPS Y3, Y5, Y5
	VMULPS Y4, Y5, Y5
	VBROADCASTSS expfC<>+36(SB), Y3
	VADDPS Y3, Y5, Y5
	VMULPS Y4, Y5, Y5
	VMULPS Y4, Y5, Y5
	VADDPS Y4, Y5, Y5
	VBROADCASTSS expfC<>+40(SB), Y3
	VADDPS Y3, Y5, Y5                // p = ((p·r)·r + r) + 1
	VCVTTPS2DQ Y2, Y6                // n
	VPBROADCASTD expfC<>+52(SB), Y7
	VPMINSD Y7, Y6, Y8               // min(n, 127)
	VPSUBD Y8, Y6, Y9                // 1 where n = 128
	VPADDD Y7, Y8, Y8
	VPSLLD $23, Y8, Y8               // 2^min(n,127)
	VMULPS Y8, Y5, Y5
	VCVTDQ2PS Y9, Y9
	VADDPS Y3, Y9, Y9                // 2 where n = 128, else 1
	VMULPS Y9, Y5, Y5
	VCMPPS $0x11, Y15, Y0, Y10       // x < lo: 0
	VXORPS Y11, Y11, Y11
	VBLENDVPS Y10, Y11, Y5, Y5
	VCMPPS $0x1e, Y14, Y0, Y10       // x > hi: +Inf
	VBROADCASTSS expfC<>+56(SB), Y11
	VBLENDVPS Y10, Y11, Y5, Y5
	VCMPPS $3, Y0, Y0, Y10           // NaN: x
	VBLENDVPS Y10, Y0, Y5, Y5
	VMOVUPS Y5, (DI)
	VADDPS Y5, Y12, Y12
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ expf8_loop
	VMOVUPS Y12, (DX)
	VZEROUPPER
expf8_done:
	RET

// func adam8(w, grad, mom, vel *float32, n int, k *[8]float32, zero bool)
// One Adam step over n elements (a multiple of 8) with adamStep's scalar
// operations in its order (k: β1, 1−β1, β2, 1−β2, lr/bc1, 1/√bc2, ε, the
// gradient's scale), so the bits are the scalar code's; zero clears grad.
TEXT ·adam8(SB), NOSPLIT, $0-49
	MOVQ w+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ mom+16(FP), R8
	MOVQ vel+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ k+40(FP), AX
	MOVBLZX zero+48(FP), DX
	SHRQ $3, CX
	JZ adam8_done
	VBROADCASTSS 0(AX), Y8
	VBROADCASTSS 4(AX), Y9
	VBROADCASTSS 8(AX), Y10
	VBROADCASTSS 12(AX), Y11
	VBROADCASTSS 16(AX), Y12
	VBROADCASTSS 20(AX), Y13
	VBROADCASTSS 24(AX), Y14
	VBROADCASTSS 28(AX), Y15
	VXORPS Y7, Y7, Y7
adam8_loop:
	VMULPS (SI), Y15, Y0  // g·scale
	VMULPS (R8), Y8, Y1   // β1·m
	VMULPS Y0, Y9, Y3     // (1−β1)·g
	VADDPS Y3, Y1, Y1     // m'
	VMULPS (R9), Y10, Y2  // β2·v
	VMULPS Y0, Y11, Y3    // (1−β2)·g
	VMULPS Y0, Y3, Y3     // ·g
	VADDPS Y3, Y2, Y2     // v'
	VMOVUPS Y1, (R8)
	VMOVUPS Y2, (R9)
	VSQRTPS Y2, Y2
	VMULPS Y13, Y2, Y2    // √v'/√bc2
	VADDPS Y14, Y2, Y2    // + ε
	VDIVPS Y2, Y1, Y1     // m'/(…)
	VMULPS Y1, Y12, Y1    // lr/bc1 · m'/(…)
	VMOVUPS (DI), Y4
	VSUBPS Y1, Y4, Y4
	VMOVUPS Y4, (DI)
	TESTQ DX, DX
	JZ adam8_next
	VMOVUPS Y7, (SI)
adam8_next:
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, R9
	DECQ CX
	JNZ adam8_loop
	VZEROUPPER
adam8_done:
	RET

// The same kernels for the last N mod 8 columns: B and C are read and
// written through the lane mask, so the arithmetic of the kept lanes is
// kern4x8's and kern1x8's.

// func kern4x8m(k int, a *float32, ars, acs int, b *float32, ldb int, c *float32, ldc int, acc bool, mask *int32)
TEXT ·kern4x8m(SB), NOSPLIT, $0-80
	MOVQ k+0(FP), CX
	MOVQ mask+72(FP), BX
	VMOVDQU (BX), Y12
	MOVQ a+8(FP), SI
	MOVQ ars+16(FP), R8
	SHLQ $2, R8
	MOVQ acs+24(FP), R10
	SHLQ $2, R10
	MOVQ b+32(FP), DI
	MOVQ ldb+40(FP), R11
	SHLQ $2, R11
	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R12
	SHLQ $2, R12
	LEAQ (SI)(R8*2), R9
	LEAQ (DX)(R12*2), R13
	MOVBLZX acc+64(FP), AX
	TESTQ AX, AX
	JZ kern4x8m_zero
	VMASKMOVPS (DX), Y12, Y4
	VMASKMOVPS (DX)(R12*1), Y12, Y5
	VMASKMOVPS (R13), Y12, Y6
	VMASKMOVPS (R13)(R12*1), Y12, Y7
	JMP kern4x8m_loop
kern4x8m_zero:
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
kern4x8m_loop:
	VMASKMOVPS (DI), Y12, Y0
	VBROADCASTSS (SI), Y2
	VFMADD231PS Y0, Y2, Y4
	VBROADCASTSS (SI)(R8*1), Y8
	VFMADD231PS Y0, Y8, Y5
	VBROADCASTSS (R9), Y9
	VFMADD231PS Y0, Y9, Y6
	VBROADCASTSS (R9)(R8*1), Y10
	VFMADD231PS Y0, Y10, Y7
	ADDQ R10, SI
	ADDQ R10, R9
	ADDQ R11, DI
	DECQ CX
	JNZ kern4x8m_loop
	VMASKMOVPS Y4, Y12, (DX)
	VMASKMOVPS Y5, Y12, (DX)(R12*1)
	VMASKMOVPS Y6, Y12, (R13)
	VMASKMOVPS Y7, Y12, (R13)(R12*1)
	VZEROUPPER
	RET

// func kern1x8m(k int, a *float32, acs int, b *float32, ldb int, c *float32, acc bool, mask *int32)
TEXT ·kern1x8m(SB), NOSPLIT, $0-64
	MOVQ k+0(FP), CX
	MOVQ mask+56(FP), BX
	VMOVDQU (BX), Y12
	MOVQ a+8(FP), SI
	MOVQ acs+16(FP), R10
	SHLQ $2, R10
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R11
	SHLQ $2, R11
	MOVQ c+40(FP), DX
	MOVBLZX acc+48(FP), AX
	TESTQ AX, AX
	JZ kern1x8m_zero
	VMASKMOVPS (DX), Y12, Y4
	JMP kern1x8m_loop
kern1x8m_zero:
	VXORPS Y4, Y4, Y4
kern1x8m_loop:
	VBROADCASTSS (SI), Y2
	VMASKMOVPS (DI), Y12, Y13
	VFMADD231PS Y13, Y2, Y4
	ADDQ R10, SI
	ADDQ R11, DI
	DECQ CX
	JNZ kern1x8m_loop
	VMASKMOVPS Y4, Y12, (DX)
	VZEROUPPER
	RET

// func kern6x16(k int, a *float32, ars, acs int, b *float32, ldb int, c *float32, ldc int, acc bool)
// The main kernel: 6 rows × 16 columns of C in registers, k unrolled by 2.
TEXT ·kern6x16(SB), NOSPLIT, $0-65
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ ars+16(FP), R8
	SHLQ $2, R8
	MOVQ acs+24(FP), R10
	SHLQ $2, R10
	MOVQ b+32(FP), DI
	MOVQ ldb+40(FP), R11
	SHLQ $2, R11
	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R12
	SHLQ $2, R12
	LEAQ (SI)(R8*2), R9
	ADDQ R8, R9
	LEAQ (DX)(R12*2), R13
	ADDQ R12, R13
	MOVBLZX acc+64(FP), AX
	TESTQ AX, AX
	JZ kern6x16_zero
	VMOVUPS (DX), Y4
	VMOVUPS 32(DX), Y5
	VMOVUPS (DX)(R12*1), Y6
	VMOVUPS 32(DX)(R12*1), Y7
	VMOVUPS (DX)(R12*2), Y8
	VMOVUPS 32(DX)(R12*2), Y9
	VMOVUPS (R13), Y10
	VMOVUPS 32(R13), Y11
	VMOVUPS (R13)(R12*1), Y12
	VMOVUPS 32(R13)(R12*1), Y13
	VMOVUPS (R13)(R12*2), Y14
	VMOVUPS 32(R13)(R12*2), Y15
	JMP kern6x16_start
kern6x16_zero:
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
kern6x16_start:
	MOVQ CX, BX
	SHRQ $1, BX
	JZ kern6x16_tail
kern6x16_loop:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VBROADCASTSS (SI), Y2
	VFMADD231PS Y0, Y2, Y4
	VFMADD231PS Y1, Y2, Y5
	VBROADCASTSS (SI)(R8*1), Y2
	VFMADD231PS Y0, Y2, Y6
	VFMADD231PS Y1, Y2, Y7
	VBROADCASTSS (SI)(R8*2), Y2
	VFMADD231PS Y0, Y2, Y8
	VFMADD231PS Y1, Y2, Y9
	VBROADCASTSS (R9), Y2
	VFMADD231PS Y0, Y2, Y10
	VFMADD231PS Y1, Y2, Y11
	VBROADCASTSS (R9)(R8*1), Y2
	VFMADD231PS Y0, Y2, Y12
	VFMADD231PS Y1, Y2, Y13
	VBROADCASTSS (R9)(R8*2), Y2
	VFMADD231PS Y0, Y2, Y14
	VFMADD231PS Y1, Y2, Y15
	ADDQ R10, SI
	ADDQ R10, R9
	ADDQ R11, DI
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VBROADCASTSS (SI), Y2
	VFMADD231PS Y0, Y2, Y4
	VFMADD231PS Y1, Y2, Y5
	VBROADCASTSS (SI)(R8*1), Y2
	VFMADD231PS Y0, Y2, Y6
	VFMADD231PS Y1, Y2, Y7
	VBROADCASTSS (SI)(R8*2), Y2
	VFMADD231PS Y0, Y2, Y8
	VFMADD231PS Y1, Y2, Y9
	VBROADCASTSS (R9), Y2
	VFMADD231PS Y0, Y2, Y10
	VFMADD231PS Y1, Y2, Y11
	VBROADCASTSS (R9)(R8*1), Y2
	VFMADD231PS Y0, Y2, Y12
	VFMADD231PS Y1, Y2, Y13
	VBROADCASTSS (R9)(R8*2), Y2
	VFMADD231PS Y0, Y2, Y14
	VFMADD231PS Y1, Y2, Y15
	ADDQ R10, SI
	ADDQ R10, R9
	ADDQ R11, DI
	DECQ BX
	JNZ kern6x16_loop
kern6x16_tail:
	ANDQ $1, CX
	JZ kern6x16_store
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VBROADCASTSS (SI), Y2
	VFMADD231PS Y0, Y2, Y4
	VFMADD231PS Y1, Y2, Y5
	VBROADCASTSS (SI)(R8*1), Y2
	VFMADD231PS Y0, Y2, Y6
	VFMADD231PS Y1, Y2, Y7
	VBROADCASTSS (SI)(R8*2), Y2
	VFMADD231PS Y0, Y2, Y8
	VFMADD231PS Y1, Y2, Y9
	VBROADCASTSS (R9), Y2
	VFMADD231PS Y0, Y2, Y10
	VFMADD231PS Y1, Y2, Y11
	VBROADCASTSS (R9)(R8*1), Y2
	VFMADD231PS Y0, Y2, Y12
	VFMADD231PS Y1, Y2, Y13
	VBROADCASTSS (R9)(R8*2), Y2
	VFMADD231PS Y0, Y2, Y14
	VFMADD231PS Y1, Y2, Y15
	ADDQ R10, SI
	ADDQ R10, R9
	ADDQ R11, DI
kern6x16_store:
	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	VMOVUPS Y6, (DX)(R12*1)
	VMOVUPS Y7, 32(DX)(R12*1)
	VMOVUPS Y8, (DX)(R12*2)
	VMOVUPS Y9, 32(DX)(R12*2)
	VMOVUPS Y10, (R13)
	VMOVUPS Y11, 32(R13)
	VMOVUPS Y12, (R13)(R12*1)
	VMOVUPS Y13, 32(R13)(R12*1)
	VMOVUPS Y14, (R13)(R12*2)
	VMOVUPS Y15, 32(R13)(R12*2)
	VZEROUPPER
	RET

// func axpyFMA(y *float32, a float32, x *float32, n int)
// y[i] = fma(a, x[i], y[i]) for i < n: axpyAt's arithmetic, gemm's per element.
TEXT ·axpyFMA(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	VBROADCASTSS a+8(FP), Y0
	MOVQ x+16(FP), SI
	MOVQ n+24(FP), CX
axpyFMA_loop8:
	CMPQ CX, $8
	JLT axpyFMA_tail
	VMOVUPS (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	SUBQ $8, CX
	JMP axpyFMA_loop8
axpyFMA_tail:
	TESTQ CX, CX
	JZ axpyFMA_done
	VMOVSS (DI), X1
	VFMADD231SS (SI), X0, X1
	VMOVSS X1, (DI)
	ADDQ $4, DI
	ADDQ $4, SI
	DECQ CX
	JMP axpyFMA_tail
axpyFMA_done:
	VZEROUPPER
	RET

// func sumSquares4(x *float32, n int, s *[4]float64)
// s[j] += x[i]² in float64 for i ≡ j mod 4, i < n (a multiple of 4), in
// increasing i, each square rounded before it is added: GradNorm's
// scalar partial sums, four lanes at a time.
TEXT ·sumSquares4(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ s+16(FP), DX
	VMOVUPD (DX), Y0
	SHRQ $2, CX
	JZ sumSquares4_done
sumSquares4_loop:
	VCVTPS2PD (SI), Y1
	VMULPD Y1, Y1, Y1
	VADDPD Y1, Y0, Y0
	ADDQ $16, SI
	DECQ CX
	JNZ sumSquares4_loop
sumSquares4_done:
	VMOVUPD Y0, (DX)
	VZEROUPPER
	RET

// func max8(x *float32, n int) (m float32, ok bool)
// The largest of x[:n] (n a multiple of 8, at least 8) by VMAXPS lanes;
// ok is false where any element is NaN.
TEXT ·max8(SB), NOSPLIT, $0-21
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VMOVUPS (SI), Y0
	VCMPPS $3, Y0, Y0, Y2 // unordered: NaN lanes
	ADDQ $32, SI
	SUBQ $8, CX
	JZ max8_reduce
max8_loop:
	VMOVUPS (SI), Y3
	VMAXPS Y3, Y0, Y0
	VCMPPS $3, Y3, Y3, Y4
	VORPS Y4, Y2, Y2
	ADDQ $32, SI
	SUBQ $8, CX
	JNZ max8_loop
max8_reduce:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	MOVSS X0, m+16(FP)
	VMOVMSKPS Y2, AX
	TESTL AX, AX
	SETEQ ok+20(FP)
	VZEROUPPER
	RET
