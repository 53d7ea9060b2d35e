//go:build amd64 && !purego

#include "textflag.h"
#include "rowpairs_amd64.h"
#include "rows4_amd64.h"

// AVX-512 dot products of consecutive weight rows with one activation
// row: the contract of the AVX2 kernels in simd_amd64.s (same arguments,
// same results up to float rounding), on 64-byte registers; and
// dequantizers, bit for bit as the Go one. The callers (simd_amd64.go)
// check the CPU has AVX512F, BW, VL, VNNI and VBMI besides the AVX2 set.
// Z31 is kept zero where a kernel needs a zero; R14 and R15 are left
// alone.

// HSUM16 sums the sixteen floats of Z0 into X0's low lane.
#define HSUM16 \
	VEXTRACTF64X4 $1, Z0, Y1; \
	VADDPS        Y1, Y0, Y0; \
	VEXTRACTF128  $1, Y0, X1; \
	VADDPS        X1, X0, X0; \
	VHADDPS       X0, X0, X0; \
	VHADDPS       X0, X0, X0

// HIGHHALF sets K2 to 0xff00: the upper eight of sixteen lanes, which
// masked broadcasts fill with the second block's scale.
#define HIGHHALF \
	MOVL  $0xff00, AX; \
	KMOVW AX, K2

// BCASTD sets zreg to 16 copies of the uint32 c (64 of its byte, for
// byte masks written as four).
#define BCASTD(c, zreg) \
	MOVL         $c, AX; \
	VPBROADCASTD AX, zreg

// Q8ROWSTART loads a row's (or pair's) activation pointers and zeroes the
// accumulators.
#define Q8ROWSTART \
	MOVQ   a+8(FP), DI; \
	MOVQ   ad+16(FP), DX; \
	MOVQ   nb+24(FP), CX; \
	VXORPS Z0, Z0, Z0; \
	VXORPS Z7, Z7, Z7; \
	VXORPS Z8, Z8, Z8; \
	VXORPS Z9, Z9, Z9

// X4SETUP loads the constants of the four-row Q8_0 and Q4_0 kernels
// (see dotQ8_0x4AVX512).
#define X4SETUP \
	VPXORD Z31, Z31, Z31; \
	BCASTD(0x80808080, Z30)

// X4ROWSETUP starts a weight row of the four-row Q8_0 and Q4_0 kernels:
// the activations' pointers and strides (X4ROWPTRS), the sums zeroed and
// the mask set for two blocks at a time.
#define X4ROWSETUP \
	X4ROWPTRS; \
	VXORPS Z16, Z16, Z16; \
	VXORPS Z17, Z17, Z17; \
	VXORPS Z18, Z18, Z18; \
	VXORPS Z19, Z19, Z19; \
	KXNORW K4, K4, K4

// X4ONESCALE sets Z13 to the scale of the block at (base), in all lanes.
#define X4ONESCALE(base) \
	VPBROADCASTW (base), Y13; \
	VCVTPH2PS    Y13, Z13

// X4LAST sets the masks for a single last block.
#define X4LAST \
	MOVL   $0xff, AX; \
	KMOVW  AX, K4; \
	KXORW  K2, K2, K2

// X4STORE sums the lanes of acc into the float at addr.
#define X4STORE(acc, addr) \
	VMOVAPS acc, Z0; \
	HSUM16; \
	VMOVSS  X0, addr

// X8NEXT is X4NEXT for eight activation rows.
#define X8NEXT(a0, a1, a2, a3, a4, a5, a6, a7, stridearg) \
	X4OUT(stridearg); \
	X4STORES(a0, a1, a2, a3); \
	LEAQ (R13)(R12*4), R13; \
	X4STORES(a4, a5, a6, a7); \
	X4ROWDONE

// XBLOCKS is the loop of the four- and eight-row Q8_0 and Q4_0 kernels
// over weight rows and their blocks of bsize bytes: PAIR(base) unpacks
// two blocks into Z11 (their 64 quants, signed) and Z13 (d_A in lanes
// 0-7, d_B in 8-15) and ONE(base) a single last one (its quants in Y11,
// the upper lanes zero), for ROWS to multiply by the activation rows;
// START begins a weight row after X4ROWSETUP, NEXT stores its sums.
// DX walks the spread scales (see X4ROW), 64 bytes a pair of blocks.
#define XBLOCKS(PAIR, ONE, bsize, START, ROWS, NEXT) \
	MOVQ w+0(FP), SI; \
	X4ROWSTART(nr+32(FP), dst+40(FP)); \
row: \
	X4ROWSETUP; \
	START; \
pair: \
	CMPQ CX, $2; \
	JLT  one; \
	PAIR(SI); \
	ROWS; \
	ADDQ $(2*bsize), SI; \
	ADDQ $64, DI; \
	ADDQ $64, DX; \
	SUBQ $2, CX; \
	JMP  pair; \
one: \
	TESTQ CX, CX; \
	JZ    done; \
	X4LAST; \
	ONE(SI); \
	ROWS; \
	ADDQ $bsize, SI; \
done: \
	NEXT; \
	JNZ row; \
	VZEROUPPER

#define X4BLOCKS(PAIR, ONE, bsize) XBLOCKS(PAIR, ONE, bsize, X4START, X4ROWS, X4DONE)
#define X8BLOCKS(PAIR, ONE, bsize) XBLOCKS(PAIR, ONE, bsize, X8START, X8ROWS, X8DONE)

// X4START sets the spread scales' row stride R10 = 64·⌈nb/2⌉ bytes and
// R11 = 3·R10, in place of X4ROWPTRS's.
#define X4START \
	MOVQ nb+24(FP), R10; \
	INCQ R10; \
	SHRQ $1, R10; \
	SHLQ $6, R10; \
	LEAQ (R10)(R10*2), R11
#define X4DONE X4NEXT(Z16, Z17, Z18, Z19, dstStride+48(FP))

// X8START zeroes the eight-row kernels' sums of rows 4-7 and keeps in
// the locals qback and dback the four rows' strides that X8ROWS goes
// back by.
#define X8START \
	X4START; \
	VXORPS Z20, Z20, Z20; \
	VXORPS Z21, Z21, Z21; \
	VXORPS Z22, Z22, Z22; \
	VXORPS Z23, Z23, Z23; \
	LEAQ   (R12)(R8*4), AX; \
	MOVQ   AX, qback-24(SP); \
	LEAQ   (R12)(R10*4), AX; \
	MOVQ   AX, dback-32(SP)

#define X8DONE X8SUMS(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, dstStride+48(FP))

// X8SUMS is X8NEXT with the eight sums' lanes added together side by side:
// 24 shuffles and adds for the eight where HSUM16 takes eight ops for
// each (about a tenth of the Q8_0 kernel's operations on the 110M model's
// rows of 768 values; 4% of its time in BenchmarkMatMulVerify, best of
// four at load 4-6). Every sum takes HSUM16's additions in its order, operands
// in the same places (the 256-bit halves, then the 128-bit ones, then
// lanes 0+1 and 2+3, then those two), so the floats are X8NEXT's to the
// bit. R is then A E . . B F . . C G . . D H . . for rows A-H. Clobbers
// Z0-Z7.
#define X8SUMS(a0, a1, a2, a3, a4, a5, a6, a7, stridearg) \
	X4OUT(stridearg); \
	X8HALVES(a0, a1, Z0, Z1); \
	X8HALVES(a2, a3, Z1, Z2); \
	X8HALVES(a4, a5, Z2, Z3); \
	X8HALVES(a6, a7, Z3, Z4); \
	VSHUFF32X4    $0x88, Z1, Z0, Z4; \
	VSHUFF32X4    $0xdd, Z1, Z0, Z5; \
	VADDPS        Z5, Z4, Z4; \
	VSHUFF32X4    $0x88, Z3, Z2, Z5; \
	VSHUFF32X4    $0xdd, Z3, Z2, Z6; \
	VADDPS        Z6, Z5, Z5; \
	VSHUFPS       $0x88, Z5, Z4, Z6; \
	VSHUFPS       $0xdd, Z5, Z4, Z7; \
	VADDPS        Z7, Z6, Z6; \
	VSHUFPS       $0x88, Z6, Z6, Z0; \
	VSHUFPS       $0xdd, Z6, Z6, Z1; \
	VADDPS        Z1, Z0, Z0; \
	VEXTRACTF32X4 $1, Z0, X1; \
	VEXTRACTF32X4 $2, Z0, X2; \
	VEXTRACTF32X4 $3, Z0, X3; \
	VMOVSS        X0, (R13); \
	VMOVSS        X1, (R13)(R12*1); \
	VMOVSS        X2, (R13)(R12*2); \
	VMOVSS        X3, (R13)(R11*1); \
	LEAQ          (R13)(R12*4), R13; \
	VEXTRACTPS    $1, X0, (R13); \
	VEXTRACTPS    $1, X1, (R13)(R12*1); \
	VEXTRACTPS    $1, X2, (R13)(R12*2); \
	VEXTRACTPS    $1, X3, (R13)(R11*1); \
	X4ROWDONE

// X8HALVES sets dst to [lo + hi of a, lo + hi of b], the 256-bit halves
// of each added as HSUM16 adds them; t is scratch.
#define X8HALVES(a, b, dst, t) \
	VSHUFF64X2 $0x44, b, a, dst; \
	VSHUFF64X2 $0xee, b, a, t; \
	VADDPS     t, dst, dst

// KXQUAD multiplies the unpacked block by the four activation rows from
// DI, DX, BX on (ROW(aidx, bidx, didx, acc) multiplying it by one
// activation row) into a0 ... a3.
#define KXQUAD(ROW, a0, a1, a2, a3) \
	ROW(R12*1, R12*1, R12*1, a0); \
	ROW(R8*1, AX*1, R10*1, a1); \
	ROW(R8*2, AX*2, R10*2, a2); \
	ROW(R9*1, R13*1, R11*1, a3)

