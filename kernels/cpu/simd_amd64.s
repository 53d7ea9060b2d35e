//go:build !purego

#include "textflag.h"

// FMAF32 and FMAF16 add Y8 times the 8 values of v at byte off of a
// float32 row (off) or of a half row (off/2, made float32 as they load) at
// R9 to acc: the two element types ACCUM reads.
#define FMAF32(off, acc) VFMADD231PS off(R9), Y8, acc
#define FMAF16(off, acc) VCVTPH2PS (off/2)(R9), Y9; VFMADD231PS Y9, Y8, acc

// VCOLF32 and VCOLF16 set R9 to the v address of acc's byte column AX.
#define VCOLF32 LEAQ (DX)(AX*1), R9
#define VCOLF16 MOVQ AX, R9; SHRQ $1, R9; ADDQ DX, R9

// ACCUM is the body of accumAVX and accumHalfAVX, v's elements being
// 1<<VSHIFT bytes, addressed by VCOL and added by FMA: 64 columns at a
// time, so eight independent FMA chains hide latency, then 8.
#define ACCUM(VSHIFT, VCOL, FMA) \
	MOVQ acc+0(FP), DI; \
	MOVQ w+8(FP), SI; \
	MOVQ v+16(FP), DX; \
	MOVQ ldv+24(FP), R10; \
	SHLQ $VSHIFT, R10; \
	MOVQ rows+32(FP), CX; \
	MOVQ d8+40(FP), BX; \
	SHLQ $2, BX; \
	XORQ AX, AX; \
chunk64: \
	MOVQ BX, R8; \
	SUBQ AX, R8; \
	CMPQ R8, $256; \
	JB   chunk8; \
	VMOVUPS (DI)(AX*1), Y0; \
	VMOVUPS 32(DI)(AX*1), Y1; \
	VMOVUPS 64(DI)(AX*1), Y2; \
	VMOVUPS 96(DI)(AX*1), Y3; \
	VMOVUPS 128(DI)(AX*1), Y4; \
	VMOVUPS 160(DI)(AX*1), Y5; \
	VMOVUPS 192(DI)(AX*1), Y6; \
	VMOVUPS 224(DI)(AX*1), Y7; \
	VCOL; \
	XORQ R11, R11; \
rows64: \
	CMPQ R11, CX; \
	JAE  store64; \
	VBROADCASTSS (SI)(R11*4), Y8; \
	FMA(0, Y0); \
	FMA(32, Y1); \
	FMA(64, Y2); \
	FMA(96, Y3); \
	FMA(128, Y4); \
	FMA(160, Y5); \
	FMA(192, Y6); \
	FMA(224, Y7); \
	ADDQ R10, R9; \
	INCQ R11; \
	JMP  rows64; \
store64: \
	VMOVUPS Y0, (DI)(AX*1); \
	VMOVUPS Y1, 32(DI)(AX*1); \
	VMOVUPS Y2, 64(DI)(AX*1); \
	VMOVUPS Y3, 96(DI)(AX*1); \
	VMOVUPS Y4, 128(DI)(AX*1); \
	VMOVUPS Y5, 160(DI)(AX*1); \
	VMOVUPS Y6, 192(DI)(AX*1); \
	VMOVUPS Y7, 224(DI)(AX*1); \
	ADDQ $256, AX; \
	JMP  chunk64; \
chunk8: \
	CMPQ AX, BX; \
	JAE  accumdone; \
	VMOVUPS (DI)(AX*1), Y0; \
	VCOL; \
	XORQ R11, R11; \
rows8: \
	CMPQ R11, CX; \
	JAE  store8; \
	VBROADCASTSS (SI)(R11*4), Y8; \
	FMA(0, Y0); \
	ADDQ R10, R9; \
	INCQ R11; \
	JMP  rows8; \
store8: \
	VMOVUPS Y0, (DI)(AX*1); \
	ADDQ $32, AX; \
	JMP  chunk8; \
accumdone: \
	VZEROUPPER; \
	RET

