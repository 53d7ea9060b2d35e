//go:build !purego

#include "textflag.h"

// The kernels below need AVX-512F;
// gemm512_amd64.go calls them only when the CPU has it and the OS saves
// the ZMM and opmask registers. They compute tiles of c = a·bᵀ as dot
// products along k, both operands k-contiguous: each accumulator holds
// 16 partial sums of one output, reduced to a float once k is done. k
// and the leading dimensions of a and c are in float32 elements, ldb in
// bytes (b's rows hold F32, F16 or BF16 values). kmask has
// the low k%16 bits set (the lanes of the last, partial step of k; 0
// when k is a multiple of 16); cmask has a bit for each of the six
// columns of the tile to store; amask has the bits of cmask where the
// kernel adds its sums to c (a later block of k) rather than overwriting
// it, none to overwrite.
//
// The loops go over groups of 32 values of k in two steps of 16 values
// (halves h = 0 and 1); a k that is not whole groups ends with a step of
// 16 and a masked one.

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

// Each type of b has a load macro: LOADx(h, mem, km, bz) loads half h of
// the group of 32 values at mem, the values of mask km (the others zero),
// into bz as float32: b's own floats, or F16 and BF16 converted exactly,
// so a kernel on such weights computes bit for bit what it computes on
// their float32 values. A masked load reads nothing outside its mask
// (EVEX fault suppression), so a row may end at the end of a mapping.
// GBF32 and GBHALF (F16 and BF16) are the bytes of a group of 32 values
// of b.
#define LOADF32(h, mem, km, bz) VMOVUPS.Z (64*h)mem, km, bz
#define LOADF16(h, mem, km, bz) VCVTPH2PS.Z (32*h)mem, km, bz
#define LOADBF16(h, mem, km, bz) VPMOVZXWD.Z (32*h)mem, km, bz; VPSLLD $16, bz, bz
#define GBF32 128
#define GBHALF 64

// BROWS6 points R10-R13, CX and DX at six b rows from b, ldb bytes
// apart; it clobbers BX.
#define BROWS6 \
	MOVQ b+16(FP), R10; \
	MOVQ ldb+24(FP), BX; \
	LEAQ (R10)(BX*1), R11; \
	LEAQ (R11)(BX*1), R12; \
	LEAQ (R12)(BX*1), R13; \
	LEAQ (R13)(BX*1), CX; \
	LEAQ (CX)(BX*1), DX

// KMASKS sets K1 to all 16 lanes, K2 to kmask and BX to b's bytes of
// the whole groups of k, GB each.
#define KMASKS(GB) \
	MOVL $0xffff, BX; \
	KMOVW BX, K1; \
	KMOVW kmask+56(FP), K2; \
	MOVQ k+32(FP), BX; \
	SHRQ $5, BX; \
	IMUL3Q $GB, BX, BX

// COL4 loads half h of one b row's group (the values of mask km) into
// bz and adds their products with the four a blocks in Z24-Z27 to the
// column's four accumulators.
#define COL4(LOADB, h, ptr, km, bz, c0, c1, c2, c3) \
	LOADB(h, (ptr)(AX*1), km, bz); \
	VFMADD231PS bz, Z24, c0; \
	VFMADD231PS bz, Z25, c1; \
	VFMADD231PS bz, Z26, c2; \
	VFMADD231PS bz, Z27, c3

// STEP4x6 adds the products of half h of the group of k at a's SI and
// b's byte AX (the values of mask km) to the 4×6 accumulators: row i,
// column j in Z(6i+j). The a rows are at SI plus 0, 1, 2 times DI and R8
// (3·lda's bytes); the b rows at R10-R13, CX, DX.
#define STEP4x6(LOADB, h, km) \
	VMOVUPS.Z (64*h)(SI), km, Z24; \
	VMOVUPS.Z (64*h)(SI)(DI*1), km, Z25; \
	VMOVUPS.Z (64*h)(SI)(DI*2), km, Z26; \
	VMOVUPS.Z (64*h)(SI)(R8*1), km, Z27; \
	COL4(LOADB, h, R10, km, Z28, Z0, Z6, Z12, Z18); \
	COL4(LOADB, h, R11, km, Z29, Z1, Z7, Z13, Z19); \
	COL4(LOADB, h, R12, km, Z30, Z2, Z8, Z14, Z20); \
	COL4(LOADB, h, R13, km, Z28, Z3, Z9, Z15, Z21); \
	COL4(LOADB, h, CX, km, Z29, Z4, Z10, Z16, Z22); \
	COL4(LOADB, h, DX, km, Z30, Z5, Z11, Z17, Z23)

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

