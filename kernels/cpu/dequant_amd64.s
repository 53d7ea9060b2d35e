//go:build !purego

#include "textflag.h"

// Converters from weight rows to float32 for the dequantize-and-GEMM
// path; they need AVX-512F, and dequant_amd64.go calls them only when the
// CPU and OS support it. Each value is the one quant.Dequantize computes:
// a widening, for Q8_0 the single product d·q of exact factors, for Q4_K
// the same product and difference in the same order.

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

// Q4K16 sets 16 floats at off(DI) to d·q − m for the 16 int32 quants in q
// (clobbered).
#define Q4K16(q, d, m, off) \
	VCVTDQ2PS q, q; \
	VMULPS    d, q, q; \
	VSUBPS    m, q, q; \
	VMOVUPS   q, off(DI)

// func dequantQ4KAVX512(dst *float32, src *byte, dm *float32, nb int)
// sets the 256·nb floats at dst to the values of the nb Q4_K blocks at src
// (144 bytes each: halves d and dmin, 12 bytes of packed scales, then 128
// of 4-bit quants, each 32 bytes holding 64 values, the first 32 in the
// low nibbles). dm holds, for each block's eight sub-blocks of 32 values,
// d·scale and dmin·min, unpacked by the caller; value = d·scale·q −
// dmin·min, multiplied then subtracted as quant.Dequantize does. nb >= 1.
TEXT ·dequantQ4KAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ dm+16(FP), R8
	MOVQ nb+24(FP), CX
	MOVL $15, AX
	VPBROADCASTD AX, Z8

blockq4k:
	ADDQ $16, SI // past d, dmin and the scales
	MOVQ $4, DX

chunkq4k:
	VBROADCASTSS (R8), Z4
	VBROADCASTSS 4(R8), Z5
	VBROADCASTSS 8(R8), Z6
	VBROADCASTSS 12(R8), Z7
	VPMOVZXBD    (SI), Z0
	VPMOVZXBD    16(SI), Z1
	VPANDD       Z8, Z0, Z2
	Q4K16(Z2, Z4, Z5, 0)
	VPANDD       Z8, Z1, Z2
	Q4K16(Z2, Z4, Z5, 64)
	VPSRLD       $4, Z0, Z2
	Q4K16(Z2, Z6, Z7, 128)
	VPSRLD       $4, Z1, Z2
	Q4K16(Z2, Z6, Z7, 192)
	ADDQ         $32, SI
	ADDQ         $256, DI
	ADDQ         $16, R8
	DECQ         DX
	JNZ          chunkq4k
	DECQ         CX
	JNZ          blockq4k
	VZEROUPPER
	RET