// LOADKF32 and LOADKF16 load the 8 K values i of a 32-value chunk at R9
// bytes into the row at DI into reg, float32 or halves made float32
// (F16C): the two element types DOTROW reads.
#define LOADKF32(i, reg) VMOVUPS (32*i)(DI)(R9*1), reg
#define LOADKF16(i, reg) VCVTPH2PS (16*i)(DI)(R9*1), reg

// DOTROW sets X0 to the dot product of the float32s at SI and a row at
// DI that LOADK loads (elements of 1<<ESHIFT bytes), over BX bytes of
// SI's (k8·4) and R8 of them (BX rounded down to 128) in 32-value
// chunks: four 8-wide FMA chains, the rest 8 at a time into the first,
// then (Y0+Y1)+(Y2+Y3) and the lanes summed. dotAVX and DOTS both take
// it, so a score has Dot's bits by construction. Clobbers AX, R9, Y1-Y7.
#define DOTROW(ESHIFT, LOADK) \
	XORQ   AX, AX; \
	XORQ   R9, R9; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
dot32: \
	CMPQ        AX, R8; \
	JAE         dot8; \
	LOADK(0, Y4); \
	LOADK(1, Y5); \
	LOADK(2, Y6); \
	LOADK(3, Y7); \
	VFMADD231PS (SI)(AX*1), Y4, Y0; \
	VFMADD231PS 32(SI)(AX*1), Y5, Y1; \
	VFMADD231PS 64(SI)(AX*1), Y6, Y2; \
	VFMADD231PS 96(SI)(AX*1), Y7, Y3; \
	ADDQ        $128, AX; \
	ADDQ        $(32<<ESHIFT), R9; \
	JMP         dot32; \
dot8: \
	CMPQ        AX, BX; \
	JAE         dotsum; \
	LOADK(0, Y4); \
	VFMADD231PS (SI)(AX*1), Y4, Y0; \
	ADDQ        $32, AX; \
	ADDQ        $(8<<ESHIFT), R9; \
	JMP         dot8; \
dotsum: \
	VADDPS       Y1, Y0, Y0; \
	VADDPS       Y3, Y2, Y2; \
	VADDPS       Y2, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VHADDPS      X0, X0, X0; \
	VHADDPS      X0, X0, X0

// DOTS is the body of dotsAVX and dotsHalfAVX: DOTROW for each of n K
// rows of elements of 1<<ESHIFT bytes, ldk elements apart, read by
// LOADK, plus +0 as Dot adds its empty tail.
#define DOTS(ESHIFT, LOADK) \
	MOVQ   q+0(FP), SI; \
	MOVQ   k+8(FP), DI; \
	MOVQ   ldk+16(FP), R10; \
	SHLQ   $ESHIFT, R10; \
	MOVQ   n+24(FP), CX; \
	MOVQ   k8+32(FP), BX; \
	SHLQ   $2, BX; \
	MOVQ   BX, R8; \
	ANDQ   $-128, R8; \
	MOVQ   c+40(FP), DX; \
	VXORPS X8, X8, X8; \
dotsrow: \
	DOTROW(ESHIFT, LOADK); \
	VADDSS X8, X0, X0; \
	VMOVSS X0, (DX); \
	ADDQ   $4, DX; \
	ADDQ   R10, DI; \
	DECQ   CX; \
	JNZ    dotsrow; \
	VZEROUPPER; \
	RET

// The kernels below need AVX2 and FMA; simd_amd64.go calls them only when
// the CPU and OS support both. Lengths are in float32 elements and must be
// positive multiples of 8 where named k8 or d8; leading dimensions are in
// elements.

// REDUCE4 sums each of four accumulators and stores the four sums as
// consecutive floats at (dst), added to the floats there kept by the
// mask in X15 (all bits or none: a mask, not a factor, so that whatever
// a stored-over c holds, NaN included, cannot leak in). It clobbers r0,
// r2 and x1.
#define REDUCE4(r0, r1, r2, r3, x0, x1, dst) \
	VHADDPS r1, r0, r0; \
	VHADDPS r3, r2, r2; \
	VHADDPS r2, r0, r0; \
	VEXTRACTF128 $1, r0, x1; \
	VADDPS x1, x0, x0; \
	VANDPS dst, X15, x1; \
	VADDPS x1, x0, x0; \
	VMOVUPS x0, dst