// PFROWS6 asks for the lines off bytes on from R14's in the six b rows
// to be brought into cache.
#define PFROWS6(off) \
	PREFETCHT0 off(R10)(R14*1); \
	PREFETCHT0 off(R11)(R14*1); \
	PREFETCHT0 off(R12)(R14*1); \
	PREFETCHT0 off(R13)(R14*1); \
	PREFETCHT0 off(CX)(R14*1); \
	PREFETCHT0 off(DX)(R14*1)

// PFSTEP4x6 is STEP4x6 over all 16 values of half h, prefetching first
// (the lines off bytes on from those at R14) if R15 counts down to 0,
// then restarting R15 at pfevery.
#define PFSTEP4x6(LOADB, h, off, skip) \
	DECQ R15; \
	JNZ  skip; \
	PFROWS6(off); \
	MOVQ pfevery+72(FP), R15; \
skip: \
	STEP4x6(LOADB, h, K1)

// GEMM4x6 is the body of gemm4x6AVX512 and its twins for other types of
// b: a loop over k that prefetches, R14 being the byte offset of the
// lines to prefetch (pfdist on from AX) and R15 counting down the steps
// to the next prefetching one, or one that does not when pfevery is 0.
#define GEMM4x6(LOADB, GB) \
	MOVQ a+0(FP), SI; \
	MOVQ lda+8(FP), DI; \
	SHLQ $2, DI; \
	LEAQ (DI)(DI*2), R8; \
	BROWS6; \
	KMASKS(GB); \
	ZERO6(Z0, Z1, Z2, Z3, Z4, Z5); \
	ZERO6(Z6, Z7, Z8, Z9, Z10, Z11); \
	ZERO6(Z12, Z13, Z14, Z15, Z16, Z17); \
	ZERO6(Z18, Z19, Z20, Z21, Z22, Z23); \
	XORQ AX, AX; \
	CMPQ pfevery+72(FP), $0; \
	JNE  prefetch4x6; \
	JMP  test4x6; \
	PCALIGN $64; \
loop4x6: \
	STEP4x6(LOADB, 0, K1); \
	STEP4x6(LOADB, 1, K1); \
	ADDQ $128, SI; \
	ADDQ $GB, AX; \
test4x6: \
	CMPQ AX, BX; \
	JB   loop4x6; \
half4x6: \
	MOVQ  k+32(FP), R9; \
	TESTQ $16, R9; \
	JZ    tail4x6; \
	STEP4x6(LOADB, 0, K1); \
	ADDQ $64, SI; \
	ADDQ $(GB/2), AX; \
tail4x6: \
	KORTESTW K2, K2; \
	JZ   sum4x6; \
	STEP4x6(LOADB, 0, K2); \
sum4x6: \
	MOVQ c+40(FP), DX; \
	MOVQ ldc+48(FP), CX; \
	SHLQ $2, CX; \
	KMOVW cmask+58(FP), K3; \
	KMOVW amask+60(FP), K4; \
	VMOVUPS reduce6perm<>(SB), Z31; \
	REDUCE6(Z0, Z1, Z2, Z3, Z4, Z5, Z24, Z31, K3, K4, (DX)); \
	ADDQ CX, DX; \
	REDUCE6(Z6, Z7, Z8, Z9, Z10, Z11, Z24, Z31, K3, K4, (DX)); \
	ADDQ CX, DX; \
	REDUCE6(Z12, Z13, Z14, Z15, Z16, Z17, Z24, Z31, K3, K4, (DX)); \
	ADDQ CX, DX; \
	REDUCE6(Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z31, K3, K4, (DX)); \
	VZEROUPPER; \
	RET; \
