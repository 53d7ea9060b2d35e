//go:build !purego

#include "textflag.h"

// Converters from weight rows to float32 for the dequantize-and-GEMM
// path; they need AVX-512F, and dequant_amd64.go calls them only when the
// CPU and OS support it. Each value is the one quant.Dequantize computes:
// a widening, for Q8_0 the single product d·q of exact factors, for Q4_K
// and Q6_K the same products and differences in the same order.

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

// func dequantQ4KAVX512(dst *float32, src *byte, nb int)
// sets the 256·nb floats at dst to the values of the nb Q4_K blocks at src
// (144 bytes each: halves d and dmin, 12 bytes of packed 6-bit scales and
// mins of the eight sub-blocks of 32 values, then 128 bytes of 4-bit
// quants, each 32 bytes holding 64 values, the first 32 in the low
// nibbles): value = (d·scale)·q − dmin·min, multiplied then subtracted as
// quant.Dequantize does. The scales and mins are unpacked with ggml's
// 32-bit masks (dequantize_row_q4_K) into bytes in the frame, then
// converted and multiplied by d and dmin sixteen at a time. nb >= 1.
TEXT ·dequantQ4KAVX512(SB), NOSPLIT, $144-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	MOVL $15, AX
	VPBROADCASTD AX, Z8

blockq4k:
	// Scales 0-3 and 4-7, then mins 0-3 and 4-7, as bytes.
	MOVL  4(SI), R10
	MOVL  8(SI), R11
	MOVL  12(SI), R12
	MOVL  R12, R13
	SHRL  $4, R13
	ANDL  $0x0f0f0f0f, R13
	MOVL  R11, AX
	SHRL  $6, AX
	ANDL  $0x03030303, AX
	SHLL  $4, AX
	ORL   AX, R13
	MOVL  R11, BX
	ANDL  $0x3f3f3f3f, BX
	ANDL  $0x0f0f0f0f, R12
	MOVL  R10, AX
	SHRL  $6, AX
	ANDL  $0x03030303, AX
	SHLL  $4, AX
	ORL   AX, R12
	ANDL  $0x3f3f3f3f, R10
	MOVL  R10, sm-144(SP)
	MOVL  R12, sm-140(SP)
	MOVL  BX, sm-136(SP)
	MOVL  R13, sm-132(SP)
	VPBROADCASTW (SI), Y11
	VCVTPH2PS    Y11, Z11
	VPBROADCASTW 2(SI), Y12
	VCVTPH2PS    Y12, Z12
	VPMOVZXBD    sm-144(SP), Z13
	VCVTDQ2PS    Z13, Z13
	VMULPS       Z11, Z13, Z14
	VMOVUPS      Z14, d-128(SP) // d·scale j at d-128+4j
	VMULPS       Z12, Z13, Z14
	VMOVUPS      Z14, m-64(SP) // dmin·min j at m-32+4j
	LEAQ         d-128(SP), R8
	ADDQ         $16, SI // past d, dmin and the scales
	MOVQ         $4, DX

chunkq4k:
	VBROADCASTSS (R8), Z4
	VBROADCASTSS 96(R8), Z5
	VBROADCASTSS 4(R8), Z6
	VBROADCASTSS 100(R8), Z7
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
	ADDQ         $8, R8
	DECQ         DX
	JNZ          chunkq4k
	DECQ         CX
	JNZ          blockq4k
	VZEROUPPER
	RET

// Q6OUT sets the 16 floats at yoff(DI) to D·(q − 32) for the 6-bit quants
// in q (clobbered), D being the float at doff(R8).
#define Q6OUT(q, doff, yoff) \
	VPSUBD       Z10, q, q; \
	VCVTDQ2PS    q, q; \
	VBROADCASTSS doff(R8), Z7; \
	VMULPS       Z7, q, q; \
	VMOVUPS      q, yoff(DI)

// Q6CHUNK dequantizes the 16 values l..l+15 of each quarter of one half of
// a Q6_K block: their low nibbles in the 16 bytes at qloff(SI) (values l
// and l+64) and qloff+32(SI) (l+32 and l+96), their top two bits in the
// bit pairs of the 16 bytes at qhoff(SI); outputs at yoff(DI) and every
// 128 bytes on, scales at doff(R8) and every 8 bytes on.
#define Q6CHUNK(qloff, qhoff, yoff, doff) \
	VPMOVZXBD qloff(SI), Z0; \
	VPMOVZXBD qloff+32(SI), Z1; \
	VPMOVZXBD qhoff(SI), Z2; \
	VPSLLD    $4, Z2, Z3; \
	VPANDD    Z9, Z3, Z3; \
	VPANDD    Z8, Z0, Z4; \
	VPORD     Z3, Z4, Z4; \
	Q6OUT(Z4, doff, yoff); \
	VPSLLD    $2, Z2, Z3; \
	VPANDD    Z9, Z3, Z3; \
	VPANDD    Z8, Z1, Z4; \
	VPORD     Z3, Z4, Z4; \
	Q6OUT(Z4, doff+8, yoff+128); \
	VPANDD    Z9, Z2, Z3; \
	VPSRLD    $4, Z0, Z4; \
	VPORD     Z3, Z4, Z4; \
	Q6OUT(Z4, doff+16, yoff+256); \
	VPSRLD    $2, Z2, Z3; \
	VPANDD    Z9, Z3, Z3; \
	VPSRLD    $4, Z1, Z4; \
	VPORD     Z3, Z4, Z4; \
	Q6OUT(Z4, doff+24, yoff+384)

// func dequantQ6KAVX512(dst *float32, src *byte, nb int)
// sets the 256·nb floats at dst to the values of the nb Q6_K blocks at src
// (210 bytes each: ql[128], qh[64], 16 int8 scales, a half d): value j =
// (d·scale[j/16])·(q − 32), multiplied in that order as quant.Dequantize
// does. The sixteen d·scale of a block wait in the frame for Q6OUT to
// broadcast. nb >= 1.
TEXT ·dequantQ6KAVX512(SB), NOSPLIT, $64-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	LEAQ ds-64(SP), R8
	MOVL $15, AX
	VPBROADCASTD AX, Z8
	MOVL $0x30, AX
	VPBROADCASTD AX, Z9
	MOVL $32, AX
	VPBROADCASTD AX, Z10

blockq6k:
	VPBROADCASTW 208(SI), Y11
	VCVTPH2PS    Y11, Z11
	VPMOVSXBD    192(SI), Z12
	VCVTDQ2PS    Z12, Z12
	VMULPS       Z12, Z11, Z12
	VMOVUPS      Z12, (R8)
	Q6CHUNK(0, 128, 0, 0)
	Q6CHUNK(16, 144, 64, 4)
	Q6CHUNK(64, 160, 512, 32)
	Q6CHUNK(80, 176, 576, 36)
	ADDQ $210, SI
	ADDQ $1024, DI
	DECQ CX
	JNZ  blockq6k
	VZEROUPPER
	RET