// ZERO12 zeroes Y0-Y11, the accumulators of the GEMM tiles.
#define ZERO12 \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11

// func gemm3x4AVX(a *float32, lda int, b *float32, ldb int, k8 int, c *float32, ldc int, tiles int, keep uint32)
// sets c[i*ldc+j] = sum over p < k8 of a[i*lda+p]*b[j*ldb+p], i < 3·tiles,
// j < 4, plus c's own value there when keep is all ones (0: none of it).
// It runs the tiles of three rows one after the other down a and c, the
// four b rows staying in L1: one call for the lot, as a call per tile
// cost several percent of the products' time.
TEXT ·gemm3x4AVX(SB), NOSPLIT, $0-68
	MOVQ a+0(FP), SI
	MOVQ lda+8(FP), R14
	SHLQ $2, R14
	MOVQ b+16(FP), DI
	MOVQ ldb+24(FP), R10
	SHLQ $2, R10
	LEAQ (DI)(R10*1), R11
	LEAQ (R11)(R10*1), R12
	LEAQ (R12)(R10*1), R13
	MOVQ k8+32(FP), BX
	SHLQ $2, BX
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), CX
	SHLQ $2, CX
	MOVQ tiles+56(FP), R10

tile3x4:
	LEAQ (SI)(R14*1), R9
	LEAQ (R9)(R14*1), R8
	XORQ AX, AX
	ZERO12

loop3x4:
	VMOVUPS (SI)(AX*1), Y12
	VMOVUPS (R9)(AX*1), Y13
	VMOVUPS (R8)(AX*1), Y14
	VMOVUPS (DI)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y0
	VFMADD231PS Y15, Y13, Y4
	VFMADD231PS Y15, Y14, Y8
	VMOVUPS (R11)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y1
	VFMADD231PS Y15, Y13, Y5
	VFMADD231PS Y15, Y14, Y9
	VMOVUPS (R12)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y2
	VFMADD231PS Y15, Y13, Y6
	VFMADD231PS Y15, Y14, Y10
	VMOVUPS (R13)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y3
	VFMADD231PS Y15, Y13, Y7
	VFMADD231PS Y15, Y14, Y11
	ADDQ $32, AX
	CMPQ AX, BX
	JB   loop3x4

	VBROADCASTSS keep+64(FP), X15
	REDUCE4(Y0, Y1, Y2, Y3, X0, X1, (DX))
	ADDQ CX, DX
	REDUCE4(Y4, Y5, Y6, Y7, X4, X5, (DX))
	ADDQ CX, DX
	REDUCE4(Y8, Y9, Y10, Y11, X8, X9, (DX))
	ADDQ CX, DX
	LEAQ (R8)(R14*1), SI
	DECQ R10
	JNZ  tile3x4
	VZEROUPPER
	RET

// func gemm1x4AVX(a *float32, b *float32, ldb int, k8 int, c *float32, keep uint32)
// sets c[j] = sum over p < k8 of a[p]*b[j*ldb+p], j < 4, plus c[j] when
// keep is all ones. It keeps two sets of accumulators so a long k
// (matrix-vector products) is not bound by FMA latency.
TEXT ·gemm1x4AVX(SB), NOSPLIT, $0-44
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ ldb+16(FP), R10
	SHLQ $2, R10
	LEAQ (DI)(R10*1), R11
	LEAQ (R11)(R10*1), R12
	LEAQ (R12)(R10*1), R13
	MOVQ k8+24(FP), BX
	SHLQ $2, BX
	MOVQ BX, R8
	ANDQ $-64, R8
	XORQ AX, AX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

loop1x4by16:
	CMPQ AX, R8
	JAE  tail1x4
	VMOVUPS (SI)(AX*1), Y12
	VMOVUPS 32(SI)(AX*1), Y13
	VFMADD231PS (DI)(AX*1), Y12, Y0
	VFMADD231PS (R11)(AX*1), Y12, Y1
	VFMADD231PS (R12)(AX*1), Y12, Y2
	VFMADD231PS (R13)(AX*1), Y12, Y3
	VFMADD231PS 32(DI)(AX*1), Y13, Y4
	VFMADD231PS 32(R11)(AX*1), Y13, Y5
	VFMADD231PS 32(R12)(AX*1), Y13, Y6
	VFMADD231PS 32(R13)(AX*1), Y13, Y7
	ADDQ $64, AX
	JMP  loop1x4by16

