//go:build amd64 && !purego

#include "textflag.h"

// The packed Q8_0 kernels (AVX-512 VNNI) multiply groups of 16 weight
// rows, laid out by PackQ8_0, by R activation rows (R = 1, 4 or 8) laid
// out block-major by packActs: block b of row r at a+32(b·rows+r), its
// scale at ad[b·rows+r] and its offset term −128·Σq at ac[b·rows+r]. One
// zmm lane per weight row: each block's integer sums are exact in int32
// (VPDPBUSD of the weights, stored +128 as unsigned bytes, with four
// activation bytes broadcast to the 16 rows), then one conversion, one
// product of the 16 rows' scales by the activation's and one FMA per
// block and activation row, the same operations in the same order at
// every R, so a row's results are the same bits in any batch.

// P16LOAD loads a packed block of 16 rows at SI: the rows' scales into
// Z0, their quants (+128), four bytes a row at a time, into Z1-Z8.
#define P16LOAD \
	VMOVUPS   (SI), Z0; \
	VMOVDQU64 64(SI), Z1; \
	VMOVDQU64 128(SI), Z2; \
	VMOVDQU64 192(SI), Z3; \
	VMOVDQU64 256(SI), Z4; \
	VMOVDQU64 320(SI), Z5; \
	VMOVDQU64 384(SI), Z6; \
	VMOVDQU64 448(SI), Z7; \
	VMOVDQU64 512(SI), Z8

// P16ROW adds the loaded block times activation row r of the call's
// block (quants at DI+32r, scale at DX+4r, offset term at BX+4r) to acc.
// Clobbers Z9, Z10.
#define P16ROW(r, acc) \
	VPBROADCASTD  (4*r)(BX), Z9; \
	VPDPBUSD.BCST (32*r)(DI), Z1, Z9; \
	VPDPBUSD.BCST (32*r+4)(DI), Z2, Z9; \
	VPDPBUSD.BCST (32*r+8)(DI), Z3, Z9; \
	VPDPBUSD.BCST (32*r+12)(DI), Z4, Z9; \
	VPDPBUSD.BCST (32*r+16)(DI), Z5, Z9; \
	VPDPBUSD.BCST (32*r+20)(DI), Z6, Z9; \
	VPDPBUSD.BCST (32*r+24)(DI), Z7, Z9; \
	VPDPBUSD.BCST (32*r+28)(DI), Z8, Z9; \
	VCVTDQ2PS     Z9, Z9; \
	VMULPS.BCST   (4*r)(DX), Z0, Z10; \
	VFMADD231PS   Z9, Z10, acc

// P16ZERO1, 4 and 8 clear the sums of 1, 4 or 8 activation rows.
#define P16ZERO1 VPXORD Z16, Z16, Z16

#define P16ZERO4 \
	P16ZERO1; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19

#define P16ZERO8 \
	P16ZERO4; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23

#define P16ROWS1 P16ROW(0, Z16)

#define P16ROWS4 \
	P16ROW(0, Z16); \
	P16ROW(1, Z17); \
	P16ROW(2, Z18); \
	P16ROW(3, Z19)

#define P16ROWS8 \
	P16ROWS4; \
	P16ROW(4, Z20); \
	P16ROW(5, Z21); \
	P16ROW(6, Z22); \
	P16ROW(7, Z23)

// P16STORE1, 4 and 8 store the sums of 1, 4 or 8 activation rows at R13,
// a row's R8 bytes after the one before (R9 = 3·R8).
#define P16STORE1 VMOVUPS Z16, (R13)

#define P16STORE4 \
	VMOVUPS Z16, (R13); \
	VMOVUPS Z17, (R13)(R8*1); \
	VMOVUPS Z18, (R13)(R8*2); \
	VMOVUPS Z19, (R13)(R9*1)

#define P16STORE8 \
	P16STORE4; \
	LEAQ    (R13)(R8*4), AX; \
	VMOVUPS Z20, (AX); \
	VMOVUPS Z21, (AX)(R8*1); \
	VMOVUPS Z22, (AX)(R8*2); \
	VMOVUPS Z23, (AX)(R9*1)

// P16KERNEL is the body of func(w *byte, a *int8, ad *float32, ac *int32,
// nb, ng, rows int, dst *float32, dstStride int): ng groups of 16 weight
// rows of nb blocks each, packed, times R activation rows (ZERO, ROWS,
// STORE) of a block-major batch of rows rows, into dst[r·dstStride+o] for
// r < R and o < 16·ng.
#define P16KERNEL(ZERO, ROWS, STORE) \
	MOVQ   w+0(FP), SI; \
	MOVQ   ng+40(FP), R12; \
	MOVQ   dst+56(FP), R13; \
	MOVQ   dstStride+64(FP), R8; \
	SHLQ   $2, R8; \
	LEAQ   (R8)(R8*2), R9; \
	MOVQ   rows+48(FP), R10; \
	LEAQ   (R10*4), R11; \
	SHLQ   $5, R10; \
group: \
	MOVQ   a+8(FP), DI; \
	MOVQ   ad+16(FP), DX; \
	MOVQ   ac+24(FP), BX; \
	MOVQ   nb+32(FP), CX; \
	ZERO; \
block: \
	P16LOAD; \
	ROWS; \
	ADDQ   $576, SI; \
	ADDQ   R10, DI; \
	ADDQ   R11, DX; \
	ADDQ   R11, BX; \
	DECQ   CX; \
	JNZ    block; \
	STORE; \
	ADDQ   $64, R13; \
	DECQ   R12; \
	JNZ    group; \
	VZEROUPPER

// func dotQ8_0P16x1AVX512(w *byte, a *int8, ad *float32, ac *int32, nb, ng, rows int, dst *float32, dstStride int)
TEXT ·dotQ8_0P16x1AVX512(SB), NOSPLIT, $0-72
	P16KERNEL(P16ZERO1, P16ROWS1, P16STORE1)
	RET

// func dotQ8_0P16x4AVX512(w *byte, a *int8, ad *float32, ac *int32, nb, ng, rows int, dst *float32, dstStride int)
TEXT ·dotQ8_0P16x4AVX512(SB), NOSPLIT, $0-72
	P16KERNEL(P16ZERO4, P16ROWS4, P16STORE4)
	RET

// func dotQ8_0P16x8AVX512(w *byte, a *int8, ad *float32, ac *int32, nb, ng, rows int, dst *float32, dstStride int)
TEXT ·dotQ8_0P16x8AVX512(SB), NOSPLIT, $0-72
	P16KERNEL(P16ZERO8, P16ROWS8, P16STORE8)
	RET