prefetch4x6: \
	MOVQ pfdist+64(FP), R14; \
	MOVQ pfphase+80(FP), R15; \
	INCQ R15; \
	JMP  testpf4x6; \
	PCALIGN $64; \
looppf4x6: \
	PFSTEP4x6(LOADB, 0, 0, pf0of4x6); \
	PFSTEP4x6(LOADB, 1, (GB/2), pf1of4x6); \
	ADDQ $128, SI; \
	ADDQ $GB, R14; \
	ADDQ $GB, AX; \
testpf4x6: \
	CMPQ AX, BX; \
	JB   looppf4x6; \
	JMP  half4x6

// func gemm4x6AVX512(a *float32, lda int, b unsafe.Pointer, ldb int, k int, c *float32, ldc int, kmask, cmask, amask uint16, pfdist, pfevery, pfphase int)
// sets c[i*ldc+j] (adds to it, where amask says) the sum over p < k of
// a[i*lda+p]*b[j][p] for i < 4 and the columns j < 6 that cmask names,
// b's rows being float32, ldb bytes apart; gemm4x6F16AVX512 and
// gemm4x6BF16AVX512 do the same for b of F16 and BF16 values. Along the
// way it prefetches, unless pfevery is 0: at the steps s of 16 values of
// k (s < k/16) with s = pfphase modulo pfevery, the lines pfdist bytes on
// from those step s loads from each b row.
TEXT ·gemm4x6AVX512(SB), NOSPLIT, $0-88
	GEMM4x6(LOADF32, GBF32)

TEXT ·gemm4x6F16AVX512(SB), NOSPLIT, $0-88
	GEMM4x6(LOADF16, GBHALF)

TEXT ·gemm4x6BF16AVX512(SB), NOSPLIT, $0-88
	GEMM4x6(LOADBF16, GBHALF)

// GROW1x6 adds the products of a whole group of the b row at ptr (byte
// AX on) with a's halves in Z24 and Z25 to c (half 0) and d (half 1),
// through bz and bw.
#define GROW1x6(LOADB, ptr, bz, bw, c, d) \
	LOADB(0, (ptr)(AX*1), K1, bz); \
	VFMADD231PS bz, Z24, c; \
	LOADB(1, (ptr)(AX*1), K1, bw); \
	VFMADD231PS bw, Z25, d

// SROW1x6 adds the products of half 0 of the group of the b row at ptr
// (the values of mask km) with a's in Z24 to c, through bz.
#define SROW1x6(LOADB, ptr, km, bz, c) \
	LOADB(0, (ptr)(AX*1), km, bz); \
	VFMADD231PS bz, Z24, c

// GROUP1x6 adds the products of the group of k at a's SI and b's byte
// AX, half 0 to Z0-Z5, half 1 to Z6-Z11: two sets of accumulators, so a
// matrix-vector product is not bound by FMA latency.
#define GROUP1x6(LOADB) \
	VMOVUPS (SI), Z24; \
	VMOVUPS 64(SI), Z25; \
	GROW1x6(LOADB, R10, Z26, Z27, Z0, Z6); \
	GROW1x6(LOADB, R11, Z28, Z29, Z1, Z7); \
	GROW1x6(LOADB, R12, Z30, Z26, Z2, Z8); \
	GROW1x6(LOADB, R13, Z27, Z28, Z3, Z9); \
	GROW1x6(LOADB, CX, Z29, Z30, Z4, Z10); \
	GROW1x6(LOADB, DX, Z26, Z27, Z5, Z11)