tail1x4:
	CMPQ AX, BX
	JAE  sum1x4
	VMOVUPS (SI)(AX*1), Y12
	VFMADD231PS (DI)(AX*1), Y12, Y0
	VFMADD231PS (R11)(AX*1), Y12, Y1
	VFMADD231PS (R12)(AX*1), Y12, Y2
	VFMADD231PS (R13)(AX*1), Y12, Y3

sum1x4:
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	MOVQ c+32(FP), DX
	VBROADCASTSS keep+40(FP), X15
	REDUCE4(Y0, Y1, Y2, Y3, X0, X1, (DX))
	VZEROUPPER
	RET

// func dotAVX(a, b *float32, k8 int) float32
TEXT ·dotAVX(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ k8+16(FP), BX
	SHLQ $2, BX
	MOVQ BX, R8
	ANDQ $-128, R8
	DOTROW(2, LOADKF32)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func accumAVX(acc *float32, w *float32, v *float32, ldv int, rows int, d8 int)
// adds sum over j < rows of w[j]*v[j*ldv+d] to acc[d], d < d8.
TEXT ·accumAVX(SB), NOSPLIT, $0-48
	ACCUM(2, VCOLF32, FMAF32)

// func accumHalfAVX(acc *float32, w *float32, v *uint16, ldv int, rows int, d8 int)
// is accumAVX on v of halves, each made float32 as it is loaded (F16C):
// accumAVX's additions in accumAVX's order, on the values an F16 cache
// holds, without converting them into a buffer first.
TEXT ·accumHalfAVX(SB), NOSPLIT, $0-48
	ACCUM(1, VCOLF16, FMAF16)

// func dotsAVX(q *float32, k *float32, ldk, n, k8 int, c *float32)
// sets c[j] to Dot(q[:k8], k[j*ldk:]) for j < n, bit for bit (k8 a
// multiple of 8): a decode step's scores over one run of an F32 cache,
// one call where Dot took one a position.
TEXT ·dotsAVX(SB), NOSPLIT, $0-48
	DOTS(2, LOADKF32)

// func dotsHalfAVX(q *float32, k *uint16, ldk, n, k8 int, c *float32)
// is dotsAVX on K in halves, each made float32 as it loads: c[j] has
// Dot's bits on row j converted by halfRows.
TEXT ·dotsHalfAVX(SB), NOSPLIT, $0-48
	DOTS(1, LOADKF16)

// Constants for EXPPS: log2(e), ln(2) split in a high part exact in a
// few bits and a low correction, the Cephes expf polynomial c5..c0, 1, the
// lowest argument whose result is a normal float32, the exponent bias, and
// the highest argument siluMulAVX passes (e**88 is finite).
DATA expc<>+0(SB)/4, $0x3fb8aa3b
DATA expc<>+4(SB)/4, $0x3f318000
DATA expc<>+8(SB)/4, $0xb95e8083
DATA expc<>+12(SB)/4, $0x39506967
DATA expc<>+16(SB)/4, $0x3ab743ce
DATA expc<>+20(SB)/4, $0x3c088908
DATA expc<>+24(SB)/4, $0x3d2aa9c1
DATA expc<>+28(SB)/4, $0x3e2aaaaa
DATA expc<>+32(SB)/4, $0x3f000000
DATA expc<>+36(SB)/4, $0x3f800000
DATA expc<>+40(SB)/4, $0xc2aeac4f
DATA expc<>+44(SB)/4, $127
DATA expc<>+48(SB)/4, $0x42b00000
GLOBL expc<>(SB), RODATA|NOPTR, $52

// EXPCONSTS loads the constants EXPPS keeps in registers into Y8-Y14.
#define EXPCONSTS \
	VBROADCASTSS expc<>+0(SB), Y14; \
	VBROADCASTSS expc<>+12(SB), Y13; \
	VBROADCASTSS expc<>+16(SB), Y12; \
	VBROADCASTSS expc<>+20(SB), Y11; \
	VBROADCASTSS expc<>+24(SB), Y10; \
	VBROADCASTSS expc<>+28(SB), Y9; \
	VBROADCASTSS expc<>+32(SB), Y8

// EXPPS sets Y0 to e**Y0, as expf computes it, for arguments up to 88:
// those below -87.3 give e**-87.3 rather than a subnormal (VMAXPS returns
// its second source on NaN, so NaN stays NaN). It needs EXPCONSTS and
// clobbers Y1-Y4 and Y6.
#define EXPPS \
	VBROADCASTSS expc<>+40(SB), Y6; \
	VMAXPS       Y0, Y6, Y0; \
	VMULPS       Y14, Y0, Y1; \
	VROUNDPS     $0, Y1, Y1; \
	VMOVAPS      Y0, Y2; \
	VBROADCASTSS expc<>+4(SB), Y6; \
	VFNMADD231PS Y6, Y1, Y2; \
	VBROADCASTSS expc<>+8(SB), Y6; \
	VFNMADD231PS Y6, Y1, Y2; \
	VMOVAPS      Y13, Y3; \
	VFMADD213PS  Y12, Y2, Y3; \
	VFMADD213PS  Y11, Y2, Y3; \
	VFMADD213PS  Y10, Y2, Y3; \
	VFMADD213PS  Y9, Y2, Y3; \
	VFMADD213PS  Y8, Y2, Y3; \
	VMULPS       Y2, Y2, Y4; \
	VFMADD213PS  Y2, Y4, Y3; \
	VBROADCASTSS expc<>+36(SB), Y6; \
	VADDPS       Y6, Y3, Y3; \
	VCVTPS2DQ    Y1, Y1; \
	VPBROADCASTD expc<>+44(SB), Y6; \
	VPADDD       Y6, Y1, Y1; \
	VPSLLD       $23, Y1, Y1; \
	VMULPS       Y1, Y3, Y0

// func expSubAVX(s *float32, n8 int, m float32) float32
// sets s[j] = e**(s[j]-m) for j < n8 and returns their sum. It is meant for
// s[j] <= m (softmax weights): arguments below -87.3 give e**-87.3 rather
// than a subnormal, an error far below float32 precision next to the
// weight 1 of the maximum.
TEXT ·expSubAVX(SB), NOSPLIT, $0-28
	MOVQ s+0(FP), DI
	MOVQ n8+8(FP), CX
	SHLQ $2, CX
	VBROADCASTSS m+16(FP), Y15
	EXPCONSTS
	VXORPS Y5, Y5, Y5
	XORQ AX, AX

loopexp:
	CMPQ AX, CX
	JAE  sumexp
	VMOVUPS (DI)(AX*1), Y0
	VSUBPS Y15, Y0, Y0
	EXPPS
	VMOVUPS Y0, (DI)(AX*1)
	VADDPS Y0, Y5, Y5
	ADDQ $32, AX
	JMP  loopexp

sumexp:
	VEXTRACTF128 $1, Y5, X1
	VADDPS X1, X5, X5
	VHADDPS X5, X5, X5
	VHADDPS X5, X5, X5
	VMOVSS X5, ret+24(FP)
	VZEROUPPER
	RET

// func siluMulAVX(out, gate, up *float32, n8 int)
// sets out[j] = gate[j]/(1+e**-gate[j]) * up[j] for j < n8 (out may be
// gate). Arguments of e past 88 are taken as 88: the quotient is then
// below 1e-36 in magnitude, as near 0 as the exact one.
TEXT ·siluMulAVX(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n8+24(FP), CX
	SHLQ $2, CX
	EXPCONSTS
	VBROADCASTSS expc<>+48(SB), Y15
	VBROADCASTSS expc<>+36(SB), Y7
	XORQ AX, AX

loopsilu:
	CMPQ AX, CX
	JAE  donesilu
	VMOVUPS (SI)(AX*1), Y5
	VXORPS  Y0, Y0, Y0
	VSUBPS  Y5, Y0, Y0
	VMINPS  Y0, Y15, Y0 // NaN stays NaN
	EXPPS
	VADDPS  Y7, Y0, Y0
	VDIVPS  Y0, Y5, Y0
	VMULPS  (DX)(AX*1), Y0, Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ    $32, AX
	JMP     loopsilu

donesilu:
	VZEROUPPER
	RET

// func prefetchBytes(p *byte, stride int, rows int, n int)
// asks for the cache lines of rows rows of n bytes, stride bytes apart,
// to be loaded into L1.
TEXT ·prefetchBytes(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), DI
	MOVQ stride+8(FP), R10
	MOVQ rows+16(FP), CX
	MOVQ n+24(FP), BX

prefrow:
	TESTQ CX, CX
	JZ    prefdone
	XORQ  AX, AX

prefline:
	PREFETCHT0 (DI)(AX*1)
	ADDQ $64, AX
	CMPQ AX, BX
	JB   prefline
	ADDQ R10, DI
	DECQ CX
	JMP  prefrow

prefdone:
	RET

// STOREROW16 stores the sixteen sums of one row of a 6×16 tile, y0 and
// y1, at (DX), added to the floats there kept by the mask in Y15 (as
// REDUCE4 does), and moves DX to the next row of c. It clobbers Y12 and
// Y13.
#define STOREROW16(y0, y1) \
	VANDPS  (DX), Y15, Y12; \
	VADDPS  Y12, y0, y0; \
	VANDPS  32(DX), Y15, Y13; \
	VADDPS  Y13, y1, y1; \
	VMOVUPS y0, (DX); \
	VMOVUPS y1, 32(DX); \
	ADDQ    CX, DX

// func gemm6x16AVX(a *float32, lda int, b *float32, kc int, c *float32, ldc int, tiles int, keep uint32)
// sets c[i*ldc+j] = sum over p < kc of a[i*lda+p]*b[p*16+j], i < 6·tiles,
// j < 16, plus c's own value there when keep is all ones (0: none of
// it): b is a panel of sixteen columns packed p-major (packPanel), and
// kc is positive. Each tile of six rows keeps its
// 6×16 sums in twelve registers: per p, two loads of b and six
// broadcasts of a feed twelve FMAs, and no sum is ever reduced across
// lanes. It runs the tiles one after the other down a and c, the panel
// staying in cache.
TEXT ·gemm6x16AVX(SB), NOSPLIT, $0-60
	MOVQ a+0(FP), SI
	MOVQ lda+8(FP), R14
	SHLQ $2, R14
	MOVQ kc+24(FP), BX
	MOVQ c+32(FP), DX
	MOVQ ldc+40(FP), CX
	SHLQ $2, CX
	MOVQ tiles+48(FP), R10

tile6x16:
	MOVQ b+16(FP), DI
	MOVQ SI, R11
	LEAQ (SI)(R14*2), R9
	ADDQ R14, R9
	MOVQ BX, AX
	ZERO12

loop6x16:
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	VBROADCASTSS (R11), Y14
	VFMADD231PS Y12, Y14, Y0
	VFMADD231PS Y13, Y14, Y1
	VBROADCASTSS (R11)(R14*1), Y15
	VFMADD231PS Y12, Y15, Y2
	VFMADD231PS Y13, Y15, Y3
	VBROADCASTSS (R11)(R14*2), Y14
	VFMADD231PS Y12, Y14, Y4
	VFMADD231PS Y13, Y14, Y5
	VBROADCASTSS (R9), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VBROADCASTSS (R9)(R14*1), Y14
	VFMADD231PS Y12, Y14, Y8
	VFMADD231PS Y13, Y14, Y9
	VBROADCASTSS (R9)(R14*2), Y15
	VFMADD231PS Y12, Y15, Y10
	VFMADD231PS Y13, Y15, Y11
	ADDQ $64, DI
	ADDQ $4, R11
	ADDQ $4, R9
	DECQ AX
	JNZ  loop6x16

	VBROADCASTSS keep+56(FP), Y15
	STOREROW16(Y0, Y1)
	STOREROW16(Y2, Y3)
	STOREROW16(Y4, Y5)
	STOREROW16(Y6, Y7)
	STOREROW16(Y8, Y9)
	STOREROW16(Y10, Y11)
	LEAQ (SI)(R14*4), SI
	LEAQ (SI)(R14*2), SI
	DECQ R10
	JNZ  tile6x16
	VZEROUPPER
	RET

// TRANSPOSE8 loads eight floats from each of eight rows, the first four
// at lo and the next four at hi (rows R8 bytes apart, R9 = 3·R8), and
// stores them transposed: float q of every row, in row order, at
// off+64·q(DI). It clobbers Y0-Y15.
#define TRANSPOSE8(lo, hi, off) \
	VMOVUPS    (lo), Y0; \
	VMOVUPS    (lo)(R8*1), Y1; \
	VMOVUPS    (lo)(R8*2), Y2; \
	VMOVUPS    (lo)(R9*1), Y3; \
	VMOVUPS    (hi), Y4; \
	VMOVUPS    (hi)(R8*1), Y5; \
	VMOVUPS    (hi)(R8*2), Y6; \
	VMOVUPS    (hi)(R9*1), Y7; \
	VUNPCKLPS  Y1, Y0, Y8; \
	VUNPCKHPS  Y1, Y0, Y9; \
	VUNPCKLPS  Y3, Y2, Y10; \
	VUNPCKHPS  Y3, Y2, Y11; \
	VUNPCKLPS  Y5, Y4, Y12; \
	VUNPCKHPS  Y5, Y4, Y13; \
	VUNPCKLPS  Y7, Y6, Y14; \
	VUNPCKHPS  Y7, Y6, Y15; \
	VSHUFPS    $0x44, Y10, Y8, Y0; \
	VSHUFPS    $0xEE, Y10, Y8, Y1; \
	VSHUFPS    $0x44, Y11, Y9, Y2; \
	VSHUFPS    $0xEE, Y11, Y9, Y3; \
	VSHUFPS    $0x44, Y14, Y12, Y4; \
	VSHUFPS    $0xEE, Y14, Y12, Y5; \
	VSHUFPS    $0x44, Y15, Y13, Y6; \
	VSHUFPS    $0xEE, Y15, Y13, Y7; \
	VPERM2F128 $0x20, Y4, Y0, Y8; \
	VPERM2F128 $0x20, Y5, Y1, Y9; \
	VPERM2F128 $0x20, Y6, Y2, Y10; \
	VPERM2F128 $0x20, Y7, Y3, Y11; \
	VPERM2F128 $0x31, Y4, Y0, Y12; \
	VPERM2F128 $0x31, Y5, Y1, Y13; \
	VPERM2F128 $0x31, Y6, Y2, Y14; \
	VPERM2F128 $0x31, Y7, Y3, Y15; \
	VMOVUPS    Y8, off(DI); \
	VMOVUPS    Y9, off+64(DI); \
	VMOVUPS    Y10, off+128(DI); \
	VMOVUPS    Y11, off+192(DI); \
	VMOVUPS    Y12, off+256(DI); \
	VMOVUPS    Y13, off+320(DI); \
	VMOVUPS    Y14, off+384(DI); \
	VMOVUPS    Y15, off+448(DI)

// func packPanelAVX(dst *float32, b *float32, ldb int, k8 int)
// sets dst[p*16+j] = b[j*ldb+p] for j < 16, p < k8 (a positive multiple
// of 8): sixteen rows of b packed p-major for gemm6x16AVX, in 8×8
// transposes.
TEXT ·packPanelAVX(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ b+8(FP), SI
	MOVQ ldb+16(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R11
	LEAQ (R11)(R8*4), R12
	LEAQ (R12)(R8*4), R13
	MOVQ k8+24(FP), BX

pack16:
	TRANSPOSE8(SI, R11, 0)
	TRANSPOSE8(R12, R13, 32)
	ADDQ $32, SI
	ADDQ $32, R11
	ADDQ $32, R12
	ADDQ $32, R13
	ADDQ $512, DI
	SUBQ $8, BX
	JNZ  pack16
	VZEROUPPER
	RET