// KX8ROWS is KX4ROWS for eight activation rows, UNPACK(SI) unpacking a
// block and ROW multiplying it by one activation row, into Z9, Z10, Z12, Z13
// (rows 0-3) and Z16-Z19 (4-7): after the first four rows DI, DX and BX
// move on four rows, and after the last four they go back to the first
// row's next block, by the amounts kept in the locals qback, dback and
// bback (the general registers are all taken).
#define KX8ROWS(UNPACK, ROW, bsize) \
	MOVQ w+0(FP), SI; \
	X4ROWSTART(nr+40(FP), dst+48(FP)); \
	MOVQ nb+32(FP), AX; \
	SHLQ $10, AX; \
	SUBQ $256, AX; \
	MOVQ AX, qback-24(SP); \
	MOVQ nb+32(FP), AX; \
	SHLQ $4, AX; \
	SUBQ $4, AX; \
	MOVQ AX, dback-32(SP); \
	MOVQ nb+32(FP), AX; \
	SHLQ $7, AX; \
	SUBQ $32, AX; \
	MOVQ AX, bback-40(SP); \
row: \
	KXROWSETUP; \
	KXZERO(Z9, Z10, Z12, Z13); \
	KXZERO(Z16, Z17, Z18, Z19); \
block: \
	UNPACK(SI); \
	KXQUAD(ROW, Z9, Z10, Z12, Z13); \
	LEAQ (DI)(R8*4), DI; \
	LEAQ (DX)(R10*4), DX; \
	LEAQ (BX)(AX*4), BX; \
	KXQUAD(ROW, Z16, Z17, Z18, Z19); \
	SUBQ qback-24(SP), DI; \
	SUBQ dback-32(SP), DX; \
	SUBQ bback-40(SP), BX; \
	ADDQ $bsize, SI; \
	DECQ CX; \
	JNZ  block; \
	X8NEXT(Z9, Z10, Z12, Z13, Z16, Z17, Z18, Z19, dstStride+56(FP)); \
	JNZ  row; \
	VZEROUPPER

// FLOATDOT2 is the loop of the F16 and BF16 dots, over two weight rows
// at once (SI and R9) against x (DI), n (CX, a multiple of 8) values:
// LOAD16(base, off, zreg) loads sixteen weights from off(base) as
// float32s, LOAD8(base, yreg) eight from (base). 64 values per iteration
// into four accumulators per row, then 16 at a time, then the last 8 in
// 256-bit registers (whose writes clear the upper lanes); the sums end in
// X0 (row SI) and X8 (row R9), SI at the end of its row. Two rows h apart
// are two memory streams, which one core reads faster than one.
#define FLOATDOT2(LOAD16, LOAD8) \
	VXORPS Z0, Z0, Z0; \
	VXORPS Z1, Z1, Z1; \
	VXORPS Z2, Z2, Z2; \
	VXORPS Z3, Z3, Z3; \
	VXORPS Z8, Z8, Z8; \
	VXORPS Z9, Z9, Z9; \
	VXORPS Z10, Z10, Z10; \
	VXORPS Z11, Z11, Z11; \
loop64: \
	CMPQ CX, $64; \
	JLT  loop16; \
	LOAD16(SI, 0, Z4); \
	LOAD16(SI, 32, Z5); \
	LOAD16(SI, 64, Z6); \
	LOAD16(SI, 96, Z7); \
	LOAD16(R9, 0, Z12); \
	LOAD16(R9, 32, Z13); \
	LOAD16(R9, 64, Z14); \
	LOAD16(R9, 96, Z15); \
	VFMADD231PS (DI), Z4, Z0; \
	VFMADD231PS 64(DI), Z5, Z1; \
	VFMADD231PS 128(DI), Z6, Z2; \
	VFMADD231PS 192(DI), Z7, Z3; \
	VFMADD231PS (DI), Z12, Z8; \
	VFMADD231PS 64(DI), Z13, Z9; \
	VFMADD231PS 128(DI), Z14, Z10; \
	VFMADD231PS 192(DI), Z15, Z11; \
	ADDQ $128, SI; \
	ADDQ $128, R9; \
	ADDQ $256, DI; \
	SUBQ $64, CX; \
	JMP  loop64; \
loop16: \
	CMPQ CX, $16; \
	JLT  tail8; \
	LOAD16(SI, 0, Z4); \
	LOAD16(R9, 0, Z12); \
	VFMADD231PS (DI), Z4, Z0; \
	VFMADD231PS (DI), Z12, Z8; \
	ADDQ $32, SI; \
	ADDQ $32, R9; \
	ADDQ $64, DI; \
	SUBQ $16, CX; \
	JMP  loop16; \
tail8: \
	VADDPS Z1, Z0, Z0; \
	VADDPS Z3, Z2, Z2; \
	VADDPS Z2, Z0, Z0; \
	VADDPS Z9, Z8, Z8; \
	VADDPS Z11, Z10, Z10; \
	VADDPS Z10, Z8, Z8; \
	CMPQ   CX, $8; \
	JLT    done; \
	LOAD8(SI, Y4); \
	LOAD8(R9, Y12); \
	VMULPS (DI), Y4, Y4; \
	VMULPS (DI), Y12, Y12; \
	VADDPS Z4, Z0, Z0; \
	VADDPS Z12, Z8, Z8; \
	ADDQ   $16, SI; \
done: \
	HSUM16; \
	VEXTRACTF64X4 $1, Z8, Y9; \
	VADDPS        Y9, Y8, Y8; \
	VEXTRACTF128  $1, Y8, X9; \
	VADDPS        X9, X8, X8; \
	VHADDPS       X8, X8, X8; \
	VHADDPS       X8, X8, X8

#define LOADF16x16(base, off, zreg) VCVTPH2PS off(base), zreg
#define LOADF16x8(base, yreg) VCVTPH2PS (base), yreg
#define LOADBF16x16(base, off, zreg) VPMOVZXWD off(base), zreg; VPSLLD $16, zreg, zreg
#define LOADBF16x8(base, yreg) VPMOVZXWD (base), yreg; VPSLLD $16, yreg, yreg

#define F16DOT2 FLOATDOT2(LOADF16x16, LOADF16x8)
#define BF16DOT2 FLOATDOT2(LOADBF16x16, LOADBF16x8)

