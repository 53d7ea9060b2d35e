//go:build !purego

#include "textflag.h"

// Converters from weight rows to float32 for the dequantize-and-GEMM
// path; they need AVX-512F, and simd_amd64.go calls them only when the CPU
// and OS support it. Each value is exact: a widening, or for Q8_0 the
// single product d·q of exact factors, as quant.Dequantize computes it.

// func dequantF16AVX512(dst *float32, src *byte, n16 int)
// sets dst[i] to the IEEE half src[2i:2i+2] (little-endian) for i <
// 16·n16, n16 >= 1.
TEXT ·dequantF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n16+16(FP), CX

loopf16:
	VCVTPH2PS (SI), Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       loopf16
	VZEROUPPER
	RET

// func dequantBF16AVX512(dst *float32, src *byte, n16 int)
// sets dst[i] to the bfloat16 src[2i:2i+2] (little-endian) for i <
// 16·n16, n16 >= 1.
TEXT ·dequantBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n16+16(FP), CX

loopbf16:
	VPMOVZXWD (SI), Z0
	VPSLLD    $16, Z0, Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       loopbf16
	VZEROUPPER
	RET

// Q8_0HALF sets 16 floats at off(DI) to Z1 times the 16 int8 quants at
// qoff(SI).
#define Q8_0HALF(qoff, off, z) \
	VPMOVSXBD qoff(SI), z; \
	VCVTDQ2PS z, z; \
	VMULPS    Z1, z, z; \
	VMOVUPS   z, off(DI)

// func dequantQ8_0AVX512(dst *float32, src *byte, nb int)
// sets the 32·nb floats at dst to the values of the nb Q8_0 blocks at src
// (34 bytes each: a half d, then 32 int8 quants q; value d·q), nb >= 1.
TEXT ·dequantQ8_0AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX

loopq8:
	VPBROADCASTW (SI), Y1
	VCVTPH2PS    Y1, Z1
	Q8_0HALF(2, 0, Z2)
	Q8_0HALF(18, 64, Z3)
	ADDQ         $34, SI
	ADDQ         $128, DI
	DECQ         CX
	JNZ          loopq8
	VZEROUPPER
	RET
