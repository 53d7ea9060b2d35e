//go:build !purego

#include "textflag.h"

// The kernels below need AVX-512F; simd_amd64.go calls them only when the
// CPU has it and the OS saves the ZMM and opmask registers. They compute
// tiles of c = a·bᵀ as dot products along k, both operands k-contiguous:
// each accumulator holds 16 partial sums of one output, reduced to a float
// once k is done. Lengths are in float32 elements, leading dimensions in
// elements. kmask has the low k%16 bits set (the lanes of the last,
// partial block of k; 0 when k is a multiple of 16); cmask has a bit for
// each of the six columns of the tile to store; amask has the bits of
// cmask where the kernel adds its sums to c (a later block of k) rather
// than overwriting it, none to overwrite.

// The order of the six sums of a row after REDUCE6, as lanes of its
// register: VPERMPS gathers them into lanes 0 to 5.
DATA reduce6perm<>+0(SB)/4, $0
DATA reduce6perm<>+4(SB)/4, $4
DATA reduce6perm<>+8(SB)/4, $8
DATA reduce6perm<>+12(SB)/4, $12
DATA reduce6perm<>+16(SB)/4, $1
DATA reduce6perm<>+20(SB)/4, $5
DATA reduce6perm<>+24(SB)/4, $0
DATA reduce6perm<>+28(SB)/4, $0
DATA reduce6perm<>+32(SB)/4, $0
DATA reduce6perm<>+36(SB)/4, $0
DATA reduce6perm<>+40(SB)/4, $0
DATA reduce6perm<>+44(SB)/4, $0
DATA reduce6perm<>+48(SB)/4, $0
DATA reduce6perm<>+52(SB)/4, $0
DATA reduce6perm<>+56(SB)/4, $0
DATA reduce6perm<>+60(SB)/4, $0
GLOBL reduce6perm<>(SB), RODATA|NOPTR, $64

// COL4 loads 16 floats of one b row (those of mask km, the others zero)
// into bz and adds their products with the four a blocks in Z24-Z27 to
// the column's four accumulators.
#define COL4(ptr, off, km, bz, c0, c1, c2, c3) \
	VMOVUPS.Z off(ptr)(AX*1), km, bz; \
	VFMADD231PS bz, Z24, c0; \
	VFMADD231PS bz, Z25, c1; \
	VFMADD231PS bz, Z26, c2; \
	VFMADD231PS bz, Z27, c3

// STEP4x6 adds the products of the 16 floats of k at byte AX+off (those
// of mask km) to the 4×6 accumulators: row i, column j in Z(6i+j). The a
// rows are at SI, DI, R8, R9; the b rows at R10-R13, CX, DX.
#define STEP4x6(off, km) \
	VMOVUPS.Z off(SI)(AX*1), km, Z24; \
	VMOVUPS.Z off(DI)(AX*1), km, Z25; \
	VMOVUPS.Z off(R8)(AX*1), km, Z26; \
	VMOVUPS.Z off(R9)(AX*1), km, Z27; \
	COL4(R10, off, km, Z28, Z0, Z6, Z12, Z18); \
	COL4(R11, off, km, Z29, Z1, Z7, Z13, Z19); \
	COL4(R12, off, km, Z30, Z2, Z8, Z14, Z20); \
	COL4(R13, off, km, Z31, Z3, Z9, Z15, Z21); \
	COL4(CX, off, km, Z28, Z4, Z10, Z16, Z22); \
	COL4(DX, off, km, Z29, Z5, Z11, Z17, Z23)