// STEP1x6 adds the products of the first half of the group there (the
// values of mask km) to c0-c5.
#define STEP1x6(LOADB, km, c0, c1, c2, c3, c4, c5) \
	VMOVUPS.Z (SI), km, Z24; \
	SROW1x6(LOADB, R10, km, Z26, c0); \
	SROW1x6(LOADB, R11, km, Z27, c1); \
	SROW1x6(LOADB, R12, km, Z28, c2); \
	SROW1x6(LOADB, R13, km, Z29, c3); \
	SROW1x6(LOADB, CX, km, Z30, c4); \
	SROW1x6(LOADB, DX, km, Z26, c5)

// GEMM1x6 is the body of gemm1x6AVX512 and its twins for other types of
// b.
#define GEMM1x6(LOADB, GB) \
	MOVQ a+0(FP), SI; \
	BROWS6; \
	KMASKS(GB); \
	ZERO6(Z0, Z1, Z2, Z3, Z4, Z5); \
	ZERO6(Z6, Z7, Z8, Z9, Z10, Z11); \
	XORQ AX, AX; \
	JMP  test1x6; \
	PCALIGN $64; \
loop1x6: \
	GROUP1x6(LOADB); \
	ADDQ $128, SI; \
	ADDQ $GB, AX; \
test1x6: \
	CMPQ AX, BX; \
	JB   loop1x6; \
	MOVQ  k+32(FP), R9; \
	TESTQ $16, R9; \
	JZ    tail1x6; \
	STEP1x6(LOADB, K1, Z0, Z1, Z2, Z3, Z4, Z5); \
	ADDQ $64, SI; \
	ADDQ $(GB/2), AX; \
tail1x6: \
	KORTESTW K2, K2; \
	JZ   sum1x6; \
	STEP1x6(LOADB, K2, Z6, Z7, Z8, Z9, Z10, Z11); \
sum1x6: \
	VADDPS Z6, Z0, Z0; \
	VADDPS Z7, Z1, Z1; \
	VADDPS Z8, Z2, Z2; \
	VADDPS Z9, Z3, Z3; \
	VADDPS Z10, Z4, Z4; \
	VADDPS Z11, Z5, Z5; \
	MOVQ c+40(FP), DX; \
	KMOVW cmask+58(FP), K3; \
	KMOVW amask+60(FP), K4; \
	VMOVUPS reduce6perm<>(SB), Z31; \
	REDUCE6(Z0, Z1, Z2, Z3, Z4, Z5, Z24, Z31, K3, K4, (DX)); \
	VZEROUPPER; \
	RET

// func gemm1x6AVX512(a *float32, lda int, b unsafe.Pointer, ldb int, k int, c *float32, ldc int, kmask, cmask, amask uint16)
// sets c[j] (adds to it, where amask says) the sum over p < k of
// a[p]*b[j][p] for the columns j < 6 that cmask names (lda and ldc are
// unused: the arguments are those of gemm4x6AVX512), b's rows being
// float32, ldb bytes apart; gemm1x6F16AVX512 and gemm1x6BF16AVX512 do
// the same for F16 and BF16.
TEXT ·gemm1x6AVX512(SB), NOSPLIT, $0-62
	GEMM1x6(LOADF32, GBF32)

TEXT ·gemm1x6F16AVX512(SB), NOSPLIT, $0-62
	GEMM1x6(LOADF16, GBHALF)

TEXT ·gemm1x6BF16AVX512(SB), NOSPLIT, $0-62
	GEMM1x6(LOADBF16, GBHALF)

// The order of the sixteen sums after REDUCE16: VPERMPS gathers them.
DATA reduce16perm<>+0(SB)/4, $0
DATA reduce16perm<>+4(SB)/4, $4
DATA reduce16perm<>+8(SB)/4, $8
DATA reduce16perm<>+12(SB)/4, $12
DATA reduce16perm<>+16(SB)/4, $1
DATA reduce16perm<>+20(SB)/4, $5
DATA reduce16perm<>+24(SB)/4, $9
DATA reduce16perm<>+28(SB)/4, $13
DATA reduce16perm<>+32(SB)/4, $2
DATA reduce16perm<>+36(SB)/4, $6
DATA reduce16perm<>+40(SB)/4, $10
DATA reduce16perm<>+44(SB)/4, $14
DATA reduce16perm<>+48(SB)/4, $3
DATA reduce16perm<>+52(SB)/4, $7
DATA reduce16perm<>+56(SB)/4, $11
DATA reduce16perm<>+60(SB)/4, $15
GLOBL reduce16perm<>(SB), RODATA|NOPTR, $64