// func dotF16AVX512(w *byte, x *float32, n, nrows int, out *float32)
// sets out[r] to the dot product of F16 weight row r (n values, a
// multiple of 8) with x, for r < nrows.
TEXT ·dotF16AVX512(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ nrows+24(FP), R12
	MOVQ out+32(FP), R13
	ROWPAIRS(2, F16DOT2)
	RET

// func dotBF16AVX512(w *byte, x *float32, n, nrows int, out *float32)
// is dotF16AVX512 for BF16 weights.
TEXT ·dotBF16AVX512(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ nrows+24(FP), R12
	MOVQ out+32(FP), R13
	ROWPAIRS(2, BF16DOT2)
	RET

// q8Pair is the VPERMPS index that spreads float 0 over lanes 0-7 and
// float 1 over 8-15.
DATA q8Pair<>+0x00(SB)/8, $0x0000000000000000
DATA q8Pair<>+0x08(SB)/8, $0x0000000000000000
DATA q8Pair<>+0x10(SB)/8, $0x0000000000000000
DATA q8Pair<>+0x18(SB)/8, $0x0000000000000000
DATA q8Pair<>+0x20(SB)/8, $0x0000000100000001
DATA q8Pair<>+0x28(SB)/8, $0x0000000100000001
DATA q8Pair<>+0x30(SB)/8, $0x0000000100000001
DATA q8Pair<>+0x38(SB)/8, $0x0000000100000001
GLOBL q8Pair<>(SB), RODATA|NOPTR, $64

// PAIRACTS prepares the two blocks of activations at aoff(DI) (scales at
// doff(DX)) for Q4ROWPAIR: Z3 = −c·(the sums of each four), for the
// weights' offset c (8) as bytes in Z30, and Z6 = the
// blocks' d_a in the low and high eight lanes (Z27: q8Pair).
#define PAIRACTS(aoff, doff) \
	VPXORD       Z3, Z3, Z3; \
	VPDPBUSD     aoff(DI), Z30, Z3; \
	VPSUBD       Z3, Z31, Z3; \
	VMOVQ        doff(DX), X6; \
	VPERMPS      Z6, Z27, Z6

// q8Quants is the VPERMT2B index that gathers the 64 quants of two Q8_0
// blocks from the 64 bytes at their start (d_A, 32 quants, d_B, 28
// quants) and the 64 at 4 bytes on (whose last 4 are B's last quants);
// q8Halves the VPERMW index that spreads d_A (word 0) over words 0-7 and
// d_B (word 17) over 8-15. Both loads stay inside the two blocks.
DATA q8Quants<>+0x00(SB)/8, $0x0908070605040302
DATA q8Quants<>+0x08(SB)/8, $0x11100f0e0d0c0b0a
DATA q8Quants<>+0x10(SB)/8, $0x1918171615141312
DATA q8Quants<>+0x18(SB)/8, $0x21201f1e1d1c1b1a
DATA q8Quants<>+0x20(SB)/8, $0x2b2a292827262524
DATA q8Quants<>+0x28(SB)/8, $0x333231302f2e2d2c
DATA q8Quants<>+0x30(SB)/8, $0x3b3a393837363534
DATA q8Quants<>+0x38(SB)/8, $0x7f7e7d7c3f3e3d3c
GLOBL q8Quants<>(SB), RODATA|NOPTR, $64
DATA q8Halves<>+0x00(SB)/8, $0x0000000000000000
DATA q8Halves<>+0x08(SB)/8, $0x0000000000000000
DATA q8Halves<>+0x10(SB)/8, $0x0011001100110011
DATA q8Halves<>+0x18(SB)/8, $0x0011001100110011
DATA q8Halves<>+0x20(SB)/8, $0x0000000000000000
DATA q8Halves<>+0x28(SB)/8, $0x0000000000000000
DATA q8Halves<>+0x30(SB)/8, $0x0000000000000000
DATA q8Halves<>+0x38(SB)/8, $0x0000000000000000
GLOBL q8Halves<>(SB), RODATA|NOPTR, $64

// Q8WPAIR loads the two Q8_0 blocks at woff(base): their 64 quants into
// zq as signed bytes and their scales into zd's low eight words (d_A) and
// next eight (d_B), still halves. Two loads and two permutes (Z28:
// q8Quants, Z29: q8Halves) do it.
#define Q8WPAIR(base, woff, zq, zd) \
	VMOVDQU64   woff(base), zq; \
	VPERMW      zq, Z29, zd; \
	VPERMT2B    (woff+4)(base), Z28, zq

// ROWS2 adds two blocks of both rows (SI and R9) to acc0 and acc1.
#define ROWS2(ROWPAIR, woff, aoff, doff, acc0, acc1) \
	PAIRACTS(aoff, doff); \
	ROWPAIR(SI, woff, aoff, acc0); \
	ROWPAIR(R9, woff, aoff, acc1)

// PAIRROWS is the row loop of the single-row Q4_0 kernel, blocks of bsize
// bytes (R8: a row's bytes): rows i and i+h (h = nrows/2, R10 counting
// the pairs, R11 = h rows' bytes, BX = h) at a time sharing PAIRACTS,
// four blocks per iteration into two accumulators per row (FMA latency,
// not throughput, bounds one accumulator), then an odd last row on its
// own. Rows i and i+1 side by side ran at a quarter of the speed when
// the weights stream from memory; h rows apart they are two sequential
// streams, faster than one. A row's odd last block goes through ONE.
#define PAIRROWS(ROWPAIR, ONE, bsize) \
	MOVQ  R12, R10; \
	SHRQ  $1, R10; \
	MOVQ  R10, R11; \
	IMULQ R8, R11; \
	MOVQ  R10, BX; \
	ANDQ  $1, R12; \
	TESTQ R10, R10; \
	JZ    last; \
rows2: \
	LEAQ (SI)(R11*1), R9; \
	Q8ROWSTART; \
loop4r: \
	CMPQ CX, $4; \
	JLT  pair2r; \
	ROWS2(ROWPAIR, 0, 0, 0, Z0, Z7); \
	ROWS2(ROWPAIR, 2*bsize, 64, 8, Z8, Z9); \
	ADDQ $(4*bsize), SI; \
	ADDQ $(4*bsize), R9; \
	ADDQ $128, DI; \
	ADDQ $16, DX; \
	SUBQ $4, CX; \
	JMP  loop4r; \
pair2r: \
	CMPQ CX, $2; \
	JLT  one2r; \
	ROWS2(ROWPAIR, 0, 0, 0, Z0, Z7); \
	ADDQ $(2*bsize), SI; \
	ADDQ $(2*bsize), R9; \
	ADDQ $64, DI; \
	ADDQ $8, DX; \
	SUBQ $2, CX; \
one2r: \
	CMPQ CX, $1; \
	JLT  done2r; \
	ONE(SI, Z0); \
	ONE(R9, Z7); \
	ADDQ $bsize, SI; \
done2r: \
	VADDPS  Z8, Z0, Z0; \
	VADDPS  Z9, Z7, Z7; \
	HSUM16; \
	VMOVSS  X0, (R13); \
	VMOVAPS Z7, Z0; \
	HSUM16; \
	VMOVSS  X0, (R13)(BX*4); \
	ADDQ    $4, R13; \
	DECQ    R10; \
	JNZ     rows2; \
	ADDQ    R11, SI; \
	LEAQ    (R13)(BX*4), R13; \
last: \
	CMPQ R12, $1; \
	JLT  end; \
	Q8ROWSTART; \
loop4: \
	CMPQ CX, $4; \
	JLT  pair; \
	PAIRACTS(0, 0); \
	ROWPAIR(SI, 0, 0, Z0); \
	PAIRACTS(64, 8); \
	ROWPAIR(SI, 2*bsize, 64, Z7); \
	ADDQ $(4*bsize), SI; \
	ADDQ $128, DI; \
	ADDQ $16, DX; \
	SUBQ $4, CX; \
	JMP  loop4; \
pair: \
	CMPQ CX, $2; \
	JLT  one; \
	PAIRACTS(0, 0); \
	ROWPAIR(SI, 0, 0, Z0); \
	ADDQ $(2*bsize), SI; \
	ADDQ $64, DI; \
	ADDQ $8, DX; \
	SUBQ $2, CX; \
one: \
	CMPQ CX, $1; \
	JLT  done; \
	ONE(SI, Z7); \
done: \
	VADDPS Z7, Z0, Z0; \
	HSUM16; \
	VMOVSS X0, (R13); \
end: \
	VZEROUPPER

// PAIRSETUP loads the single-row Q4_0 kernel's arguments and constants:
// R8 = nb·bsize, the bytes of a row, and Z30 = the weights' offset c as
// bytes.
#define PAIRSETUP(bsize, c) \
	MOVQ      w+0(FP), SI; \
	MOVQ      nrows+32(FP), R12; \
	MOVQ      out+40(FP), R13; \
	MOVQ      nb+24(FP), R8; \
	IMULQ     $bsize, R8; \
	VPXORD    Z31, Z31, Z31; \
	BCASTD(c, Z30); \
	VMOVDQU64 q8Pair<>(SB), Z27


// The four-row kernels multiply nr consecutive weight rows (at least 1)
// by four consecutive activation rows, setting out[r][o] for activation
// row r < 4 and weight row o < nr at dst + 4·(r·dstStride + o), and
// unpacking each weight block once for all four activation rows. One
// call takes a run of weight rows (matmul.go's batchRows), so the Go
// around it is paid per run, not per weight row of a few blocks. Those
// of the 32-value blocks (Q8_0, Q4_0) take the activation rows 32·nb
// bytes of quants apart, as acts lays them out, and their scales spread
// out (acts.spreadScales): each pair of blocks' d_A in eight floats, then
// d_B in eight (the odd last block's d in all sixteen), the rows
// 64·⌈nb/2⌉ bytes apart, so one multiply with a memory operand gives the
// product of scales, where two broadcasts, one of them masked into the
// other, took a fifth of the eight-row kernel's time (the 110M model's
// verify step, one thread). Their
// activations go into VPDPBUSD as unsigned bytes a+128 (a XOR 0x80, the
// one op per row and 64 values they cost) against the signed weights,
// and each row's sum starts from −128·Σw, which is the weights' and so
// computed once. The row pointers are DI plus R12 (zero), R8, 2·R8 and
// R9 = 3·R8; their scales DX plus R12, R10, 2·R10 and R11 = 3·R10. K4
// masks the dwords of activations to load: all for two blocks, the lower
// eight for the single last one, whose loads then stay inside the rows.

// X4ROW adds the blocks unpacked in Z11 (quants) and Z13 (their scales
// as floats) times the row at (DI)(aidx), spread scales (DX)(didx), to
// acc; Z10 holds −128·Σw. Clobbers Z8, Z9, Z12.
#define X4ROW(aidx, didx, acc) \
	VPXORD.Z    (DI)(aidx), Z30, K4, Z8; \
	VMOVDQA64   Z10, Z9; \
	VPDPBUSD    Z11, Z8, Z9; \
	VCVTDQ2PS   Z9, Z9; \
	VMULPS      (DX)(didx), Z13, Z12; \
	VFMADD231PS Z9, Z12, acc

// X4WSUM sets Z10 to −128·Σw of the unpacked blocks.
#define X4WSUM \
	VPXORD   Z10, Z10, Z10; \
	VPDPBUSD Z11, Z30, Z10; \
	VPSUBD   Z10, Z31, Z10

// X4QUAD adds the unpacked blocks times the four rows from DI and DX on
// to a0 ... a3.
#define X4QUAD(a0, a1, a2, a3) \
	X4ROW(R12*1, R12*1, a0); \
	X4ROW(R8*1, R10*1, a1); \
	X4ROW(R8*2, R10*2, a2); \
	X4ROW(R9*1, R11*1, a3)

// X4ROWS adds the unpacked blocks times the four rows to Z16-Z19.
#define X4ROWS \
	X4WSUM; \
	X4QUAD(Z16, Z17, Z18, Z19)

// X8ROWS adds them times the eight rows to Z16-Z19 and Z20-Z23, DI and
// DX moved on four rows for the last four and back.
#define X8ROWS \
	X4WSUM; \
	X4QUAD(Z16, Z17, Z18, Z19); \
	LEAQ (DI)(R8*4), DI; \
	LEAQ (DX)(R10*4), DX; \
	X4QUAD(Z20, Z21, Z22, Z23); \
	SUBQ qback-24(SP), DI; \
	SUBQ dback-32(SP), DX

// Q8X4PAIR and Q8X4ONE unpack Q8_0 blocks for X4BLOCKS.
#define Q8X4PAIR(base) \
	Q8WPAIR(base, 0, Z11, Z13); \
	VCVTPH2PS Y13, Z13

#define Q8X4ONE(base) \
	VMOVDQU 2(base), Y11; \
	X4ONESCALE(base)

// func dotQ8_0x4AVX512(w *byte, a *int8, ad *float32, nb, nr int, dst *float32, dstStride int)
// sets out[r][o] to the dot product of the Q8_0 weight row o (nb blocks)
// with Q8_0 activation row r, for r < 4 and o < nr; ad holds the rows'
// scales spread out.
TEXT ·dotQ8_0x4AVX512(SB), NOSPLIT, $16-56
	X4SETUP
	VMOVDQU64 q8Quants<>(SB), Z28
	VMOVDQU64 q8Halves<>(SB), Z29
	X4BLOCKS(Q8X4PAIR, Q8X4ONE, 34)
	RET

// func dotQ8_0x8AVX512(w *byte, a *int8, ad *float32, nb, nr int, dst *float32, dstStride int)
// is dotQ8_0x4AVX512 for eight activation rows, r < 8, each pair of
// blocks unpacked once for the eight; the sums are the four-row
// kernel's to the bit.
TEXT ·dotQ8_0x8AVX512(SB), NOSPLIT, $32-56
	X4SETUP
	VMOVDQU64 q8Quants<>(SB), Z28
	VMOVDQU64 q8Halves<>(SB), Z29
	X8BLOCKS(Q8X4PAIR, Q8X4ONE, 34)
	RET

// X1ACTS prepares the activations of the blocks at (DI), scales (DX),
// for X1ROW, as X4ROW does for one row: Z8 = a XOR 0x80 (K4 masking the
// dwords to load), Z14 = d_A in lanes 0-7 and d_B in 8-15 (K2).
#define X1ACTS \
	VPXORD.Z     (DI), Z30, K4, Z8; \
	VBROADCASTSS (DX), Z14; \
	VBROADCASTSS 4(DX), K2, Z14

// X1ROW adds a weight row's unpacked blocks (quants zq, scales zd as
// floats) times the activations X1ACTS prepared to acc: X4WSUM's and
// X4ROW's operations on the same values (the integer sums exact in any
// order, then the same conversion, product and FMA per lane), so the sum
// is the four-row kernels' to the bit. zw, t and s are scratch.
#define X1ROW(zq, zd, zw, t, s, acc) \
	VPXORD      zw, zw, zw; \
	VPDPBUSD    zq, Z30, zw; \
	VPSUBD      zw, Z31, zw; \
	VPDPBUSD    zq, Z8, zw; \
	VCVTDQ2PS   zw, t; \
	VMULPS      Z14, zd, s; \
	VFMADD231PS t, s, acc

// X1ONE unpacks the single last Q8_0 block at (base) as Q8X4ONE does,
// into zq (yq its lower half, the upper lanes zero) and zd.
#define X1ONE(base, yq, zd, yd) \
	VMOVDQU64    2(base), yq; \
	VPBROADCASTW (base), yd; \
	VCVTPH2PS    yd, zd

// X1ROWSTART points DI, DX and CX at the activations and their blocks,
// zeroes the sums Z16 and Z17 and sets the masks for two blocks at a time.
#define X1ROWSTART \
	MOVQ   a+8(FP), DI; \
	MOVQ   ad+16(FP), DX; \
	MOVQ   nb+24(FP), CX; \
	VXORPS Z16, Z16, Z16; \
	VXORPS Z17, Z17, Z17; \
	HIGHHALF; \
	KXNORW K4, K4, K4

// func dotQ8_0AVX512(w *byte, a *int8, ad *float32, nb, nr int, dst *float32)
// sets dst[o] to the dot product of Q8_0 weight row o (nb blocks) with
// the Q8_0 activations a (scales ad), for o < nr, each row's sum by
// dotQ8_0x4AVX512's operations (X1ROW), so a row's sums are the same bits
// whether one, four or eight rows are multiplied (MatMul's batch
// invariance). Rows i and i+h (h = nr/2) go side by side, two sequential
// weight streams and two independent FMA chains, then an odd last row
// alone (as the earlier two-stream kernel did: rows i and i+1 side by
// side ran far slower from memory). R8 is a row's bytes, R11 h rows', BX
// h, R10 counts the pairs, R12 the odd last row.
TEXT ·dotQ8_0AVX512(SB), NOSPLIT, $0-48
	X4SETUP
	VMOVDQU64 q8Quants<>(SB), Z28
	VMOVDQU64 q8Halves<>(SB), Z29
	MOVQ      w+0(FP), SI
	MOVQ      dst+40(FP), R13
	MOVQ      nb+24(FP), R8
	IMULQ     $34, R8
	MOVQ      nr+32(FP), R12
	MOVQ      R12, R10
	SHRQ      $1, R10
	MOVQ      R10, BX
	MOVQ      R10, R11
	IMULQ     R8, R11
	ANDQ      $1, R12
	TESTQ     R10, R10
	JZ        q8last

q8rows2:
	LEAQ (SI)(R11*1), R9
	X1ROWSTART

q8pair2:
	CMPQ      CX, $2
	JLT       q8one2
	Q8WPAIR(SI, 0, Z11, Z13)
	VCVTPH2PS Y13, Z13
	Q8WPAIR(R9, 0, Z21, Z23)
	VCVTPH2PS Y23, Z23
	X1ACTS
	X1ROW(Z11, Z13, Z10, Z9, Z12, Z16)
	X1ROW(Z21, Z23, Z20, Z24, Z22, Z17)
	ADDQ      $68, SI
	ADDQ      $68, R9
	ADDQ      $64, DI
	ADDQ      $8, DX
	SUBQ      $2, CX
	JMP       q8pair2

q8one2:
	TESTQ CX, CX
	JZ    q8done2
	X4LAST
	X1ONE(SI, Y11, Z13, Y13)
	X1ONE(R9, Y21, Z23, Y23)
	X1ACTS
	X1ROW(Z11, Z13, Z10, Z9, Z12, Z16)
	X1ROW(Z21, Z23, Z20, Z24, Z22, Z17)
	ADDQ  $34, SI

q8done2:
	X4STORE(Z16, (R13))
	X4STORE(Z17, (R13)(BX*4))
	ADDQ $4, R13
	DECQ R10
	JNZ  q8rows2
	ADDQ R11, SI
	LEAQ (R13)(BX*4), R13

q8last:
	TESTQ R12, R12
	JZ    q8end
	X1ROWSTART

q8pair1:
	CMPQ      CX, $2
	JLT       q8one1
	Q8WPAIR(SI, 0, Z11, Z13)
	VCVTPH2PS Y13, Z13
	X1ACTS
	X1ROW(Z11, Z13, Z10, Z9, Z12, Z16)
	ADDQ      $68, SI
	ADDQ      $64, DI
	ADDQ      $8, DX
	SUBQ      $2, CX
	JMP       q8pair1

q8one1:
	TESTQ CX, CX
	JZ    q8done1
	X4LAST
	X1ONE(SI, Y11, Z13, Y13)
	X1ACTS
	X1ROW(Z11, Z13, Z10, Z9, Z12, Z16)

q8done1:
	X4STORE(Z16, (R13))

q8end:
	VZEROUPPER
	RET

// q4Quants is the VPERMB index that lays the 16 qs bytes of two Q4_0
// blocks (at 2 and 32 in the register Q4ROWPAIR loads) out as [qs_A,
// qs_A, qs_B, qs_B], for q4Shift to shift the second copies' words by 4,
// leaving their high nibbles: values 0-15, 16-31 of each block in value
// order.
// q4Halves spreads d_A (word 0) over words 0-7 and d_B (word 9) over
// 8-15.
DATA q4Quants<>+0x00(SB)/8, $0x0908070605040302
DATA q4Quants<>+0x08(SB)/8, $0x11100f0e0d0c0b0a
DATA q4Quants<>+0x10(SB)/8, $0x0908070605040302
DATA q4Quants<>+0x18(SB)/8, $0x11100f0e0d0c0b0a
DATA q4Quants<>+0x20(SB)/8, $0x2726252423222120
DATA q4Quants<>+0x28(SB)/8, $0x2f2e2d2c2b2a2928
DATA q4Quants<>+0x30(SB)/8, $0x2726252423222120
DATA q4Quants<>+0x38(SB)/8, $0x2f2e2d2c2b2a2928
GLOBL q4Quants<>(SB), RODATA|NOPTR, $64
DATA q4Shift<>+0x00(SB)/8, $0x0000000000000000
DATA q4Shift<>+0x08(SB)/8, $0x0000000000000000
DATA q4Shift<>+0x10(SB)/8, $0x0004000400040004
DATA q4Shift<>+0x18(SB)/8, $0x0004000400040004
DATA q4Shift<>+0x20(SB)/8, $0x0000000000000000
DATA q4Shift<>+0x28(SB)/8, $0x0000000000000000
DATA q4Shift<>+0x30(SB)/8, $0x0004000400040004
DATA q4Shift<>+0x38(SB)/8, $0x0004000400040004
GLOBL q4Shift<>(SB), RODATA|NOPTR, $64
DATA q4Halves<>+0x00(SB)/8, $0x0000000000000000
DATA q4Halves<>+0x08(SB)/8, $0x0000000000000000
DATA q4Halves<>+0x10(SB)/8, $0x0009000900090009
DATA q4Halves<>+0x18(SB)/8, $0x0009000900090009
DATA q4Halves<>+0x20(SB)/8, $0x0000000000000000
DATA q4Halves<>+0x28(SB)/8, $0x0000000000000000
DATA q4Halves<>+0x30(SB)/8, $0x0000000000000000
DATA q4Halves<>+0x38(SB)/8, $0x0000000000000000
GLOBL q4Halves<>(SB), RODATA|NOPTR, $64

// Q4ROWPAIR adds the two Q4_0 blocks (18 bytes each) at woff(base) times
// the activations PAIRACTS prepared to acc: the nibbles q+8 go into
// VPDPBUSD as unsigned bytes, the sum starting from −8·Σa. Two loads (the
// first 32 bytes, B's 16 qs bytes into bytes 32-47; a masked 36-byte load
// is slow when it misses the cache) bring in both blocks, VPERMB and
// VPSRLVW (Z28, Z26) their quants, VPERMW (Z29) their scales. Z15 holds
// 0x0f bytes. Clobbers Z2, Z4, Z5.
#define Q4ROWPAIR(base, woff, aoff, acc) \
	Q4WPAIR(base, woff, Y2, Z2, Z5); \
	VMOVDQA64   Z3, Z4; \
	VPDPBUSD    aoff(DI), Z2, Z4; \
	VCVTDQ2PS   Z4, Z4; \
	VCVTPH2PS   Y5, Z5; \
	VMULPS      Z6, Z5, Z5; \
	VFMADD231PS Z4, Z5, acc

// Q4WPAIR loads the two Q4_0 blocks at woff(base): their 64 quants into
// zq (yq its lower half) as the nibbles 0-15 and their scales into zd's
// low eight words (d_A) and next eight (d_B), still halves.
#define Q4WPAIR(base, woff, yq, zq, zd) \
	VMOVDQU      woff(base), yq; \
	VINSERTI32X4 $2, (woff+20)(base), zq, zq; \
	VPERMW       zq, Z29, zd; \
	VPERMB       zq, Z28, zq; \
	VPSRLVW      Z26, zq, zq; \
	VPANDD       Z15, zq, zq

// Q4WONE loads the 32 quants of the single Q4_0 block at (base) into yq
// (xq its lower half) as the nibbles 0-15; xt is scratch.
#define Q4WONE(base, xq, yq, xt) \
	VMOVDQU     2(base), xq; \
	VPSRLW      $4, xq, xt; \
	VINSERTI128 $1, xt, yq, yq; \
	VPANDD      Y15, yq, yq

// Q4ONE adds the single Q4_0 block at (base) times the activations at
// (DI), scale (DX), to acc, in 256-bit registers, as Q4ROWPAIR does it.
#define Q4ONE(base, acc) \
	Q4WONE(base, X2, Y2, X4); \
	VPXORD       Y4, Y4, Y4; \
	VPDPBUSD     (DI), Y30, Y4; \
	VPSUBD       Y4, Y31, Y4; \
	VPDPBUSD     (DI), Y2, Y4; \
	VCVTDQ2PS    Y4, Y4; \
	VPBROADCASTW (base), X5; \
	VCVTPH2PS    X5, Y5; \
	VMULPS.BCST  (DX), Y5, Y5; \
	VMULPS       Y4, Y5, Y4; \
	VADDPS       Z4, acc, acc

// func dotQ4_0AVX512(w *byte, a *int8, ad *float32, nb, nrows int, out *float32)
// sets out[r] to the dot product of Q4_0 weight row r (nb blocks) with the
// Q8_0 activations a (scales ad), for r < nrows.
TEXT ·dotQ4_0AVX512(SB), NOSPLIT, $0-48
	PAIRSETUP(18, 0x08080808)
	BCASTD(0x0f0f0f0f, Z15)
	VMOVDQU64 q4Quants<>(SB), Z28
	VMOVDQU64 q4Halves<>(SB), Z29
	VMOVDQU64 q4Shift<>(SB), Z26
	PAIRROWS(Q4ROWPAIR, Q4ONE, 18)
	RET

// Q4X4PAIR and Q4X4ONE unpack Q4_0 blocks for X4BLOCKS, the quants less
// 8 (Z14 holds 8s as bytes).
#define Q4X4PAIR(base) \
	Q4WPAIR(base, 0, Y11, Z11, Z13); \
	VPSUBB    Z14, Z11, Z11; \
	VCVTPH2PS Y13, Z13

#define Q4X4ONE(base) \
	Q4WONE(base, X11, Y11, X12); \
	VPSUBB Y14, Y11, Y11; \
	X4ONESCALE(base)

// func dotQ4_0x4AVX512(w *byte, a *int8, ad *float32, nb, nr int, dst *float32, dstStride int)
// is dotQ8_0x4AVX512 for Q4_0 weights, unpacked as dotQ4_0AVX512 does.
TEXT ·dotQ4_0x4AVX512(SB), NOSPLIT, $16-56
	X4SETUP
	BCASTD(0x0f0f0f0f, Z15)
	BCASTD(0x08080808, Z14)
	VMOVDQU64 q4Quants<>(SB), Z28
	VMOVDQU64 q4Halves<>(SB), Z29
	VMOVDQU64 q4Shift<>(SB), Z26
	X4BLOCKS(Q4X4PAIR, Q4X4ONE, 18)
	RET

// func dotQ4_0x8AVX512(w *byte, a *int8, ad *float32, nb, nr int, dst *float32, dstStride int)
// is dotQ4_0x4AVX512 for eight activation rows, as dotQ8_0x8AVX512.
TEXT ·dotQ4_0x8AVX512(SB), NOSPLIT, $32-56
	X4SETUP
	BCASTD(0x0f0f0f0f, Z15)
	BCASTD(0x08080808, Z14)
	VMOVDQU64 q4Quants<>(SB), Z28
	VMOVDQU64 q4Halves<>(SB), Z29
	VMOVDQU64 q4Shift<>(SB), Z26
	X8BLOCKS(Q4X4PAIR, Q4X4ONE, 18)
	RET

// Q6BITS sets zlo to the 64 quants (0..63) of values 128h..128h+63 of
// the Q6_K block at (base) and zhi to those of 128h+64..128h+127. The ql
// bytes 64h.. give the low nibbles of values l, l+32 (l < 32) and the
// high nibbles of values l+64, l+96; the qh bytes 128+32h.. as [qh,
// qh>>2] give their top two bits at bits 0-1 (values l, l+32) and 4-5
// (l+64, l+96). Z15 holds 0x0f bytes, Z14 0x30 bytes. Clobbers Z3, Z5.
#define Q6BITS(base, h, zlo, zhi) \
	VMOVDQU64    (64*h)(base), zhi; \
	VMOVDQU      (128+32*h)(base), Y3; \
	VPSRLW       $2, Y3, Y5; \
	VINSERTI64X4 $1, Y5, Z3, Z3; \
	VPANDD       Z15, zhi, zlo; \
	VPSLLW       $4, Z3, Z5; \
	VPTERNLOGD   $0xf8, Z14, Z5, zlo; \
	VPSRLW       $4, zhi, zhi; \
	VPANDD       Z15, zhi, zhi; \
	VPTERNLOGD   $0xf8, Z14, Z3, zhi

// The K4UNPACK tables, one int16 per scale (words 0-7) and minimum (8-15)
// of a Q4_K/Q5_K block, over its 12 scale bytes s: the byte holding the
// low bits (s[j] or s[j+4] for j < 4, s[j+4] for j >= 4; high byte
// cleared), the byte holding the top two bits for j >= 4 (s[j-4] for the
// scales, s[j] for the minimums; none below), the shift of the low bits
// (4 for the minimums j >= 4, whose low bits are s[j+4]'s high nibble)
// and their mask (63 or 15).
DATA k4Lo<>+0x00(SB)/8, $0x8003800280018000
DATA k4Lo<>+0x08(SB)/8, $0x800b800a80098008
DATA k4Lo<>+0x10(SB)/8, $0x8007800680058004
DATA k4Lo<>+0x18(SB)/8, $0x800b800a80098008
DATA k4Lo<>+0x20(SB)/8, $0x8003800280018000
DATA k4Lo<>+0x28(SB)/8, $0x800b800a80098008
DATA k4Lo<>+0x30(SB)/8, $0x8007800680058004
DATA k4Lo<>+0x38(SB)/8, $0x800b800a80098008
GLOBL k4Lo<>(SB), RODATA|NOPTR, $64
DATA k4Hi<>+0x00(SB)/8, $0x8080808080808080
DATA k4Hi<>+0x08(SB)/8, $0x8003800280018000
DATA k4Hi<>+0x10(SB)/8, $0x8080808080808080
DATA k4Hi<>+0x18(SB)/8, $0x8007800680058004
DATA k4Hi<>+0x20(SB)/8, $0x8080808080808080
DATA k4Hi<>+0x28(SB)/8, $0x8003800280018000
DATA k4Hi<>+0x30(SB)/8, $0x8080808080808080
DATA k4Hi<>+0x38(SB)/8, $0x8007800680058004
GLOBL k4Hi<>(SB), RODATA|NOPTR, $64
DATA k4Shift<>+0x00(SB)/8, $0x0000000000000000
DATA k4Shift<>+0x08(SB)/8, $0x0000000000000000
DATA k4Shift<>+0x10(SB)/8, $0x0000000000000000
DATA k4Shift<>+0x18(SB)/8, $0x0004000400040004
GLOBL k4Shift<>(SB), RODATA|NOPTR, $32
DATA k4Mask<>+0x00(SB)/8, $0x003f003f003f003f
DATA k4Mask<>+0x08(SB)/8, $0x000f000f000f000f
DATA k4Mask<>+0x10(SB)/8, $0x003f003f003f003f
DATA k4Mask<>+0x18(SB)/8, $0x000f000f000f000f
GLOBL k4Mask<>(SB), RODATA|NOPTR, $32

// k4Perm holds four VPERMW index vectors: vector j gives the int16 lanes
// of chunk j's VPMADDUBSW product (values 64j.. : 16 lanes of sub-block 2j,
// then 16 of 2j+1) the index of their scale; k4MinDup spreads minimum j
// over lanes 2j and 2j+1, to meet the 16-value sums in pairs.
DATA k4Perm<>+0x00(SB)/8, $0x0000000000000000
DATA k4Perm<>+0x08(SB)/8, $0x0000000000000000
DATA k4Perm<>+0x10(SB)/8, $0x0000000000000000
DATA k4Perm<>+0x18(SB)/8, $0x0000000000000000
DATA k4Perm<>+0x20(SB)/8, $0x0001000100010001
DATA k4Perm<>+0x28(SB)/8, $0x0001000100010001
DATA k4Perm<>+0x30(SB)/8, $0x0001000100010001
DATA k4Perm<>+0x38(SB)/8, $0x0001000100010001
DATA k4Perm<>+0x40(SB)/8, $0x0002000200020002
DATA k4Perm<>+0x48(SB)/8, $0x0002000200020002
DATA k4Perm<>+0x50(SB)/8, $0x0002000200020002
DATA k4Perm<>+0x58(SB)/8, $0x0002000200020002
DATA k4Perm<>+0x60(SB)/8, $0x0003000300030003
DATA k4Perm<>+0x68(SB)/8, $0x0003000300030003
DATA k4Perm<>+0x70(SB)/8, $0x0003000300030003
DATA k4Perm<>+0x78(SB)/8, $0x0003000300030003
DATA k4Perm<>+0x80(SB)/8, $0x0004000400040004
DATA k4Perm<>+0x88(SB)/8, $0x0004000400040004
DATA k4Perm<>+0x90(SB)/8, $0x0004000400040004
DATA k4Perm<>+0x98(SB)/8, $0x0004000400040004
DATA k4Perm<>+0xa0(SB)/8, $0x0005000500050005
DATA k4Perm<>+0xa8(SB)/8, $0x0005000500050005
DATA k4Perm<>+0xb0(SB)/8, $0x0005000500050005
DATA k4Perm<>+0xb8(SB)/8, $0x0005000500050005
DATA k4Perm<>+0xc0(SB)/8, $0x0006000600060006
DATA k4Perm<>+0xc8(SB)/8, $0x0006000600060006
DATA k4Perm<>+0xd0(SB)/8, $0x0006000600060006
DATA k4Perm<>+0xd8(SB)/8, $0x0006000600060006
DATA k4Perm<>+0xe0(SB)/8, $0x0007000700070007
DATA k4Perm<>+0xe8(SB)/8, $0x0007000700070007
DATA k4Perm<>+0xf0(SB)/8, $0x0007000700070007
DATA k4Perm<>+0xf8(SB)/8, $0x0007000700070007
GLOBL k4Perm<>(SB), RODATA|NOPTR, $256
DATA k4MinDup<>+0x00(SB)/8, $0x0009000900080008
DATA k4MinDup<>+0x08(SB)/8, $0x000b000b000a000a
DATA k4MinDup<>+0x10(SB)/8, $0x000d000d000c000c
DATA k4MinDup<>+0x18(SB)/8, $0x000f000f000e000e
GLOBL k4MinDup<>(SB), RODATA|NOPTR, $32

// K4UNPACK sets Y4 to the eight 6-bit scales (words 0-7) and eight
// minimums (8-15) of the Q4_K/Q5_K block at (base), all in vector
// registers: each word is its low-bits byte shifted and masked, OR its
// top-bits byte's bits 6-7 moved to 4-5. Clobbers Y5.
#define K4UNPACK(base) \
	VBROADCASTI128 4(base), Y4; \
	VPSHUFB        Y23, Y4, Y5; \
	VPSHUFB        Y22, Y4, Y4; \
	VPSRLVW        Y24, Y4, Y4; \
	VPANDD         Y21, Y4, Y4; \
	VPSRLW         $2, Y5, Y5; \
	VPTERNLOGD     $0xf8, Y14, Y5, Y4

// K4QUANTS sets zq to the 64 quants of a K-quant chunk from its 32 qs
// bytes at off(base): the low nibbles, then the high ones (the upper copy
// shifted under K3, the upper 32 words). Z15 holds 0x0f bytes.
#define K4QUANTS(base, off, zq) \
	VBROADCASTI64X4 off(base), zq; \
	VPSRLW          $4, zq, K3, zq; \
	VPANDD          Z15, zq, zq

// K5FIFTH adds the fifth bits to the quants of chunk j of a Q5_K block
// in zq: zqh holds its qh bytes (at 16) as [qh, qh>>1], so bit 2j of
// each byte, moved to bit 4, is the fifth bit of the low then the high
// nibbles' values. z10 holds 0x10 bytes; zt is scratch.
#define K5FIFTH(j, zq, zqh, z10, zt) \
	VPSRLW     $(2*j), zqh, zt; \
	VPSLLW     $4, zt, zt; \
	VPTERNLOGD $0xf8, z10, zt, zq

// K45CONSTS loads the Q4_K/Q5_K kernels' constants, K3 included.
#define K45CONSTS \
	MOVL      $0xffff0000, AX; \
	KMOVD     AX, K3; \
	BCASTD(0x0f0f0f0f, Z15); \
	BCASTD(0x30303030, Z14); \
	BCASTD(0x10101010, Z13); \
	VMOVDQU64 k4Perm<>+0(SB), Z16; \
	VMOVDQU64 k4Perm<>+64(SB), Z17; \
	VMOVDQU64 k4Perm<>+128(SB), Z18; \
	VMOVDQU64 k4Perm<>+192(SB), Z19; \
	VMOVDQU64 k4MinDup<>(SB), Y20; \
	VMOVDQU64 k4Mask<>(SB), Y21; \
	VMOVDQU64 k4Lo<>(SB), Y22; \
	VMOVDQU64 k4Hi<>(SB), Y23; \
	VMOVDQU64 k4Shift<>(SB), Y24

#define NOPREP(base)

// Q5QH sets zqh (yqh its lower half) to the qh bytes of the Q5_K block
// at (base) as [qh, qh>>1]; yt is scratch.
#define Q5QH(base, yqh, zqh, yt) \
	VMOVDQU      16(base), yqh; \
	VPSRLW       $1, yqh, yt; \
	VINSERTI64X4 $1, yt, zqh, zqh

// KXDOTS sets Z0 to the int32 sums Σ sc·q·a of the activation row at
// (DI)(aidx) with the 256 quants the four- and eight-row kernels
// unpacked into Z25-Z28 (chunks of 64 values, unsigned), their scales in
// Z29 (chunks 0 and 1) and Z30 (2 and 3) as KXSCALES lays them out:
// VPDPBUSD sums each four products of a chunk in a dword (at most 4·63·127,
// so an int16 holds it), VPACKSSDW packs two chunks' sums into words and
// one VPMADDWD or VPDPWSSD scales and adds each pair of them, six
// multiplies where VPMADDUBSW and VPDPWSSD take eight. Clobbers Z1-Z3.
#define KXDOTS(aidx) \
	VPXORD    Z0, Z0, Z0; \
	VPXORD    Z1, Z1, Z1; \
	VPXORD    Z2, Z2, Z2; \
	VPXORD    Z3, Z3, Z3; \
	VPDPBUSD  (DI)(aidx), Z25, Z0; \
	VPDPBUSD  64(DI)(aidx), Z26, Z1; \
	VPDPBUSD  128(DI)(aidx), Z27, Z2; \
	VPDPBUSD  192(DI)(aidx), Z28, Z3; \
	VPACKSSDW Z1, Z0, Z0; \
	VPACKSSDW Z3, Z2, Z2; \
	VPMADDWD  Z29, Z0, Z0; \
	VPDPWSSD  Z30, Z2, Z0

// kxPerm4 and kxPerm6 are KXSCALES' VPERMW indices for Q4_K/Q5_K and
// Q6_K: vector v gives word p of 128-bit lane l of VPACKSSDW's packing
// of chunks 2v and 2v+1 (chunk 2v+(p≥4), its dword 4l+p%4: values
// 4(4l+p%4).. of the chunk) the index of its sub-block's scale, of
// 32 values (chunk c, dword d: 2c + d/8) or of 16 (4c + d/4).
DATA kxPerm4<>+0x00(SB)/8, $0x0000000000000000
DATA kxPerm4<>+0x08(SB)/8, $0x0002000200020002
DATA kxPerm4<>+0x10(SB)/8, $0x0000000000000000
DATA kxPerm4<>+0x18(SB)/8, $0x0002000200020002
DATA kxPerm4<>+0x20(SB)/8, $0x0001000100010001
DATA kxPerm4<>+0x28(SB)/8, $0x0003000300030003
DATA kxPerm4<>+0x30(SB)/8, $0x0001000100010001
DATA kxPerm4<>+0x38(SB)/8, $0x0003000300030003
DATA kxPerm4<>+0x40(SB)/8, $0x0004000400040004
DATA kxPerm4<>+0x48(SB)/8, $0x0006000600060006
DATA kxPerm4<>+0x50(SB)/8, $0x0004000400040004
DATA kxPerm4<>+0x58(SB)/8, $0x0006000600060006
DATA kxPerm4<>+0x60(SB)/8, $0x0005000500050005
DATA kxPerm4<>+0x68(SB)/8, $0x0007000700070007
DATA kxPerm4<>+0x70(SB)/8, $0x0005000500050005
DATA kxPerm4<>+0x78(SB)/8, $0x0007000700070007
GLOBL kxPerm4<>(SB), RODATA|NOPTR, $128
DATA kxPerm6<>+0x00(SB)/8, $0x0000000000000000
DATA kxPerm6<>+0x08(SB)/8, $0x0004000400040004
DATA kxPerm6<>+0x10(SB)/8, $0x0001000100010001
DATA kxPerm6<>+0x18(SB)/8, $0x0005000500050005
DATA kxPerm6<>+0x20(SB)/8, $0x0002000200020002
DATA kxPerm6<>+0x28(SB)/8, $0x0006000600060006
DATA kxPerm6<>+0x30(SB)/8, $0x0003000300030003
DATA kxPerm6<>+0x38(SB)/8, $0x0007000700070007
DATA kxPerm6<>+0x40(SB)/8, $0x0008000800080008
DATA kxPerm6<>+0x48(SB)/8, $0x000c000c000c000c
DATA kxPerm6<>+0x50(SB)/8, $0x0009000900090009
DATA kxPerm6<>+0x58(SB)/8, $0x000d000d000d000d
DATA kxPerm6<>+0x60(SB)/8, $0x000a000a000a000a
DATA kxPerm6<>+0x68(SB)/8, $0x000e000e000e000e
DATA kxPerm6<>+0x70(SB)/8, $0x000b000b000b000b
DATA kxPerm6<>+0x78(SB)/8, $0x000f000f000f000f
GLOBL kxPerm6<>(SB), RODATA|NOPTR, $128

// KXSCALES sets Z29 and Z30 to the scales (words of zs) that KXDOTS
// applies, by the two VPERMW index vectors at perm, each loaded into the
// register it turns into: the eight-row kernels have no registers to
// keep them in.
#define KXSCALES(perm, zs) \
	VMOVDQU64 perm+0(SB), Z29; \
	VMOVDQU64 perm+64(SB), Z30; \
	VPERMW    zs, Z29, Z29; \
	VPERMW    zs, Z30, Z30

// K45XUNPACK unpacks the Q4_K or Q5_K block at (base) for K4XROW: PREP
// (the Q5_K fifth bits, or nothing), its quants (QUANTS(base, j, zq) for
// chunk j) and scales as KXDOTS takes them, the minimums' words in Y6
// (as K4MINS spreads them), d and dmin broadcast in Z8 and Z7. Clobbers
// Z3-Z5 (and Z0-Z2 for Q5_K).
#define K45XUNPACK(PREP, QUANTS, base) \
	PREP(base); \
	K4UNPACK(base); \
	VPERMW       Y4, Y20, Y6; \
	VCVTPH2PS    (base), X5; \
	VBROADCASTSS X5, Z8; \
	VMOVSHDUP    X5, X7; \
	VBROADCASTSS X7, Z7; \
	KXSCALES(kxPerm4<>, Z4); \
	QUANTS(base, 0, Z25); \
	QUANTS(base, 1, Z26); \
	QUANTS(base, 2, Z27); \
	QUANTS(base, 3, Z28)

#define K4XQUANTS(base, j, zq) K4QUANTS(base, 16+32*j, zq)
#define K4XUNPACK(base) K45XUNPACK(NOPREP, K4XQUANTS, base)

// Q5XPREP sets Z0 to the qh bytes of the Q5_K block at (base) as
// K5FIFTH takes them and Z1 to 0x10 bytes (0x30 >> 1, AND 0x30).
#define Q5XPREP(base) \
	Q5QH(base, Y0, Z0, Y2); \
	VPSRLD $1, Z14, Z1; \
	VPANDD Z14, Z1, Z1

#define K5XQUANTS(base, j, zq) \
	K4QUANTS(base, 48+32*j, zq); \
	K5FIFTH(j, zq, Z0, Z1, Z3)

#define Q5XUNPACK(base) K45XUNPACK(Q5XPREP, K5XQUANTS, base)

// K4XROW adds the Q4_K or Q5_K block K45XUNPACK unpacked times the activation row
// at (DI)(aidx), 16-value sums (BX)(bidx), scale (DX)(didx), to acc:
// d_a·(d·Σ sc·q·a − dmin·Σ m·bsums). Clobbers Z0-Z3.
#define K4XROW(aidx, bidx, didx, acc) \
	KXDOTS(aidx); \
	VPMADDWD         (BX)(bidx), Y6, Y1; \
	VCVTDQ2PS        Z0, Z0; \
	VCVTDQ2PS        Z1, Z1; \
	VMULPS           Z8, Z0, Z0; \
	VFNMADD231PS     Z7, Z1, Z0; \
	VFMADD231PS.BCST (DX)(didx), Z0, acc

// K4X4BLOCK, Q5X4BLOCK and Q6X4BLOCK are KX4ROWS' blocks: each unpacks
// the block at SI once and multiplies it by the four activation rows.
#define K4X4BLOCK K4XUNPACK(SI); KXQUAD(K4XROW, Z9, Z10, Z12, Z13)
#define Q5X4BLOCK Q5XUNPACK(SI); KXQUAD(K4XROW, Z9, Z10, Z12, Z13)

// func dotQ4Kx4AVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)
// sets out[r][o] to the dot product of the Q4_K weight row o (nb blocks)
// with Q8_K activation row r, for r < 4 and o < nr: each block's scales,
// minimums and quants unpacked once for the four activation rows.
TEXT ·dotQ4Kx4AVX512(SB), NOSPLIT, $16-64
	K45CONSTS
	KX4ROWS(K4X4BLOCK, 144, Z9, Z10, Z12, Z13)
	RET

// func dotQ5Kx4AVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)
// is dotQ4Kx4AVX512 for Q5_K weights: qs at 48, the fifth bits at 16.
TEXT ·dotQ5Kx4AVX512(SB), NOSPLIT, $16-64
	K45CONSTS
	KX4ROWS(Q5X4BLOCK, 176, Z9, Z10, Z12, Z13)
	RET

// Q6XUNPACK unpacks the Q6_K block at (base) for Q6XROW: its quants and
// scales as KXDOTS takes them, the sixteen scales as words in Y21 and d
// broadcast in Z8. Clobbers Z3, Z5.
#define Q6XUNPACK(base) \
	VPMOVSXBW    192(base), Y21; \
	VPBROADCASTW 208(base), Y8; \
	VCVTPH2PS    Y8, Z8; \
	KXSCALES(kxPerm6<>, Z21); \
	Q6BITS(base, 0, Z25, Z26); \
	Q6BITS(base, 1, Z27, Z28)

// Q6XROW adds the Q6_K block Q6XUNPACK unpacked times the activation row
// at (DI)(aidx), 16-value sums (BX)(bidx), scale (DX)(didx), to acc:
// d_a·d·Σ_k sc_k·(Σ q·a − 32·bsum_k). Clobbers Z0-Z3.
#define Q6XROW(aidx, bidx, didx, acc) \
	KXDOTS(aidx); \
	VPMADDWD         (BX)(bidx), Y21, Y1; \
	VPSLLD           $5, Z1, Z1; \
	VPSUBD           Z1, Z0, Z0; \
	VCVTDQ2PS        Z0, Z0; \
	VMULPS           Z8, Z0, Z0; \
	VFMADD231PS.BCST (DX)(didx), Z0, acc

#define Q6X4BLOCK Q6XUNPACK(SI); KXQUAD(Q6XROW, Z9, Z10, Z12, Z13)

// func dotQ6Kx4AVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)
// is dotQ4Kx4AVX512 for Q6_K weights.
TEXT ·dotQ6Kx4AVX512(SB), NOSPLIT, $16-64
	BCASTD(0x0f0f0f0f, Z15)
	BCASTD(0x30303030, Z14)
	KX4ROWS(Q6X4BLOCK, 210, Z9, Z10, Z12, Z13)
	RET

// The eight-row K-quant kernels, func(w *byte, a *int8, ad *float32, bs
// *int16, nb, nr int, dst *float32, dstStride int), are the four-row ones
// for eight consecutive activation rows, out[r][o] for r < 8: each block
// unpacked once for the eight. Their sums are the four-row kernels' to
// the bit, the same ROW macros computing each one. Measured on a 2-core
// Zen 4, one weight block times one activation row, 32 weight rows per
// call: Q4_K 1.84 ns four rows at a time, 1.60 eight (4096 values per
// row; 2.30 and 1.93 at 768), Q6_K 1.72 and 1.57 (2.11, 1.88).

// func dotQ4Kx8AVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)
// is dotQ4Kx4AVX512 for eight activation rows.
TEXT ·dotQ4Kx8AVX512(SB), NOSPLIT, $40-64
	K45CONSTS
	KX8ROWS(K4XUNPACK, K4XROW, 144)
	RET

// func dotQ5Kx8AVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)
// is dotQ5Kx4AVX512 for eight activation rows.
TEXT ·dotQ5Kx8AVX512(SB), NOSPLIT, $40-64
	K45CONSTS
	KX8ROWS(Q5XUNPACK, K4XROW, 176)
	RET

// func dotQ6Kx8AVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)
// is dotQ6Kx4AVX512 for eight activation rows.
TEXT ·dotQ6Kx8AVX512(SB), NOSPLIT, $40-64
	BCASTD(0x0f0f0f0f, Z15)
	BCASTD(0x30303030, Z14)
	KX8ROWS(Q6XUNPACK, Q6XROW, 210)
	RET

// KX1ROWS is KX4ROWS for the one activation row of the single-row K-quant
// kernels, func(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst
// *float32), out[o] for o < nr: UNPACK(SI) unpacks a block and ROW
// multiplies it by the row into Z9, the four- and eight-row kernels'
// macros and operations, so a row's sums are the same bits at every row
// count (MatMul's batch invariance).
#define KX1ROWS(UNPACK, ROW, bsize) \
	MOVQ w+0(FP), SI; \
	X4ROWSTART(nr+40(FP), dst+48(FP)); \
row: \
	KXROWSETUP; \
	VXORPS Z9, Z9, Z9; \
block: \
	UNPACK(SI); \
	ROW(R12*1, R12*1, R12*1, Z9); \
	KSTEP(bsize, block); \
	MOVQ outp-16(SP), R13; \
	X4STORE(Z9, (R13)); \
	X4ROWDONE; \
	JNZ  row; \
	VZEROUPPER

// func dotQ4KAVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32)
// sets dst[o] to the dot product of Q4_K weight row o (nb blocks) with
// the Q8_K activations a (scales ad, 16-value sums bs), for o < nr:
// dotQ4Kx4AVX512 for one activation row.
TEXT ·dotQ4KAVX512(SB), NOSPLIT, $16-56
	K45CONSTS
	KX1ROWS(K4XUNPACK, K4XROW, 144)
	RET

// func dotQ5KAVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32)
// is dotQ5Kx4AVX512 for one activation row.
TEXT ·dotQ5KAVX512(SB), NOSPLIT, $16-56
	K45CONSTS
	KX1ROWS(Q5XUNPACK, K4XROW, 176)
	RET

// func dotQ6KAVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32)
// is dotQ6Kx4AVX512 for one activation row.
TEXT ·dotQ6KAVX512(SB), NOSPLIT, $16-56
	BCASTD(0x0f0f0f0f, Z15)
	BCASTD(0x30303030, Z14)
	KX1ROWS(Q6XUNPACK, Q6XROW, 210)
	RET

// The dequantizers below decode whole blocks into float32, bit for bit as
// dequantGo does: the same conversions, and the same products rounded in
// the same order, never fused.

// func dequantF16AVX512(src *byte, dst *float32, n int)
// sets dst[0:n] to the F16 values at src; n is a multiple of 16, at
// least 16.
TEXT ·dequantF16AVX512(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX

f16dq:
	VCVTPH2PS (SI), Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	SUBQ      $16, CX
	JNZ       f16dq
	VZEROUPPER
	RET

// func dequantBF16AVX512(src *byte, dst *float32, n int)
// sets dst[0:n] to the BF16 values at src (each the top half of a
// float32); n is a multiple of 16, at least 16.
TEXT ·dequantBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX

bf16dq:
	VPMOVZXWD (SI), Z0
	VPSLLD    $16, Z0, Z0
	VMOVDQU32 Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	SUBQ      $16, CX
	JNZ       bf16dq
	VZEROUPPER
	RET

// DQSCALED stores the int32s in zreg, converted to float and multiplied by
// the float at saddr (broadcast), to off(DI).
#define DQSCALED(zreg, saddr, off) \
	VCVTDQ2PS   zreg, zreg; \
	VMULPS.BCST saddr, zreg, zreg; \
	VMOVUPS     zreg, off(DI)

// func dequantQ8_0AVX512(src *byte, dst *float32, nb int)
// sets dst[0:32nb] to the values of the nb Q8_0 blocks at src: d·q.
TEXT ·dequantQ8_0AVX512(SB), NOSPLIT, $16-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ nb+16(FP), CX

q8dq:
	MOVWLZX   (SI), AX
	VMOVD     AX, X1
	VCVTPH2PS X1, X1
	VMOVSS    X1, 0(SP)
	VPMOVSXBD 2(SI), Z2
	VPMOVSXBD 18(SI), Z3
	DQSCALED(Z2, 0(SP), 0)
	DQSCALED(Z3, 0(SP), 64)
	ADDQ      $34, SI
	ADDQ      $128, DI
	DECQ      CX
	JNZ       q8dq
	VZEROUPPER
	RET

// Q6GROUP stores values 16k..16k+15 of a Q6_K block, quants minus 32 in
// lane group g of zreg, times their scale's d·sc (at 4k(SP)).
#define Q6GROUP(zreg, g, k) \
	VEXTRACTI32X4 $g, zreg, X7; \
	VPMOVSXBD     X7, Z7; \
	DQSCALED(Z7, (4*(k))(SP), 64*(k))

// Q6DQHALF stores the 128 values of half h of a Q6_K block. Z13 holds
// 32s as bytes.
#define Q6DQHALF(h) \
	Q6BITS(SI, h, Z4, Z2); \
	VPSUBB Z13, Z4, Z4; \
	VPSUBB Z13, Z2, Z2; \
	Q6GROUP(Z4, 0, 8*h); \
	Q6GROUP(Z4, 1, 8*h+1); \
	Q6GROUP(Z4, 2, 8*h+2); \
	Q6GROUP(Z4, 3, 8*h+3); \
	Q6GROUP(Z2, 0, 8*h+4); \
	Q6GROUP(Z2, 1, 8*h+5); \
	Q6GROUP(Z2, 2, 8*h+6); \
	Q6GROUP(Z2, 3, 8*h+7)

// func dequantQ6KAVX512(src *byte, dst *float32, nb int)
// sets dst[0:256nb] to the values of the nb Q6_K blocks at src: value j
// = (d·sc[j/16])·(q − 32), the sixteen d·sc kept on the stack for
// broadcasting.
TEXT ·dequantQ6KAVX512(SB), NOSPLIT, $64-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ nb+16(FP), CX
	BCASTD(0x0f0f0f0f, Z15)
	BCASTD(0x30303030, Z14)
	BCASTD(0x20202020, Z13)

q6dq:
	VPMOVSXBD    192(SI), Z5
	VCVTDQ2PS    Z5, Z5
	MOVWLZX      208(SI), AX
	VMOVD        AX, X6
	VCVTPH2PS    X6, X6
	VBROADCASTSS X6, Z6
	VMULPS       Z5, Z6, Z5
	VMOVUPS      Z5, 0(SP)
	Q6DQHALF(0)
	Q6DQHALF(1)
	ADDQ         $210, SI
	ADDQ         $1024, DI
	DECQ         CX
	JNZ          q6dq
	VZEROUPPER
	RET

// Q4DQ16 stores 16 values of sub-block j of a Q4_K block, their quants
// the int32s in zreg, as d_j·q − m_j (d_j at 4j(SP), m_j at 32+4j(SP))
// to off(DI).
#define Q4DQ16(zreg, j, off) \
	VCVTDQ2PS   zreg, zreg; \
	VMULPS.BCST (4*(j))(SP), zreg, zreg; \
	VSUBPS.BCST (32+4*(j))(SP), zreg, zreg; \
	VMOVUPS     zreg, off(DI)

// K45DQCHUNK stores the 64 values of chunk i of a Q4_K or Q5_K block (32
// qs bytes at qsoff+32i: sub-block 2i in the low nibbles, 2i+1 in the
// high), 16 qs bytes at a time, FIFTH(i) adding Q5_K's fifth bits. Z15
// holds 0x0f bytes.
#define K45DQCHUNK(i, qsoff, FIFTH) \
	VPMOVZXBD (qsoff+32*i)(SI), Z8; \
	VPMOVZXBD (qsoff+16+32*i)(SI), Z9; \
	VPSRLD    $4, Z8, Z10; \
	VPSRLD    $4, Z9, Z11; \
	VPANDD    Z15, Z8, Z8; \
	VPANDD    Z15, Z9, Z9; \
	FIFTH(i); \
	Q4DQ16(Z8, 2*i, 256*i); \
	Q4DQ16(Z9, 2*i, 256*i+64); \
	Q4DQ16(Z10, 2*i+1, 256*i+128); \
	Q4DQ16(Z11, 2*i+1, 256*i+192)

#define NOFIFTH(i)

// Q5FIFTH ORs into chunk i's quants (Z8-Z11, as K45DQCHUNK splits them)
// their fifth bits: bits 2i (low nibbles) and 2i+1 (high) of the qh
// bytes at 16, one per value l of the 32, moved to bit 4. Z20 holds
// 0x10 as int32s. Clobbers Z5, Z12, Z13.
#define Q5FIFTH(i) \
	VPMOVZXBD  16(SI), Z12; \
	VPMOVZXBD  32(SI), Z13; \
	VPSRLD     $(2*i), Z12, Z12; \
	VPSRLD     $(2*i), Z13, Z13; \
	VPSLLD     $4, Z12, Z5; \
	VPTERNLOGD $0xf8, Z20, Z5, Z8; \
	VPSLLD     $4, Z13, Z5; \
	VPTERNLOGD $0xf8, Z20, Z5, Z9; \
	VPSLLD     $3, Z12, Z5; \
	VPTERNLOGD $0xf8, Z20, Z5, Z10; \
	VPSLLD     $3, Z13, Z5; \
	VPTERNLOGD $0xf8, Z20, Z5, Z11

// K45DQ is the block loop of the Q4_K and Q5_K dequantizers: value j =
// (d·sc_s)·q − dmin·m_s for its sub-block s = j/32, the eight d·sc_s and
// dmin·m_s kept on the stack for broadcasting.
#define K45DQ(qsoff, FIFTH, bsize) \
	MOVQ      src+0(FP), SI; \
	MOVQ      dst+8(FP), DI; \
	MOVQ      nb+16(FP), CX; \
	BCASTD(0x0f0f0f0f, Z15); \
	BCASTD(0x30303030, Z14); \
	BCASTD(0x10, Z20); \
	VMOVDQU64 k4Mask<>(SB), Y21; \
	VMOVDQU64 k4Lo<>(SB), Y22; \
	VMOVDQU64 k4Hi<>(SB), Y23; \
	VMOVDQU64 k4Shift<>(SB), Y24; \
	HIGHHALF; \
block: \
	K4UNPACK(SI); \
	VPMOVZXWD    Y4, Z5; \
	VCVTDQ2PS    Z5, Z5; \
	VCVTPH2PS    (SI), X6; \
	VBROADCASTSS X6, Z7; \
	VMOVSHDUP    X6, X6; \
	VBROADCASTSS X6, K2, Z7; \
	VMULPS       Z5, Z7, Z5; \
	VMOVUPS      Z5, 0(SP); \
	K45DQCHUNK(0, qsoff, FIFTH); \
	K45DQCHUNK(1, qsoff, FIFTH); \
	K45DQCHUNK(2, qsoff, FIFTH); \
	K45DQCHUNK(3, qsoff, FIFTH); \
	ADDQ         $bsize, SI; \
	ADDQ         $1024, DI; \
	DECQ         CX; \
	JNZ          block; \
	VZEROUPPER

// func dequantQ4KAVX512(src *byte, dst *float32, nb int)
// sets dst[0:256nb] to the values of the nb Q4_K blocks at src.
TEXT ·dequantQ4KAVX512(SB), NOSPLIT, $64-24
	K45DQ(16, NOFIFTH, 144)
	RET

// func dequantQ5KAVX512(src *byte, dst *float32, nb int)
// sets dst[0:256nb] to the values of the nb Q5_K blocks at src.
TEXT ·dequantQ5KAVX512(SB), NOSPLIT, $64-24
	K45DQ(48, Q5FIFTH, 176)
	RET

// LEGACYDQ is the block loop of the Q4_0 ... Q5_1 dequantizers: value j
// = d·(q − off) + m, the quants' low nibbles (values 0-15) and high ones
// (16-31) of the 16 qs bytes at qsoff, QH adding the fifth bits, Z12 the
// offset as int32s, MIN setting Z3 to m (or +0, which still turns a −0
// product into +0 as the Go decoder's + m does).
#define LEGACYDQ(qsoff, QH, MIN, bsize) \
	MOVQ     src+0(FP), SI; \
	MOVQ     dst+8(FP), DI; \
	MOVQ     nb+16(FP), CX; \
	BCASTD(0x0f0f0f0f, Z15); \
	BCASTD(0x10, Z20); \
	VPXORD   Z3, Z3, Z3; \
block: \
	VCVTPH2PS    (SI), X1; \
	VBROADCASTSS X1, Z2; \
	MIN; \
	VPMOVZXBD    qsoff(SI), Z8; \
	VPSRLD       $4, Z8, Z9; \
	VPANDD       Z15, Z8, Z8; \
	QH; \
	VPSUBD       Z12, Z8, Z8; \
	VPSUBD       Z12, Z9, Z9; \
	VCVTDQ2PS    Z8, Z8; \
	VCVTDQ2PS    Z9, Z9; \
	VMULPS       Z8, Z2, Z8; \
	VMULPS       Z9, Z2, Z9; \
	VADDPS       Z3, Z8, Z8; \
	VADDPS       Z3, Z9, Z9; \
	VMOVUPS      Z8, (DI); \
	VMOVUPS      Z9, 64(DI); \
	ADDQ         $bsize, SI; \
	ADDQ         $128, DI; \
	DECQ         CX; \
	JNZ          block; \
	VZEROUPPER

#define NOQH
#define NOMIN

// MINHALF sets Z3 to the block's minimum, the second half (in X1).
#define MINHALF \
	VMOVSHDUP    X1, X3; \
	VBROADCASTSS X3, Z3

// QHAT(off) ORs the fifth bits, the little-endian uint32 at off(SI) (bit
// j for value j), into Z8 (values 0-15) and Z9 (16-31) as 0x10s (Z20).
#define QHAT(off) \
	MOVL     off(SI), AX; \
	KMOVD    AX, K1; \
	KSHIFTRD $16, K1, K3; \
	VPORD    Z20, Z8, K1, Z8; \
	VPORD    Z20, Z9, K3, Z9

#define QH2 QHAT(2)
#define QH4 QHAT(4)

// LEGACYOFF sets Z12 to the quants' offset c as int32s.
#define LEGACYOFF(c) \
	MOVL         $c, AX; \
	VPBROADCASTD AX, Z12

// func dequantQ4_0AVX512(src *byte, dst *float32, nb int)
// sets dst[0:32nb] to the values of the nb Q4_0 blocks at src.
TEXT ·dequantQ4_0AVX512(SB), NOSPLIT, $0-24
	LEGACYOFF(8)
	LEGACYDQ(2, NOQH, NOMIN, 18)
	RET

// func dequantQ4_1AVX512(src *byte, dst *float32, nb int)
// sets dst[0:32nb] to the values of the nb Q4_1 blocks at src.
TEXT ·dequantQ4_1AVX512(SB), NOSPLIT, $0-24
	LEGACYOFF(0)
	LEGACYDQ(4, NOQH, MINHALF, 20)
	RET

// func dequantQ5_0AVX512(src *byte, dst *float32, nb int)
// sets dst[0:32nb] to the values of the nb Q5_0 blocks at src.
TEXT ·dequantQ5_0AVX512(SB), NOSPLIT, $0-24
	LEGACYOFF(16)
	LEGACYDQ(6, QH2, NOMIN, 22)
	RET

// func dequantQ5_1AVX512(src *byte, dst *float32, nb int)
// sets dst[0:32nb] to the values of the nb Q5_1 blocks at src.
TEXT ·dequantQ5_1AVX512(SB), NOSPLIT, $0-24
	LEGACYOFF(0)
	LEGACYDQ(8, QH4, MINHALF, 24)
	RET