// STEP1x6 is STEP4x6 for one a row (at SI) into the accumulators
// c0-c5.
#define STEP1x6(off, km, c0, c1, c2, c3, c4, c5) \
	VMOVUPS.Z off(SI)(AX*1), km, Z24; \
	VMOVUPS.Z off(R10)(AX*1), km, Z26; \
	VFMADD231PS Z26, Z24, c0; \
	VMOVUPS.Z off(R11)(AX*1), km, Z27; \
	VFMADD231PS Z27, Z24, c1; \
	VMOVUPS.Z off(R12)(AX*1), km, Z28; \
	VFMADD231PS Z28, Z24, c2; \
	VMOVUPS.Z off(R13)(AX*1), km, Z29; \
	VFMADD231PS Z29, Z24, c3; \
	VMOVUPS.Z off(CX)(AX*1), km, Z30; \
	VFMADD231PS Z30, Z24, c4; \
	VMOVUPS.Z off(DX)(AX*1), km, Z31; \
	VFMADD231PS Z31, Z24, c5

// FOLD2 sets x to the sums of the halves of each (whole, or 128-bit lane
// pair, as picked by lo and hi) of x and y, packed: with lo 0x44 and hi
// 0xEE, x becomes [x.lo+x.hi, y.lo+y.hi] in 256-bit halves; with lo 0x88
// and hi 0xDD, it becomes the sums of adjacent 128-bit lanes of x, then
// of y. It clobbers t.
#define FOLD2(lo, hi, y, x, t) \
	VSHUFF64X2 lo, y, x, t; \
	VSHUFF64X2 hi, y, x, x; \
	VADDPS t, x, x

// REDUCE6 stores the sums of the 16 lanes of each of v0-v5 as six
// consecutive floats at dst, those of mask km, plus the floats there of
// mask ka: a transpose-style tree that halves the lanes per sum while
// doubling the sums per register. perm holds reduce6perm; it clobbers
// v0-v5 and t.
#define REDUCE6(v0, v1, v2, v3, v4, v5, t, perm, km, ka, dst) \
	FOLD2($0x44, $0xEE, v1, v0, t); \
	FOLD2($0x44, $0xEE, v3, v2, t); \
	FOLD2($0x44, $0xEE, v5, v4, t); \
	FOLD2($0x88, $0xDD, v2, v0, t); \
	FOLD2($0x88, $0xDD, v4, v4, t); \
	VUNPCKLPS v4, v0, t; \
	VUNPCKHPS v4, v0, v0; \
	VADDPS t, v0, v0; \
	VPERMILPS $0x4E, v0, t; \
	VADDPS t, v0, v0; \
	VPERMPS v0, perm, v0; \
	VMOVUPS.Z dst, ka, t; \
	VADDPS t, v0, v0; \
	VMOVUPS v0, km, dst

// ZERO6 clears six accumulators.
#define ZERO6(v0, v1, v2, v3, v4, v5) \
	VPXORD v0, v0, v0; \
	VPXORD v1, v1, v1; \
	VPXORD v2, v2, v2; \
	VPXORD v3, v3, v3; \
	VPXORD v4, v4, v4; \
	VPXORD v5, v5, v5

// BROWS6 points R10-R13, CX and DX at six b rows from b, ldb elements
// apart; it clobbers BX.
#define BROWS6 \
	MOVQ b+16(FP), R10; \
	MOVQ ldb+24(FP), BX; \
	SHLQ $2, BX; \
	LEAQ (R10)(BX*1), R11; \
	LEAQ (R11)(BX*1), R12; \
	LEAQ (R12)(BX*1), R13; \
	LEAQ (R13)(BX*1), CX; \
	LEAQ (CX)(BX*1), DX

// KMASKS sets K1 to all 16 lanes, K2 to kmask and BX to the bytes of the
// whole blocks of k.
#define KMASKS \
	MOVL $0xffff, BX; \
	KMOVW BX, K1; \
	KMOVW kmask+56(FP), K2; \
	MOVQ k+32(FP), BX; \
	ANDQ $-16, BX; \
	SHLQ $2, BX