// QUAD4 folds four registers of 16 partial sums each into x0, lane group
// q (128 bits) holding four partial sums of xq.
#define QUAD4(x0, x1, x2, x3, t) \
	FOLD2($0x44, $0xEE, x1, x0, t); \
	FOLD2($0x44, $0xEE, x3, x2, t); \
	FOLD2($0x88, $0xDD, x2, x0, t)

// ROWS16 applies ROW to each of the sixteen b rows and its accumulator:
// the rows are at R10, R12, R13, DI, R8 and R9 plus 0, 1, 2, 4 or 8
// times R11 (ldb).
#define ROWS16(ROW, LOADB, km) \
	ROW(LOADB, (R10), km, Z0); \
	ROW(LOADB, (R10)(R11*1), km, Z1); \
	ROW(LOADB, (R10)(R11*2), km, Z2); \
	ROW(LOADB, (R12), km, Z3); \
	ROW(LOADB, (R10)(R11*4), km, Z4); \
	ROW(LOADB, (R12)(R11*2), km, Z5); \
	ROW(LOADB, (R13), km, Z6); \
	ROW(LOADB, (R12)(R11*4), km, Z7); \
	ROW(LOADB, (R10)(R11*8), km, Z8); \
	ROW(LOADB, (DI), km, Z9); \
	ROW(LOADB, (R13)(R11*4), km, Z10); \
	ROW(LOADB, (R12)(R11*8), km, Z11); \
	ROW(LOADB, (R8), km, Z12); \
	ROW(LOADB, (DI)(R11*4), km, Z13); \
	ROW(LOADB, (R13)(R11*8), km, Z14); \
	ROW(LOADB, (R9), km, Z15)

// GROW1x16 adds the products of the b row's group at mem with a's halves
// in Z16 and Z18 to acc (km is all lanes).
#define GROW1x16(LOADB, mem, km, acc) \
	LOADB(0, mem, km, Z17); \
	VFMADD231PS Z17, Z16, acc; \
	LOADB(1, mem, km, Z19); \
	VFMADD231PS Z19, Z18, acc

// SROW1x16 adds the products of half 0 of the b row's group at mem (the
// values of mask km) with a's in Z16 to acc.
#define SROW1x16(LOADB, mem, km, acc) \
	LOADB(0, mem, km, Z17); \
	VFMADD231PS Z17, Z16, acc

// NEXT1x16 moves a's pointer on by ab bytes and the b rows' by bb.
#define NEXT1x16(ab, bb) \
	ADDQ $ab, SI; \
	ADDQ $bb, R10; \
	ADDQ $bb, R12; \
	ADDQ $bb, R13; \
	ADDQ $bb, DI; \
	ADDQ $bb, R8; \
	ADDQ $bb, R9