// func gemm4x6AVX512(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, kmask, cmask, amask uint16)
// sets c[i*ldc+j] (adds to it, where amask says) the sum over p < k of
// a[i*lda+p]*b[j*ldb+p] for i < 4 and the columns j < 6 that cmask names.
TEXT ·gemm4x6AVX512(SB), NOSPLIT, $0-62
	MOVQ a+0(FP), SI
	MOVQ lda+8(FP), BX
	SHLQ $2, BX
	LEAQ (SI)(BX*1), DI
	LEAQ (DI)(BX*1), R8
	LEAQ (R8)(BX*1), R9
	BROWS6
	KMASKS
	ZERO6(Z0, Z1, Z2, Z3, Z4, Z5)
	ZERO6(Z6, Z7, Z8, Z9, Z10, Z11)
	ZERO6(Z12, Z13, Z14, Z15, Z16, Z17)
	ZERO6(Z18, Z19, Z20, Z21, Z22, Z23)
	XORQ AX, AX
	JMP  test4x6

loop4x6:
	STEP4x6(0, K1)
	ADDQ $64, AX

test4x6:
	CMPQ AX, BX
	JB   loop4x6
	KORTESTW K2, K2
	JZ   sum4x6
	STEP4x6(0, K2)

sum4x6:
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), CX
	SHLQ $2, CX
	KMOVW cmask+58(FP), K3
	KMOVW amask+60(FP), K4
	VMOVUPS reduce6perm<>(SB), Z31
	REDUCE6(Z0, Z1, Z2, Z3, Z4, Z5, Z24, Z31, K3, K4, (DX))
	ADDQ CX, DX
	REDUCE6(Z6, Z7, Z8, Z9, Z10, Z11, Z24, Z31, K3, K4, (DX))
	ADDQ CX, DX
	REDUCE6(Z12, Z13, Z14, Z15, Z16, Z17, Z24, Z31, K3, K4, (DX))
	ADDQ CX, DX
	REDUCE6(Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z31, K3, K4, (DX))
	VZEROUPPER
	RET

// func gemm1x6AVX512(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, kmask, cmask, amask uint16)
// sets c[j] (adds to it, where amask says) the sum over p < k of
// a[p]*b[j*ldb+p] for the columns j < 6 that cmask names (lda and ldc are
// unused: the arguments are those of gemm4x6AVX512). It alternates two
// sets of accumulators over blocks of k so a matrix-vector product is not
// bound by FMA latency.
TEXT ·gemm1x6AVX512(SB), NOSPLIT, $0-62
	MOVQ a+0(FP), SI
	BROWS6
	KMASKS
	ZERO6(Z0, Z1, Z2, Z3, Z4, Z5)
	ZERO6(Z6, Z7, Z8, Z9, Z10, Z11)
	MOVQ BX, DI
	ANDQ $-128, DI
	XORQ AX, AX
	JMP  test1x6by32

loop1x6by32:
	STEP1x6(0, K1, Z0, Z1, Z2, Z3, Z4, Z5)
	STEP1x6(64, K1, Z6, Z7, Z8, Z9, Z10, Z11)
	ADDQ $128, AX

test1x6by32:
	CMPQ AX, DI
	JB   loop1x6by32
	CMPQ AX, BX
	JAE  tail1x6
	STEP1x6(0, K1, Z0, Z1, Z2, Z3, Z4, Z5)
	ADDQ $64, AX

tail1x6:
	KORTESTW K2, K2
	JZ   sum1x6
	STEP1x6(0, K2, Z6, Z7, Z8, Z9, Z10, Z11)

sum1x6:
	VADDPS Z6, Z0, Z0
	VADDPS Z7, Z1, Z1
	VADDPS Z8, Z2, Z2
	VADDPS Z9, Z3, Z3
	VADDPS Z10, Z4, Z4
	VADDPS Z11, Z5, Z5
	MOVQ c+40(FP), DX
	KMOVW cmask+58(FP), K3
	KMOVW amask+60(FP), K4
	VMOVUPS reduce6perm<>(SB), Z31
	REDUCE6(Z0, Z1, Z2, Z3, Z4, Z5, Z24, Z31, K3, K4, (DX))
	VZEROUPPER
	RET