// GEMM1x16 is the body of gemm1x16AVX512 and its twins for other types
// of b. R10, R12, R13, DI, R8 and R9 point at b rows 0, 3, 6, 9, 12 and
// 15, and move on with SI.
#define GEMM1x16(LOADB, GB) \
	MOVQ a+0(FP), SI; \
	MOVQ b+8(FP), R10; \
	MOVQ ldb+16(FP), R11; \
	LEAQ (R11)(R11*2), AX; \
	LEAQ (R10)(AX*1), R12; \
	LEAQ (R12)(AX*1), R13; \
	LEAQ (R13)(AX*1), DI; \
	LEAQ (DI)(AX*1), R8; \
	LEAQ (R8)(AX*1), R9; \
	MOVL $0xffff, AX; \
	KMOVW AX, K1; \
	KMOVW kmask+40(FP), K2; \
	MOVQ k+24(FP), CX; \
	SHRQ $5, CX; \
	VPXORD Z0, Z0, Z0; \
	VMOVAPS Z0, Z1; \
	VMOVAPS Z0, Z2; \
	VMOVAPS Z0, Z3; \
	VMOVAPS Z0, Z4; \
	VMOVAPS Z0, Z5; \
	VMOVAPS Z0, Z6; \
	VMOVAPS Z0, Z7; \
	VMOVAPS Z0, Z8; \
	VMOVAPS Z0, Z9; \
	VMOVAPS Z0, Z10; \
	VMOVAPS Z0, Z11; \
	VMOVAPS Z0, Z12; \
	VMOVAPS Z0, Z13; \
	VMOVAPS Z0, Z14; \
	VMOVAPS Z0, Z15; \
	JMP   test1x16; \
	PCALIGN $64; \
loop1x16: \
	VMOVUPS (SI), Z16; \
	VMOVUPS 64(SI), Z18; \
	ROWS16(GROW1x16, LOADB, K1); \
	NEXT1x16(128, GB); \
	DECQ CX; \
test1x16: \
	TESTQ CX, CX; \
	JNZ   loop1x16; \
	MOVQ  k+24(FP), CX; \
	TESTQ $16, CX; \
	JZ    tail1x16; \
	VMOVUPS (SI), Z16; \
	ROWS16(SROW1x16, LOADB, K1); \
	NEXT1x16(64, (GB/2)); \
tail1x16: \
	KORTESTW K2, K2; \
	JZ   sum1x16; \
	VMOVUPS.Z (SI), K2, Z16; \
	ROWS16(SROW1x16, LOADB, K2); \
sum1x16: \
	QUAD4(Z0, Z1, Z2, Z3, Z16); \
	QUAD4(Z4, Z5, Z6, Z7, Z16); \
	QUAD4(Z8, Z9, Z10, Z11, Z16); \
	QUAD4(Z12, Z13, Z14, Z15, Z16); \
	VUNPCKLPS Z4, Z0, Z16; \
	VUNPCKHPS Z4, Z0, Z0; \
	VADDPS    Z16, Z0, Z0; \
	VUNPCKLPS Z12, Z8, Z16; \
	VUNPCKHPS Z12, Z8, Z8; \
	VADDPS    Z16, Z8, Z8; \
	VUNPCKLPD Z8, Z0, Z16; \
	VUNPCKHPD Z8, Z0, Z0; \
	VADDPS    Z16, Z0, Z0; \
	VMOVUPS   reduce16perm<>(SB), Z31; \
	VPERMPS   Z0, Z31, Z0; \
	MOVQ      c+32(FP), DX; \
	KMOVW     amask+42(FP), K3; \
	VMOVUPS.Z (DX), K3, Z16; \
	VADDPS    Z16, Z0, Z0; \
	VMOVUPS   Z0, (DX); \
	VZEROUPPER; \
	RET

// func gemm1x16AVX512(a *float32, b unsafe.Pointer, ldb int, k int, c *float32, kmask, amask uint16)
// sets c[j] (adds to it where amask says) the sum over p < k of
// a[p]*b[j][p] for j < 16, b's rows being float32, ldb bytes apart
// (gemm1x16F16AVX512 and gemm1x16BF16AVX512: F16 and BF16): one row against sixteen b rows, whose sums a
// transpose-style tree reduces into one register, so a short k (an
// attention head) pays far less reduction per output than in 1x6 tiles.
TEXT ·gemm1x16AVX512(SB), NOSPLIT, $0-44
	GEMM1x16(LOADF32, GBF32)

TEXT ·gemm1x16F16AVX512(SB), NOSPLIT, $0-44
	GEMM1x16(LOADF16, GBHALF)

TEXT ·gemm1x16BF16AVX512(SB), NOSPLIT, $0-44
	GEMM1x16(LOADBF16, GBHALF)
