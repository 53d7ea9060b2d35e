//go:build amd64 && !purego

#include "textflag.h"
#include "rowpairs_amd64.h"
#include "rows4_amd64.h"

// AVX2 dot products of one weight row with one activation row. The
// callers (simd_amd64.go) check the CPU has AVX2, FMA and F16C and that
// the lengths cover the loops. R14 and R15 are left alone.

// HSUM8 sums the eight floats of Y0 into X0's low lane.
#define HSUM8 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VHADDPS      X0, X0, X0; \
	VHADDPS      X0, X0, X0

// ROWOUT stores X0 as the next result at (R13) and loops to label while
// rows remain (R12 counts them down): the single-row kernels run over
// consecutive weight rows, the activations' pointers reloaded per row.
#define ROWOUT(label) \
	VMOVSS X0, (R13); \
	ADDQ   $4, R13; \
	DECQ   R12; \
	JNZ    label; \
	VZEROUPPER

// X2ROWSTART keeps the two-row kernels' count of weight rows (nrarg) and
// their output pointer (dstarg) in the frame's locals rows and outp: the
// K-quant block loops take every free general register.
#define X2ROWSTART(nrarg, dstarg) \
	MOVQ nrarg, AX; \
	MOVQ AX, rows-8(SP); \
	MOVQ dstarg, AX; \
	MOVQ AX, outp-16(SP)

// X2NEXT stores the two activation rows' sums for the weight row just
// done, the floats r0 at outp and r1 stridearg floats after it, moves outp
// on to the next weight row's and counts the row off (the flags say
// whether any are left). Clobbers AX and R8.
#define X2NEXT(r0, r1, stridearg) \
	MOVQ   outp-16(SP), AX; \
	MOVQ   stridearg, R8; \
	VMOVSS r0, (AX); \
	VMOVSS r1, (AX)(R8*4); \
	ADDQ   $4, outp-16(SP); \
	DECQ   rows-8(SP)

// ZERO2x4 clears the float dots' two sets of four accumulators, Y0-Y3
// and Y8-Y11; SUM2x4 sums each set, in the order (Y0+Y1)+(Y2+Y3), into
// X0's and X8's low lanes.
#define ZERO2x4 \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11

#define SUM2x4 \
	VADDPS Y1, Y0, Y0; \
	VADDPS Y3, Y2, Y2; \
	VADDPS Y2, Y0, Y0; \
	VADDPS Y9, Y8, Y8; \
	VADDPS Y11, Y10, Y10; \
	VADDPS Y10, Y8, Y8; \
	HSUM8; \
	VEXTRACTF128 $1, Y8, X9; \
	VADDPS       X9, X8, X8; \
	VHADDPS      X8, X8, X8; \
	VHADDPS      X8, X8, X8

// FLOATDOT is the loop of the float dots, over two weight rows at once,
// at SI and R9 (see ROWPAIRS). LOAD8(base, off, reg) loads the eight
// weights of a row from value off at base as float32s into reg; 32 values
// per iteration into four accumulators a row (Y0-Y3 and Y8-Y11), then 8
// at a time. DI: x, CX: n, size: the weight size in bytes. The sums end
// in X0 (SI's row) and X8 (R9's), each summed in the order FLOATDOT2 sums
// a row, bit for bit.
#define FLOATDOT(size, LOAD8) \
	ZERO2x4; \
loop32: \
	CMPQ CX, $32; \
	JLT  loop8; \
	LOAD8(SI, 0, Y4); \
	LOAD8(SI, 8, Y5); \
	LOAD8(SI, 16, Y6); \
	LOAD8(SI, 24, Y7); \
	LOAD8(R9, 0, Y12); \
	LOAD8(R9, 8, Y13); \
	LOAD8(R9, 16, Y14); \
	LOAD8(R9, 24, Y15); \
	VFMADD231PS (DI), Y4, Y0; \
	VFMADD231PS 32(DI), Y5, Y1; \
	VFMADD231PS 64(DI), Y6, Y2; \
	VFMADD231PS 96(DI), Y7, Y3; \
	VFMADD231PS (DI), Y12, Y8; \
	VFMADD231PS 32(DI), Y13, Y9; \
	VFMADD231PS 64(DI), Y14, Y10; \
	VFMADD231PS 96(DI), Y15, Y11; \
	ADDQ $(32*size), SI; \
	ADDQ $(32*size), R9; \
	ADDQ $128, DI; \
	SUBQ $32, CX; \
	JMP  loop32; \
loop8: \
	CMPQ CX, $8; \
	JLT  done; \
	LOAD8(SI, 0, Y4); \
	LOAD8(R9, 0, Y12); \
	VFMADD231PS (DI), Y4, Y0; \
	VFMADD231PS (DI), Y12, Y8; \
	ADDQ $(8*size), SI; \
	ADDQ $(8*size), R9; \
	ADDQ $32, DI; \
	SUBQ $8, CX; \
	JMP  loop8; \
done: \
	SUM2x4

#define LOADF32(base, off, reg) VMOVUPS (off*4)(base), reg
#define LOADF16(base, off, reg) VCVTPH2PS (off*2)(base), reg
#define LOADBF16(base, off, reg) VPMOVZXWD (off*2)(base), reg; VPSLLD $16, reg, reg

// FLOATROWS is the body of a float type's single-row kernel, func(w
// *byte, x *float32, n, nrows int, out *float32): ROWPAIRS running DOT,
// FLOATDOT for the type.
#define FLOATROWS(size, DOT) \
	MOVQ w+0(FP), SI; \
	MOVQ nrows+24(FP), R12; \
	MOVQ out+32(FP), R13; \
	ROWPAIRS(size, DOT); \
	RET

#define F32DOT FLOATDOT(4, LOADF32)
#define F16DOT FLOATDOT(2, LOADF16)
#define BF16DOT FLOATDOT(2, LOADBF16)

// FLOATDOT2 is FLOATDOT for two rows of x, the second R12 bytes after
// the first: each weight is loaded and converted once for both, and eight
// accumulators (Y0-Y3 the first row, Y8-Y11 the second) keep the FMAs'
// latency hidden. 32 values per iteration, then 8; the sums end in X0
// (first row) and X8 (second).
#define FLOATDOT2(LOAD8) \
	ZERO2x4; \
loop32: \
	CMPQ CX, $32; \
	JLT  loop8; \
	LOAD8(SI, 0, Y4); \
	LOAD8(SI, 8, Y5); \
	LOAD8(SI, 16, Y6); \
	LOAD8(SI, 24, Y7); \
	VFMADD231PS (DI), Y4, Y0; \
	VFMADD231PS 32(DI), Y5, Y1; \
	VFMADD231PS 64(DI), Y6, Y2; \
	VFMADD231PS 96(DI), Y7, Y3; \
	VFMADD231PS (DI)(R12*1), Y4, Y8; \
	VFMADD231PS 32(DI)(R12*1), Y5, Y9; \
	VFMADD231PS 64(DI)(R12*1), Y6, Y10; \
	VFMADD231PS 96(DI)(R12*1), Y7, Y11; \
	LEAQ (SI)(BX*8), SI; \
	LEAQ (SI)(BX*8), SI; \
	LEAQ (SI)(BX*8), SI; \
	LEAQ (SI)(BX*8), SI; \
	ADDQ $128, DI; \
	SUBQ $32, CX; \
	JMP  loop32; \
loop8: \
	CMPQ CX, $8; \
	JLT  done; \
	LOAD8(SI, 0, Y4); \
	VFMADD231PS (DI), Y4, Y0; \
	VFMADD231PS (DI)(R12*1), Y4, Y8; \
	LEAQ (SI)(BX*8), SI; \
	ADDQ $32, DI; \
	SUBQ $8, CX; \
	JMP  loop8; \
done: \
	SUM2x4

// FLOATROWS2 is the body of a float type's two-row kernel, func(w *byte,
// x *float32, xstride, n, nr int, dst *float32, dstStride int): nr
// consecutive weight rows of n size-byte values, loaded by LOAD8, each
// dotted with two rows of x (the second xstride bytes after the first)
// into dst[o] and dst[dstStride+o] for weight row o.
#define FLOATROWS2(size, LOAD8) \
	MOVQ w+0(FP), SI; \
	MOVQ xstride+16(FP), R12; \
	MOVQ $size, BX; \
	X2ROWSTART(nr+32(FP), dst+40(FP)); \
row: \
	MOVQ x+8(FP), DI; \
	MOVQ n+24(FP), CX; \
	FLOATDOT2(LOAD8); \
	X2NEXT(X0, X8, dstStride+48(FP)); \
	JNZ row; \
	VZEROUPPER; \
	RET

// DQARGS loads a dequantizer's arguments, func(src *byte, dst *float32,
// n int): src in SI, dst in DI, n (narg) in CX.
#define DQARGS(narg) \
	MOVQ src+0(FP), SI; \
	MOVQ dst+8(FP), DI; \
	MOVQ narg, CX

// DEQUANTFLOAT is the body of the AVX2 dequantizers of the half types,
// func(src *byte, dst *float32, n int): the n values (a multiple of 8, at
// least 8) of size bytes at src, loaded by LOAD8, stored as float32s.
#define DEQUANTFLOAT(size, LOAD8) \
	DQARGS(n+16(FP)); \
dq8: \
	LOAD8(SI, 0, Y0); \
	VMOVUPS Y0, (DI); \
	ADDQ    $(8*size), SI; \
	ADDQ    $32, DI; \
	SUBQ    $8, CX; \
	JNZ     dq8; \
	VZEROUPPER; \
	RET

// func dotF32AVX(w *byte, x *float32, n, nrows int, out *float32)
TEXT ·dotF32AVX(SB), NOSPLIT, $0-40
	FLOATROWS(4, F32DOT)

// func dotF16AVX(w *byte, x *float32, n, nrows int, out *float32)
TEXT ·dotF16AVX(SB), NOSPLIT, $0-40
	FLOATROWS(2, F16DOT)

// func dotBF16AVX(w *byte, x *float32, n, nrows int, out *float32)
TEXT ·dotBF16AVX(SB), NOSPLIT, $0-40
	FLOATROWS(2, BF16DOT)

// func dotF32x2AVX(w *byte, x *float32, xstride, n, nr int, dst *float32, dstStride int)
TEXT ·dotF32x2AVX(SB), NOSPLIT, $16-56
	FLOATROWS2(4, LOADF32)

// func dotF16x2AVX(w *byte, x *float32, xstride, n, nr int, dst *float32, dstStride int)
TEXT ·dotF16x2AVX(SB), NOSPLIT, $16-56
	FLOATROWS2(2, LOADF16)

// func dotBF16x2AVX(w *byte, x *float32, xstride, n, nr int, dst *float32, dstStride int)
TEXT ·dotBF16x2AVX(SB), NOSPLIT, $16-56
	FLOATROWS2(2, LOADBF16)

// func dequantF16AVX(src *byte, dst *float32, n int)
TEXT ·dequantF16AVX(SB), NOSPLIT, $0-24
	DEQUANTFLOAT(2, LOADF16)

// func dequantBF16AVX(src *byte, dst *float32, n int)
TEXT ·dequantBF16AVX(SB), NOSPLIT, $0-24
	DEQUANTFLOAT(2, LOADBF16)

// func dequantQ8_0AVX(src *byte, dst *float32, nb int)
// sets dst[0:32nb] to the values of the nb Q8_0 blocks at src: d·q, bit
// for bit as the Go decoder.
TEXT ·dequantQ8_0AVX(SB), NOSPLIT, $0-24
	DQARGS(nb+16(FP))

q8dq:
	VPBROADCASTW (SI), X1
	VCVTPH2PS    X1, Y1
	VPMOVSXBD    2(SI), Y2
	VPMOVSXBD    10(SI), Y3
	VPMOVSXBD    18(SI), Y4
	VPMOVSXBD    26(SI), Y5
	VCVTDQ2PS    Y2, Y2
	VCVTDQ2PS    Y3, Y3
	VCVTDQ2PS    Y4, Y4
	VCVTDQ2PS    Y5, Y5
	VMULPS       Y1, Y2, Y2
	VMULPS       Y1, Y3, Y3
	VMULPS       Y1, Y4, Y4
	VMULPS       Y1, Y5, Y5
	VMOVUPS      Y2, (DI)
	VMOVUPS      Y3, 32(DI)
	VMOVUPS      Y4, 64(DI)
	VMOVUPS      Y5, 96(DI)
	ADDQ         $34, SI
	ADDQ         $128, DI
	DECQ         CX
	JNZ          q8dq
	VZEROUPPER
	RET

// BLOCKSCALE sets Y1 to the weight block's d (the half at doff(SI))
// times the activation block's d (the float at adoff(DX)), broadcast.
#define BLOCKSCALE(doff, adoff) \
	VCVTPH2PS    doff(SI), X1; \
	VMULSS       adoff(DX), X1, X1; \
	VBROADCASTSS X1, Y1

// SDOT adds Y1 times the dot product of 32 signed weight bytes (wreg) and
// the 32 activations at aoff(DI) to acc. The signed × signed products go
// through VPMADDUBSW as |w| × (a·sign w); activations are within ±127, so
// no product saturates. Y15 holds sixteen int16 ones. Clobbers Y3, Y4.
#define SDOT(wreg, aoff, acc) \
	VMOVDQU     aoff(DI), Y3; \
	VPSIGNB     wreg, wreg, Y4; \
	VPSIGNB     wreg, Y3, Y3; \
	VPMADDUBSW  Y3, Y4, Y4; \
	VPMADDWD    Y15, Y4, Y4; \
	VCVTDQ2PS   Y4, Y4; \
	VFMADD231PS Y4, Y1, acc

// UDOT is SDOT for unsigned weight bytes (at most 31 here).
#define UDOT(wreg, aoff, acc) \
	VPMADDUBSW  aoff(DI), wreg, Y4; \
	VPMADDWD    Y15, Y4, Y4; \
	VCVTDQ2PS   Y4, Y4; \
	VFMADD231PS Y4, Y1, acc

// ONES16 sets Y15 to sixteen int16 ones.
#define ONES16 \
	VPCMPEQW Y15, Y15, Y15; \
	VPSRLW   $15, Y15, Y15

// NIBBLES sets Y2 to the 32 quants of the 16 bytes at off(SI): values
// 0-15 the low nibbles, 16-31 the high ones. Y14 holds 0x0f bytes.
#define NIBBLES(off) \
	VMOVDQU     off(SI), X2; \
	VPSRLW      $4, X2, X3; \
	VINSERTI128 $1, X3, Y2, Y2; \
	VPAND       Y14, Y2, Y2

// HIGHBITS sets Y5's byte j to 0xff where bit j of the uint32 at off(SI)
// is set, else 0, as ggml's bytes_from_bits_32: spread byte j/8 over
// bytes j, OR in every bit but bit j%8, compare with all ones. Y12 holds
// the spreading shuffle, Y11 the bit mask, Y10 all ones.
#define HIGHBITS(off) \
	VPBROADCASTD off(SI), Y5; \
	VPSHUFB      Y12, Y5, Y5; \
	VPOR         Y11, Y5, Y5; \
	VPCMPEQB     Y10, Y5, Y5

DATA spreadBits<>+0x00(SB)/8, $0x0000000000000000
DATA spreadBits<>+0x08(SB)/8, $0x0101010101010101
DATA spreadBits<>+0x10(SB)/8, $0x0202020202020202
DATA spreadBits<>+0x18(SB)/8, $0x0303030303030303
GLOBL spreadBits<>(SB), RODATA|NOPTR, $32

DATA otherBits<>+0x00(SB)/8, $0x7fbfdfeff7fbfdfe
DATA otherBits<>+0x08(SB)/8, $0x7fbfdfeff7fbfdfe
DATA otherBits<>+0x10(SB)/8, $0x7fbfdfeff7fbfdfe
DATA otherBits<>+0x18(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL otherBits<>(SB), RODATA|NOPTR, $32

// LEGACYROW loads a row's activation pointers and zeroes its sums: two
// accumulators for the blocks (Y0, Y8) and two for the minimums' terms
// (X6, X9), so consecutive blocks' FMAs do not wait on each other.
#define LEGACYROW \
	MOVQ   a+8(FP), DI; \
	MOVQ   ad+16(FP), DX; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y8, Y8, Y8; \
	VXORPS X6, X6, X6; \
	VXORPS X9, X9, X9

// LEGACYSETUP loads the constants of the Q4_x/Q5_x kernels.
#define LEGACYSETUP \
	MOVQ w+0(FP), SI; \
	ONES16; \
	VMOVDQU      nibbleMask<>(SB), Y14; \
	VMOVDQU      spreadBits<>(SB), Y12; \
	VMOVDQU      otherBits<>(SB), Y11; \
	VPCMPEQB     Y10, Y10, Y10

// MINTERM adds a block's minimum (the half at boff+2(SI)) times the
// activations' block sum at soff(R8) to macc.
#define MINTERM(boff, soff, macc) \
	VCVTPH2PS   (boff+2)(SI), X7; \
	VFMADD231SS soff(R8), X7, macc

// LEGACYLOOP runs BLK(boff, aoff, doff, acc, macc), one block of bsize
// bytes at boff(SI) against the activations at aoff(DI) (scale doff(DX),
// block sum doff(R8)), over the CX blocks of a row, two at a time into
// alternate accumulators, and leaves the row's sum in X0. R8 steps along
// with DX; the types without a minimum never read it.
#define LEGACYLOOP(BLK, bsize) \
loop2: \
	CMPQ CX, $2; \
	JLT  tail; \
	BLK(0, 0, 0, Y0, X6); \
	BLK(bsize, 32, 4, Y8, X9); \
	ADDQ $(2*bsize), SI; \
	ADDQ $64, DI; \
	ADDQ $8, DX; \
	ADDQ $8, R8; \
	SUBQ $2, CX; \
	JMP  loop2; \
tail: \
	CMPQ CX, $1; \
	JLT  done; \
	BLK(0, 0, 0, Y0, X6); \
	ADDQ $bsize, SI; \
done: \
	VADDPS Y8, Y0, Y0; \
	VADDSS X9, X6, X6; \
	HSUM8; \
	VADDSS X6, X0, X0

// Q40BLK: quants are nibbles − 8.
#define Q40BLK(boff, aoff, doff, acc, macc) \
	BLOCKSCALE(boff, doff); \
	NIBBLES(boff+2); \
	VPSUBB Y13, Y2, Y2; \
	SDOT(Y2, aoff, acc)

// Q50BLK: quants are (nibble | fifth bit << 4) − 16: nibble | 0xf0 where
// the fifth bit is clear, read as a signed byte (Y13 holds 0xf0 bytes).
#define Q50BLK(boff, aoff, doff, acc, macc) \
	BLOCKSCALE(boff, doff); \
	NIBBLES(boff+6); \
	HIGHBITS(boff+2); \
	VPANDN Y13, Y5, Y5; \
	VPOR   Y5, Y2, Y2; \
	SDOT(Y2, aoff, acc)

// Q41BLK: quants are nibbles; the block adds m·d_a·Σa.
#define Q41BLK(boff, aoff, doff, acc, macc) \
	BLOCKSCALE(boff, doff); \
	NIBBLES(boff+4); \
	UDOT(Y2, aoff, acc); \
	MINTERM(boff, doff, macc)

// Q51BLK: quants are nibble | fifth bit << 4 (Y13 holds 0x10 bytes); the
// block adds m·d_a·Σa.
#define Q51BLK(boff, aoff, doff, acc, macc) \
	BLOCKSCALE(boff, doff); \
	NIBBLES(boff+8); \
	HIGHBITS(boff+4); \
	VPAND Y13, Y5, Y5; \
	VPOR  Y5, Y2, Y2; \
	UDOT(Y2, aoff, acc); \
	MINTERM(boff, doff, macc)

// BYTECONST sets Y13 to 32 copies of the byte in c.
#define BYTECONST(c) \
	MOVQ         $c, AX; \
	MOVQ         AX, X13; \
	VPBROADCASTQ X13, Y13

// func dotQ4_0AVX(w *byte, a *int8, ad *float32, nb, nrows int, out *float32)
TEXT ·dotQ4_0AVX(SB), NOSPLIT, $0-48
	LEGACYSETUP
	MOVQ nrows+32(FP), R12
	MOVQ out+40(FP), R13
	BYTECONST(0x0808080808080808)

q40row:
	LEGACYROW
	MOVQ nb+24(FP), CX
	LEGACYLOOP(Q40BLK, 18)
	ROWOUT(q40row)
	RET

// func dotQ5_0AVX(w *byte, a *int8, ad *float32, nb, nrows int, out *float32)
TEXT ·dotQ5_0AVX(SB), NOSPLIT, $0-48
	LEGACYSETUP
	MOVQ nrows+32(FP), R12
	MOVQ out+40(FP), R13
	BYTECONST(0xf0f0f0f0f0f0f0f0)

q50row:
	LEGACYROW
	MOVQ nb+24(FP), CX
	LEGACYLOOP(Q50BLK, 22)
	ROWOUT(q50row)
	RET

// func dotQ4_1AVX(w *byte, a *int8, ad, as *float32, nb, nrows int, out *float32)
TEXT ·dotQ4_1AVX(SB), NOSPLIT, $0-56
	LEGACYSETUP
	MOVQ nrows+40(FP), R12
	MOVQ out+48(FP), R13

q41row:
	LEGACYROW
	MOVQ as+24(FP), R8
	MOVQ nb+32(FP), CX
	LEGACYLOOP(Q41BLK, 20)
	ROWOUT(q41row)
	RET

// func dotQ5_1AVX(w *byte, a *int8, ad, as *float32, nb, nrows int, out *float32)
TEXT ·dotQ5_1AVX(SB), NOSPLIT, $0-56
	LEGACYSETUP
	MOVQ nrows+40(FP), R12
	MOVQ out+48(FP), R13
	BYTECONST(0x1010101010101010)

q51row:
	LEGACYROW
	MOVQ as+24(FP), R8
	MOVQ nb+32(FP), CX
	LEGACYLOOP(Q51BLK, 24)
	ROWOUT(q51row)
	RET

// Q4K sub-block scale shuffles: mask j (32 bytes) broadcasts int16 j of
// each 128-bit lane to the whole lane.
DATA q4kShuf<>+0x00(SB)/8, $0x0100010001000100
DATA q4kShuf<>+0x08(SB)/8, $0x0100010001000100
DATA q4kShuf<>+0x10(SB)/8, $0x0100010001000100
DATA q4kShuf<>+0x18(SB)/8, $0x0100010001000100
DATA q4kShuf<>+0x20(SB)/8, $0x0302030203020302
DATA q4kShuf<>+0x28(SB)/8, $0x0302030203020302
DATA q4kShuf<>+0x30(SB)/8, $0x0302030203020302
DATA q4kShuf<>+0x38(SB)/8, $0x0302030203020302
DATA q4kShuf<>+0x40(SB)/8, $0x0504050405040504
DATA q4kShuf<>+0x48(SB)/8, $0x0504050405040504
DATA q4kShuf<>+0x50(SB)/8, $0x0504050405040504
DATA q4kShuf<>+0x58(SB)/8, $0x0504050405040504
DATA q4kShuf<>+0x60(SB)/8, $0x0706070607060706
DATA q4kShuf<>+0x68(SB)/8, $0x0706070607060706
DATA q4kShuf<>+0x70(SB)/8, $0x0706070607060706
DATA q4kShuf<>+0x78(SB)/8, $0x0706070607060706
DATA q4kShuf<>+0x80(SB)/8, $0x0908090809080908
DATA q4kShuf<>+0x88(SB)/8, $0x0908090809080908
DATA q4kShuf<>+0x90(SB)/8, $0x0908090809080908
DATA q4kShuf<>+0x98(SB)/8, $0x0908090809080908
DATA q4kShuf<>+0xa0(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q4kShuf<>+0xa8(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q4kShuf<>+0xb0(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q4kShuf<>+0xb8(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q4kShuf<>+0xc0(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q4kShuf<>+0xc8(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q4kShuf<>+0xd0(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q4kShuf<>+0xd8(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q4kShuf<>+0xe0(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q4kShuf<>+0xe8(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q4kShuf<>+0xf0(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q4kShuf<>+0xf8(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL q4kShuf<>(SB), RODATA|NOPTR, $256

DATA nibbleMask<>+0x00(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibbleMask<>+0x08(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibbleMask<>+0x10(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibbleMask<>+0x18(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nibbleMask<>(SB), RODATA|NOPTR, $32

// KSETUP loads the K-quant kernels' weight pointer and constants.
#define KSETUP \
	MOVQ    w+0(FP), SI; \
	VMOVDQU nibbleMask<>(SB), Y15

// KCHUNK multiplies the 64 quants of chunk j, low nibbles in Y10 and high
// in Y11, by the activations 64j.. and adds them, sub-block scales 2j and
// 2j+1 from Y1 applied, to the int32 sums Y9.
#define KCHUNK(j) \
	VPMADDUBSW (64*j)(DI), Y10, Y10; \
	VPMADDUBSW (64*j+32)(DI), Y11, Y11; \
	VPSHUFB    q4kShuf<>+(64*j)(SB), Y1, Y12; \
	VPSHUFB    q4kShuf<>+(64*j+32)(SB), Y1, Y13; \
	VPMADDWD   Y12, Y10, Y10; \
	VPMADDWD   Y13, Y11, Y11; \
	VPADDD     Y10, Y9, Y9; \
	VPADDD     Y11, Y9, Y9

// KCHUNK2 is KCHUNK for two activation rows, the second R12 bytes after
// the first: the quants' unpacking and scale shuffles are shared, the
// sums go to Y9 and Y5. Clobbers Y3, Y4, Y10-Y13.
#define KCHUNK2(j) \
	VPSHUFB    q4kShuf<>+(64*j)(SB), Y1, Y12; \
	VPSHUFB    q4kShuf<>+(64*j+32)(SB), Y1, Y13; \
	VPMADDUBSW (64*j)(DI), Y10, Y3; \
	VPMADDUBSW (64*j+32)(DI), Y11, Y4; \
	VPMADDWD   Y12, Y3, Y3; \
	VPMADDWD   Y13, Y4, Y4; \
	VPADDD     Y3, Y9, Y9; \
	VPADDD     Y4, Y9, Y9; \
	VPMADDUBSW (64*j)(DI)(R12*1), Y10, Y3; \
	VPMADDUBSW (64*j+32)(DI)(R12*1), Y11, Y4; \
	VPMADDWD   Y12, Y3, Y3; \
	VPMADDWD   Y13, Y4, Y4; \
	VPADDD     Y3, Y5, Y5; \
	VPADDD     Y4, Y5, Y5

// Q4NIBBLESTO splits the 32 qs bytes at off(base) into low (lo) and high
// (hi) nibbles.
#define Q4NIBBLESTO(base, off, lo, hi) \
	VMOVDQU off(base), lo; \
	VPSRLW  $4, lo, hi; \
	VPAND   Y15, lo, lo; \
	VPAND   Y15, hi, hi

// Q5PREPLO unpacks chunk j (0 or 1) of the Q5_K block at base into lo
// and hi: the nibbles at 48+32j, with bits 2j and 2j+1 of the qh bytes
// (at 16) as the fifth bits of the low and high 32 values. The qh bytes'
// low nibbles index q5Lut's tables of 0x10 where the bit is set
// (VPSHUFB), so no shift goes to the two pipes that also take the scale
// shuffles. Clobbers t and u.
#define Q5PREPLO(base, j, lo, hi, t, u) \
	Q4NIBBLESTO(base, 48+32*j, lo, hi); \
	VPAND   16(base), Y15, t; \
	VMOVDQU q5Lut<>+(64*j)(SB), u; \
	VPSHUFB t, u, u; \
	VPOR    u, lo, lo; \
	VMOVDQU q5Lut<>+(64*j+32)(SB), u; \
	VPSHUFB t, u, u; \
	VPOR    u, hi, hi

// Q5PREPHI is Q5PREPLO for chunks 2 and 3, whose fifth bits 2j and 2j+1
// are 0x10 or above: the bit kept by a q5High mask, then the unsigned
// minimum with 0x10 makes it 0x10 where set. No shift: an immediate shift
// of a memory source has no VEX encoding (the assembler would emit the
// AVX-512 form, which faults on an AVX2-only CPU), and none is needed.
// Clobbers t and u.
#define Q5PREPHI(base, j, lo, hi, t, u) \
	Q4NIBBLESTO(base, 48+32*j, lo, hi); \
	VMOVDQU 16(base), t; \
	VPAND   q5High<>+(64*(j-2))(SB), t, u; \
	VPMINUB fifthBit<>(SB), u, u; \
	VPOR    u, lo, lo; \
	VPAND   q5High<>+(64*(j-2)+32)(SB), t, t; \
	VPMINUB fifthBit<>(SB), t, t; \
	VPOR    t, hi, hi

DATA fifthBit<>+0x00(SB)/8, $0x1010101010101010
DATA fifthBit<>+0x08(SB)/8, $0x1010101010101010
DATA fifthBit<>+0x10(SB)/8, $0x1010101010101010
DATA fifthBit<>+0x18(SB)/8, $0x1010101010101010
GLOBL fifthBit<>(SB), RODATA|NOPTR, $32

// q5Lut: for bits 0, 1, 2 and 3 (32 bytes each, one 16-byte table per
// lane), entry i is 0x10 where bit b of i is set.
DATA q5Lut<>+0x00(SB)/8, $0x1000100010001000
DATA q5Lut<>+0x08(SB)/8, $0x1000100010001000
DATA q5Lut<>+0x10(SB)/8, $0x1000100010001000
DATA q5Lut<>+0x18(SB)/8, $0x1000100010001000
DATA q5Lut<>+0x20(SB)/8, $0x1010000010100000
DATA q5Lut<>+0x28(SB)/8, $0x1010000010100000
DATA q5Lut<>+0x30(SB)/8, $0x1010000010100000
DATA q5Lut<>+0x38(SB)/8, $0x1010000010100000
DATA q5Lut<>+0x40(SB)/8, $0x1010101000000000
DATA q5Lut<>+0x48(SB)/8, $0x1010101000000000
DATA q5Lut<>+0x50(SB)/8, $0x1010101000000000
DATA q5Lut<>+0x58(SB)/8, $0x1010101000000000
DATA q5Lut<>+0x60(SB)/8, $0
DATA q5Lut<>+0x68(SB)/8, $0x1010101010101010
DATA q5Lut<>+0x70(SB)/8, $0
DATA q5Lut<>+0x78(SB)/8, $0x1010101010101010
GLOBL q5Lut<>(SB), RODATA|NOPTR, $128

// q5High: bits 4, 5, 6 and 7 of every byte (32 bytes each).
DATA q5High<>+0x00(SB)/8, $0x1010101010101010
DATA q5High<>+0x08(SB)/8, $0x1010101010101010
DATA q5High<>+0x10(SB)/8, $0x1010101010101010
DATA q5High<>+0x18(SB)/8, $0x1010101010101010
DATA q5High<>+0x20(SB)/8, $0x2020202020202020
DATA q5High<>+0x28(SB)/8, $0x2020202020202020
DATA q5High<>+0x30(SB)/8, $0x2020202020202020
DATA q5High<>+0x38(SB)/8, $0x2020202020202020
DATA q5High<>+0x40(SB)/8, $0x4040404040404040
DATA q5High<>+0x48(SB)/8, $0x4040404040404040
DATA q5High<>+0x50(SB)/8, $0x4040404040404040
DATA q5High<>+0x58(SB)/8, $0x4040404040404040
DATA q5High<>+0x60(SB)/8, $0x8080808080808080
DATA q5High<>+0x68(SB)/8, $0x8080808080808080
DATA q5High<>+0x70(SB)/8, $0x8080808080808080
DATA q5High<>+0x78(SB)/8, $0x8080808080808080
GLOBL q5High<>(SB), RODATA|NOPTR, $128

// K4SCALES unpacks the 6-bit scales and minimums of the Q4_K/Q5_K block
// at base in vector registers (ggml's formula on the 12 bytes as
// dwords u0..u2: scales u0&m1, u2&m2 | (u0>>6&m3)<<4, minimums u1&m1,
// u2>>4&m2 | (u1>>6&m3)<<4): ys gets the eight scales as words in both
// lanes, Y13 the minimums as words, each twice (m0, m0, m1, ...), to
// multiply the 16-value sums by. Clobbers Y12.
#define K4SCALES(base, ys) \
	VMOVDQU    4(base), X12; \
	VPSHUFD    $0x98, X12, X13; \
	VPSRLVD    k4x4Shift<>(SB), X13, X13; \
	VPAND      k4x4Low<>(SB), X13, X13; \
	VPSHUFD    $0x50, X12, X12; \
	VPSRLD     $2, X12, X12; \
	VPAND      k4x4High<>(SB), X12, X12; \
	VPOR       X12, X13, X13; \
	VPMOVZXBW  X13, Y13; \
	VPERMQ     $0x44, Y13, ys; \
	VPERMQ     $0xfa, Y13, Y13; \
	VPUNPCKLWD Y13, Y13, Y13

// K4CHUNKS multiplies the four chunks of the Q4_K or Q5_K block at base
// (LO unpacking chunks 0 and 1, HI chunks 2 and 3) by the activations,
// CHUNK (KCHUNK or KCHUNK2) taking each chunk's products.
#define K4CHUNKS(LO, HI, base, CHUNK) \
	LO(base, 0, Y10, Y11, Y8, Y2); \
	CHUNK(0); \
	LO(base, 1, Y10, Y11, Y8, Y2); \
	CHUNK(1); \
	HI(base, 2, Y10, Y11, Y8, Y2); \
	CHUNK(2); \
	HI(base, 3, Y10, Y11, Y8, Y2); \
	CHUNK(3)

// K4DMIN broadcasts the d and dmin of the block at base into Y12 and Y13.
#define K4DMIN(base) \
	VCVTPH2PS    (base), X12; \
	VMOVSHDUP    X12, X13; \
	VBROADCASTSS X12, Y12; \
	VBROADCASTSS X13, Y13

// K4FOLD folds an activation row's block into acc as the four-row
// kernels fold it (K4X4FOLD), float for float, so that a row gets the
// same bits from the one-, two- and four-row kernels: acc += d_a·(d·sum −
// dmin·mins), the int32 sums in sum, the minimums' sums (float) in mins,
// d and dmin in Y12 and Y13 (K4DMIN), d_a at adaddr. Clobbers Y10.
#define K4FOLD(adaddr, sum, mins, acc) \
	VCVTDQ2PS    sum, sum; \
	VMULPS       Y12, sum, sum; \
	VFNMADD231PS Y13, mins, sum; \
	VBROADCASTSS adaddr, Y10; \
	VFMADD231PS  Y10, sum, acc

// K4BLOCK multiplies the Q4_K or Q5_K block at base (LO(base, j, lo, hi,
// t, u) unpacking chunks 0 and 1, HI chunks 2 and 3) by the activation
// row at DI, DX, BX into acc: K4SCALES, the minimums' sums, four KCHUNKs
// and K4FOLD. Clobbers Y1-Y3, Y8-Y13.
#define K4BLOCK(LO, HI, base, acc) \
	K4SCALES(base, Y1); \
	VPMADDWD     (BX), Y13, Y3; \
	VCVTDQ2PS    Y3, Y3; \
	VPXOR        Y9, Y9, Y9; \
	K4CHUNKS(LO, HI, base, KCHUNK); \
	K4DMIN(base); \
	K4FOLD((DX), Y9, Y3, acc)

// Q4X4PREP unpacks chunk j of the Q4_K block at base into lo and hi.
#define Q4X4PREP(base, j, lo, hi, t, u) Q4NIBBLESTO(base, 16+32*j, lo, hi)
#define Q4KBLOCK(base, acc) K4BLOCK(Q4X4PREP, Q4X4PREP, base, acc)
#define Q5KBLOCK(base, acc) K4BLOCK(Q5PREPLO, Q5PREPHI, base, acc)

// K4BLOCK2 multiplies the Q4_K or Q5_K block at SI by two activation rows
// (laid out as dotQ4Kx2AVX says) into Y0 and Y6, each row's block folded
// by K4FOLD. Clobbers Y1-Y5, Y7-Y14.
#define K4BLOCK2(LO, HI) \
	K4SCALES(SI, Y1); \
	VPMADDWD     (BX), Y13, Y7; \
	VPMADDWD     (BX)(R13*8), Y13, Y14; \
	VCVTDQ2PS    Y7, Y7; \
	VCVTDQ2PS    Y14, Y14; \
	VPXOR        Y9, Y9, Y9; \
	VPXOR        Y5, Y5, Y5; \
	K4CHUNKS(LO, HI, SI, KCHUNK2); \
	K4DMIN(SI); \
	K4FOLD((DX), Y9, Y7, Y0); \
	K4FOLD((DX)(R13*1), Y5, Y14, Y6)

// KX2ROWS is the body of the two-row Q4_K and Q5_K kernels (see
// dotQ4Kx2AVX): nr weight rows of blocks of bsize bytes, LO and HI
// unpacking their chunks (K4CHUNKS), each block multiplied by the two activation rows
// (K4BLOCK2), each row's sum taken by HSUM8 as the other kernels take it.
#define KX2ROWS(LO, HI, bsize) \
	KSETUP; \
	MOVQ astride+32(FP), R12; \
	MOVQ adstride+40(FP), R13; \
	X2ROWSTART(nr+56(FP), dst+64(FP)); \
row: \
	KROWPTRS(nb+48(FP)); \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y6, Y6, Y6; \
block: \
	K4BLOCK2(LO, HI); \
	KSTEP(bsize, block); \
	HSUM8; \
	VMOVAPS X0, X8; \
	VMOVAPS Y6, Y0; \
	HSUM8; \
	X2NEXT(X8, X0, dstStride+72(FP)); \
	JNZ row; \
	VZEROUPPER; \
	RET

// K4ROWS is KROWS (rowpairs_amd64.h) for the Q4_K and Q5_K blocks: the sums
// of the first row in Y0, of the second in Y14.
#define K4ROWS(BLOCK, bsize) \
	KSETUP; \
	MOVQ nrows+40(FP), R12; \
	MOVQ out+48(FP), R13; \
	KROWS(BLOCK, bsize, Y0, Y14)

// func dotQ4KAVX(w *byte, a *int8, ad *float32, bs *int16, nb, nrows int, out *float32)
// Per block: d·d_a·Σ_j sc_j·Σ q·a − dmin·d_a·Σ_j m_j·(bsums 2j + 2j+1),
// over two weight rows at a time (KROWS).
TEXT ·dotQ4KAVX(SB), NOSPLIT, $0-56
	K4ROWS(Q4KBLOCK, 144)
	RET

// func dotQ5KAVX(w *byte, a *int8, ad *float32, bs *int16, nb, nrows int, out *float32)
// Q4_K's sum with five-bit quants: qs at 48, the fifth bits at 16.
TEXT ·dotQ5KAVX(SB), NOSPLIT, $0-56
	K4ROWS(Q5KBLOCK, 176)
	RET

// func dotQ4Kx2AVX(w *byte, a *int8, ad *float32, bs *int16, astride, adstride, nb, nr int, dst *float32, dstStride int)
// sets dst[o] and dst[dstStride+o] to dotQ4KAVX of weight row o (of nr
// consecutive rows) with two activation rows: the second's quants astride
// bytes after the first's, its scales adstride bytes after, its 16-value
// sums 8·adstride bytes after (a Q8_K row's d and bsums are 4 and 32
// bytes per block).
TEXT ·dotQ4Kx2AVX(SB), NOSPLIT, $16-80
	KX2ROWS(Q4X4PREP, Q4X4PREP, 144)

// func dotQ5Kx2AVX(w *byte, a *int8, ad *float32, bs *int16, astride, adstride, nb, nr int, dst *float32, dstStride int)
// is dotQ4Kx2AVX for Q5_K blocks.
TEXT ·dotQ5Kx2AVX(SB), NOSPLIT, $16-80
	KX2ROWS(Q5PREPLO, Q5PREPHI, 176)

// q6kShuf (16 bytes) spreads int8 0 of a register over its first eight
// bytes and int8 1 over the last eight: a pair of Q6_K scales broadcast
// there becomes eight of each.
DATA q6kShuf<>+0x00(SB)/8, $0x0000000000000000
DATA q6kShuf<>+0x08(SB)/8, $0x0101010101010101
GLOBL q6kShuf<>(SB), RODATA|NOPTR, $16

DATA highMask<>+0x00(SB)/8, $0x3030303030303030
DATA highMask<>+0x08(SB)/8, $0x3030303030303030
DATA highMask<>+0x10(SB)/8, $0x3030303030303030
DATA highMask<>+0x18(SB)/8, $0x3030303030303030
GLOBL highMask<>(SB), RODATA|NOPTR, $32

// Q6KQUANT multiplies 32 six-bit quants q (in reg, 0..63) by the 32
// activations at off(DI) and adds them, sub-block scales applied, to the
// int32 sums Y9: scales 2i and 2i+1 of a half of the block, words of sc
// (Q6KSCALES), spread by q6kWords mask i. Clobbers Y2.
#define Q6KQUANT(reg, off, i, sc) \
	VPMADDUBSW off(DI), reg, reg; \
	VPSHUFB    q6kWords<>+(32*(i))(SB), sc, Y2; \
	VPMADDWD   Y2, reg, reg; \
	VPADDD     reg, Y9, Y9

// Q6KQUANT2 is Q6KQUANT for two activation rows, the second R12 bytes
// after the first, its sums in Y13. Clobbers Y2 and Y3.
#define Q6KQUANT2(reg, off, i, sc) \
	VPSHUFB    q6kWords<>+(32*(i))(SB), sc, Y2; \
	VPMADDUBSW off(DI), reg, Y3; \
	VPMADDWD   Y2, Y3, Y3; \
	VPADDD     Y3, Y9, Y9; \
	VPMADDUBSW off(DI)(R12*1), reg, Y3; \
	VPMADDWD   Y2, Y3, Y3; \
	VPADDD     Y3, Y13, Y13

// q6kWords mask i (32 bytes) spreads word 2i of a register over its low
// 128-bit lane and word 2i+1 over its high lane: with a half's eight
// scales as words in both lanes (Q6KSCALES), the words of scales 2i and
// 2i+1, eight of each, for VPMADDWD.
DATA q6kWords<>+0x00(SB)/8, $0x0100010001000100
DATA q6kWords<>+0x08(SB)/8, $0x0100010001000100
DATA q6kWords<>+0x10(SB)/8, $0x0302030203020302
DATA q6kWords<>+0x18(SB)/8, $0x0302030203020302
DATA q6kWords<>+0x20(SB)/8, $0x0504050405040504
DATA q6kWords<>+0x28(SB)/8, $0x0504050405040504
DATA q6kWords<>+0x30(SB)/8, $0x0706070607060706
DATA q6kWords<>+0x38(SB)/8, $0x0706070607060706
DATA q6kWords<>+0x40(SB)/8, $0x0908090809080908
DATA q6kWords<>+0x48(SB)/8, $0x0908090809080908
DATA q6kWords<>+0x50(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q6kWords<>+0x58(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q6kWords<>+0x60(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q6kWords<>+0x68(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q6kWords<>+0x70(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q6kWords<>+0x78(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL q6kWords<>(SB), RODATA|NOPTR, $128

// Q6KBITS sets Y4, Y5, Y10 and Y11 to the quants of values 128h..+31,
// +32..+63, +64..+95 and +96..+127: ql bytes 64h.., qh bytes 128+32h.. of
// the block. Quant l is ql[l]&15 | (qh[l]&3)<<4, l+32 is ql[l+32]&15 |
// (qh[l]>>2&3)<<4, l+64 is ql[l]>>4 | (qh[l]>>4&3)<<4 and l+96 is
// ql[l+32]>>4 | (qh[l]>>6&3)<<4 (the block at base). Y15 holds 0x0f
// bytes, Y7 0x30 bytes.
#define Q6KBITS(base, h) \
	VMOVDQU (64*h)(base), Y10; \
	VMOVDQU (64*h+32)(base), Y11; \
	VMOVDQU (128+32*h)(base), Y12; \
	VPSLLW  $4, Y12, Y3; \
	VPAND   Y7, Y3, Y3; \
	VPAND   Y15, Y10, Y4; \
	VPOR    Y3, Y4, Y4; \
	VPSLLW  $2, Y12, Y3; \
	VPAND   Y7, Y3, Y3; \
	VPAND   Y15, Y11, Y5; \
	VPOR    Y3, Y5, Y5; \
	VPAND   Y7, Y12, Y3; \
	VPSRLW  $4, Y10, Y10; \
	VPAND   Y15, Y10, Y10; \
	VPOR    Y3, Y10, Y10; \
	VPSRLW  $2, Y12, Y3; \
	VPAND   Y7, Y3, Y3; \
	VPSRLW  $4, Y11, Y11; \
	VPAND   Y15, Y11, Y11; \
	VPOR    Y3, Y11, Y11

// Q6KHALF multiplies half h of the block at base by one activation row,
// the half's scales as words in sc.
#define Q6KHALF(base, h, sc) \
	Q6KBITS(base, h); \
	Q6KQUANT(Y4, 128*h, 0, sc); \
	Q6KQUANT(Y5, 128*h+32, 1, sc); \
	Q6KQUANT(Y10, 128*h+64, 2, sc); \
	Q6KQUANT(Y11, 128*h+96, 3, sc)

// Q6KHALF2 multiplies half h of the block by two activation rows.
#define Q6KHALF2(h, sc) \
	Q6KBITS(SI, h); \
	Q6KQUANT2(Y4, 128*h, 0, sc); \
	Q6KQUANT2(Y5, 128*h+32, 1, sc); \
	Q6KQUANT2(Y10, 128*h+64, 2, sc); \
	Q6KQUANT2(Y11, 128*h+96, 3, sc)

// Q6KSETUP loads the Q6_K kernels' weight pointer and masks.
#define Q6KSETUP \
	MOVQ    w+0(FP), SI; \
	VMOVDQU nibbleMask<>(SB), Y15; \
	VMOVDQU highMask<>(SB), Y7

// Q6KSTART sets X8 to the d of the block at base, Y2 to its 16 int8
// scales as words, and sum to −32·Σ_k sc_k·bsum_k for the activation row
// whose 16-value sums are at bsaddr: the quants' offset, taken once per
// block. Clobbers Y3.
#define Q6KSTART(base, bsaddr, sum) \
	VPBROADCASTW 208(base), X8; \
	VCVTPH2PS    X8, X8; \
	VPMOVSXBW    192(base), Y2; \
	Q6KOFFSET(bsaddr, sum)

// Q6KOFFSET sets sum to −32·Σ_k sc_k·bsum_k (bsums at bsaddr, scales as
// words in Y2). Clobbers Y3.
#define Q6KOFFSET(bsaddr, sum) \
	VPMADDWD bsaddr, Y2, sum; \
	VPSLLD   $5, sum, sum; \
	VPXOR    Y3, Y3, Y3; \
	VPSUBD   sum, Y3, sum

// Q6KSCALES sets Y1 to scales 0-7 as words in both 128-bit lanes and Y6
// to scales 8-15 (Q6KHALF's sc for halves 0 and 1), from Y2 (Q6KSTART).
#define Q6KSCALES \
	VPERMQ $0x44, Y2, Y1; \
	VPERMQ $0xee, Y2, Y6

// Q6KFOLD adds the block's int32 sums (sum) to acc as the four-row kernel
// folds them (Q6X4FOLD), float by float, so that a row gets the same bits
// from both: acc += d_a·(d·sum), d in X8, d_a at adaddr. Clobbers Y3.
#define Q6KFOLD(adaddr, sum, acc) \
	VBROADCASTSS X8, Y3; \
	VCVTDQ2PS    sum, sum; \
	VMULPS       Y3, sum, sum; \
	VBROADCASTSS adaddr, Y3; \
	VFMADD231PS  Y3, sum, acc

// Q6KBLOCK multiplies the Q6_K block at base by the activation row at
// DI, DX, BX into acc (KROWS' BLOCK).
#define Q6KBLOCK(base, acc) \
	Q6KSTART(base, (BX), Y9); \
	Q6KSCALES; \
	Q6KHALF(base, 0, Y1); \
	Q6KHALF(base, 1, Y6); \
	Q6KFOLD((DX), Y9, acc)

// func dotQ6KAVX(w *byte, a *int8, ad *float32, bs *int16, nb, nrows int, out *float32)
// Per block: d·d_a·Σ_k sc_k·(Σ q·a − 32·bsum_k), q = 0..63 unsigned so the
// products go through VPMADDUBSW, the −32 offset through the 16-value sums;
// two weight rows at a time (KROWS), their sums in Y0 and Y14.
TEXT ·dotQ6KAVX(SB), NOSPLIT, $0-56
	Q6KSETUP
	MOVQ nrows+40(FP), R12
	MOVQ out+48(FP), R13
	KROWS(Q6KBLOCK, 210, Y0, Y14)
	RET

// func dotQ6Kx2AVX(w *byte, a *int8, ad *float32, bs *int16, astride, adstride, nb, nr int, dst *float32, dstStride int)
// is dotQ6KAVX for two activation rows laid out as dotQ4Kx2AVX's, each
// weight block unpacked once for both, over nr weight rows into dst as
// dotQ4Kx2AVX's; each row's block folded by Q6KFOLD, so a row gets the
// same bits from the one-, two- and four-row kernels.
TEXT ·dotQ6Kx2AVX(SB), NOSPLIT, $16-80
	Q6KSETUP
	MOVQ astride+32(FP), R12
	MOVQ adstride+40(FP), R13
	X2ROWSTART(nr+56(FP), dst+64(FP))

q6kx2row:
	KROWPTRS(nb+48(FP))
	VXORPS Y0, Y0, Y0
	VXORPS Y14, Y14, Y14

q6kx2loop:
	Q6KSTART(SI, (BX), Y9)
	Q6KOFFSET((BX)(R13*8), Y13)
	Q6KSCALES
	Q6KHALF2(0, Y1)
	Q6KHALF2(1, Y6)
	Q6KFOLD((DX), Y9, Y0)
	Q6KFOLD((DX)(R13*1), Y13, Y14)
	KSTEP(210, q6kx2loop)

	HSUM8
	VMOVAPS X0, X8
	VMOVAPS Y14, Y0
	HSUM8
	X2NEXT(X8, X0, dstStride+72(FP))
	JNZ q6kx2row
	VZEROUPPER
	RET

// The byte order VPACKSSDW then VPACKSSWB leave, per dword, undone.
DATA packOrder<>+0x00(SB)/4, $0
DATA packOrder<>+0x04(SB)/4, $4
DATA packOrder<>+0x08(SB)/4, $1
DATA packOrder<>+0x0c(SB)/4, $5
DATA packOrder<>+0x10(SB)/4, $2
DATA packOrder<>+0x14(SB)/4, $6
DATA packOrder<>+0x18(SB)/4, $3
DATA packOrder<>+0x1c(SB)/4, $7
GLOBL packOrder<>(SB), RODATA|NOPTR, $32

// func quantQ8AVX(x *float32, qs *int8, d *float32, sums *int32, nb, bsize int)
// Per block of bsize floats (a multiple of 32): d = amax/127, id = 1/d (0
// when d is 0), q = x·id rounded to nearest even (VCVTPS2DQ under the
// default MXCSR), and the sum of each 16 quants.
TEXT ·quantQ8AVX(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ sums+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ bsize+40(FP), R8
	MOVL $0x7fffffff, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VMOVDQU packOrder<>(SB), Y14
	MOVL $0x01010101, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	VPCMPEQW Y12, Y12, Y12
	VPSRLW $15, Y12, Y12
	MOVL $0x42fe0000, AX // 127.0
	VMOVD AX, X11
	MOVL $0x3f800000, AX // 1.0
	VMOVD AX, X10

qblock:
	VXORPS Y0, Y0, Y0
	MOVQ   SI, R9
	MOVQ   R8, R10

qamax:
	VANDPS (R9), Y15, Y1
	VMAXPS Y1, Y0, Y0
	ADDQ   $32, R9
	SUBQ   $8, R10
	JNZ    qamax
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0x4e, X0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0xb1, X0, X1
	VMAXPS       X1, X0, X0
	VDIVSS       X11, X0, X2
	VMOVSS       X2, (DX)
	VXORPS       X3, X3, X3
	VCMPSS       $4, X3, X2, X4
	VDIVSS       X2, X10, X5
	VANDPS       X4, X5, X5
	VBROADCASTSS X5, Y5
	MOVQ         R8, R10

qquant:
	VMULPS       (SI), Y5, Y0
	VMULPS       32(SI), Y5, Y1
	VMULPS       64(SI), Y5, Y2
	VMULPS       96(SI), Y5, Y3
	VCVTPS2DQ    Y0, Y0
	VCVTPS2DQ    Y1, Y1
	VCVTPS2DQ    Y2, Y2
	VCVTPS2DQ    Y3, Y3
	VPACKSSDW    Y1, Y0, Y0
	VPACKSSDW    Y3, Y2, Y2
	VPACKSSWB    Y2, Y0, Y0
	VPERMD       Y0, Y14, Y0
	VMOVDQU      Y0, (DI)
	VPMADDUBSW   Y0, Y13, Y1
	VPMADDWD     Y12, Y1, Y1
	VPHADDD      Y1, Y1, Y1
	VPHADDD      Y1, Y1, Y1
	VMOVSS       X1, (BX)
	VEXTRACTI128 $1, Y1, X1
	VMOVSS       X1, 4(BX)
	ADDQ         $128, SI
	ADDQ         $32, DI
	ADDQ         $8, BX
	SUBQ         $32, R10
	JNZ          qquant

	ADDQ $4, DX
	DECQ CX
	JNZ  qblock
	VZEROUPPER
	RET

// The four-row kernels, func(w *byte, a *int8, ad *float32, [bs *int16,]
// nb, nr int, dst *float32, dstStride int), set dst[r·dstStride+o] to the
// dot product of weight row o (of nr consecutive rows of nb blocks) with
// activation row r, for r < 4: the AVX-512 kernels' contract (the rows of
// activations consecutive, rows4_amd64.h's frame), each weight block
// loaded and unpacked once for the four rows. Sixteen registers hold no
// whole unpacked block, so the K-quants go a chunk at a time: its quants
// (Y8, Y9) and sub-block scales (Y10, Y11) times the four rows' 64
// activations into the block's int32 sums (Y0-Y3, X4DOT), folded with
// the block's scales into the float sums (Y4-Y7) at its end.

// X4STORE sums the lanes of acc into the float at addr. Clobbers Y0, Y1.
#define X4STORE(acc, addr) \
	VMOVAPS acc, Y0; \
	HSUM8; \
	VMOVSS  X0, addr

// X4DOT adds the 32 unsigned quants of Y8 times the activations at
// off1(DI)(aidx) and Y9's times those at off2(DI)(aidx), each pair of
// products scaled by its word of Y10 or Y11, to the int32 sums acc.
// Clobbers Y12, Y13.
#define X4DOT(aidx, off1, off2, acc) \
	VPMADDUBSW off1(DI)(aidx), Y8, Y12; \
	VPMADDUBSW off2(DI)(aidx), Y9, Y13; \
	VPMADDWD   Y10, Y12, Y12; \
	VPMADDWD   Y11, Y13, Y13; \
	VPADDD     Y12, acc, acc; \
	VPADDD     Y13, acc, acc

// X4DOTS is X4DOT for the four activation rows (KXROWSETUP's), into
// Y0-Y3.
#define X4DOTS(off1, off2) \
	X4DOT(R12*1, off1, off2, Y0); \
	X4DOT(R8*1, off1, off2, Y1); \
	X4DOT(R8*2, off1, off2, Y2); \
	X4DOT(R9*1, off1, off2, Y3)

// X4FOLDS folds each of the four rows' int32 block sums (Y0-Y3) into
// its float sum (Y4-Y7) by FOLD(bidx, didx, sum, acc), which takes the
// row's 16-value sums at (BX)(bidx) and scale at (DX)(didx).
#define X4FOLDS(FOLD) \
	FOLD(R12*1, R12*1, Y0, Y4); \
	FOLD(AX*1, R10*1, Y1, Y5); \
	FOLD(AX*2, R10*2, Y2, Y6); \
	FOLD(R13*1, R11*1, Y3, Y7)

// K4X4SCALES is K4SCALES for the four-row kernels: the block at SI, its
// scales into Y14, its minimums into the local mins.
#define K4X4SCALES \
	K4SCALES(SI, Y14); \
	VMOVDQU Y13, mins-48(SP)

// K4SCALES lays the dwords out as [scales 0-3, 4-7, minimums 0-3,
// 4-7]: k4x4Shift shifts [u0, u2, u1, u2] to [u0, u2, u1, u2>>4],
// k4x4Low keeps their six or four low bits, and k4x4High the top bits of
// [u0, u0, u1, u1] moved down by 2 into dwords 1 and 3.
DATA k4x4Shift<>+0x00(SB)/8, $0
DATA k4x4Shift<>+0x08(SB)/8, $0x0000000400000000
GLOBL k4x4Shift<>(SB), RODATA|NOPTR, $16
DATA k4x4Low<>+0x00(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA k4x4Low<>+0x08(SB)/8, $0x0f0f0f0f3f3f3f3f
GLOBL k4x4Low<>(SB), RODATA|NOPTR, $16
DATA k4x4High<>+0x00(SB)/8, $0x3030303000000000
DATA k4x4High<>+0x08(SB)/8, $0x3030303000000000
GLOBL k4x4High<>(SB), RODATA|NOPTR, $16

// K4X4CHUNK multiplies chunk j of the block (PREP(j, lo, hi, t, u)
// unpacking its 64 quants) by the four rows into Y0-Y3.
#define K4X4CHUNK(PREP, j) \
	PREP(SI, j, Y8, Y9, Y12, Y13); \
	VPSHUFB q4kShuf<>+(64*j)(SB), Y14, Y10; \
	VPSHUFB q4kShuf<>+(64*j+32)(SB), Y14, Y11; \
	X4DOTS(64*j, 64*j+32)

// K4X4FOLD adds one activation row's block, int32 sums in sum, to acc:
// d_a·(d·sum − dmin·Σ m·bsums), the duplicated minimums in Y8, d and dmin
// broadcast in Y9 and Y10. Clobbers Y11, Y12.
#define K4X4FOLD(bidx, didx, sum, acc) \
	VPMADDWD     (BX)(bidx), Y8, Y11; \
	VCVTDQ2PS    sum, sum; \
	VCVTDQ2PS    Y11, Y11; \
	VMULPS       Y9, sum, sum; \
	VFNMADD231PS Y10, Y11, sum; \
	VBROADCASTSS (DX)(didx), Y12; \
	VFMADD231PS  Y12, sum, acc

// K4X4BLOCK multiplies the Q4_K or Q5_K block at SI (LO and HI unpacking
// its chunks, as K4CHUNKS says) by the four activation rows into Y4-Y7.
#define K4X4BLOCK(LO, HI) \
	K4X4SCALES; \
	VPXOR Y0, Y0, Y0; \
	VPXOR Y1, Y1, Y1; \
	VPXOR Y2, Y2, Y2; \
	VPXOR Y3, Y3, Y3; \
	K4X4CHUNK(LO, 0); \
	K4X4CHUNK(LO, 1); \
	K4X4CHUNK(HI, 2); \
	K4X4CHUNK(HI, 3); \
	VMOVDQU      mins-48(SP), Y8; \
	VCVTPH2PS    (SI), X9; \
	VMOVSHDUP    X9, X10; \
	VBROADCASTSS X9, Y9; \
	VBROADCASTSS X10, Y10; \
	X4FOLDS(K4X4FOLD)

#define Q4X4BLOCK K4X4BLOCK(Q4X4PREP, Q4X4PREP)
#define Q5X4BLOCK K4X4BLOCK(Q5PREPLO, Q5PREPHI)

// func dotQ4Kx4AVX(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)
// is dotQ4KAVX for four activation rows: out[r][o] for r < 4, o < nr.
TEXT ·dotQ4Kx4AVX(SB), NOSPLIT, $48-64
	VMOVDQU nibbleMask<>(SB), Y15
	KX4ROWS(Q4X4BLOCK, 144, Y4, Y5, Y6, Y7)
	RET

// func dotQ5Kx4AVX(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)
// is dotQ4Kx4AVX for Q5_K weights: qs at 48, the fifth bits at 16.
TEXT ·dotQ5Kx4AVX(SB), NOSPLIT, $48-64
	VMOVDQU nibbleMask<>(SB), Y15
	KX4ROWS(Q5X4BLOCK, 176, Y4, Y5, Y6, Y7)
	RET

// Q6X4BITS sets Y8 and Y9 to the quants of values 128h+32p..+31 and
// 128h+32p+64..+95 of the Q6_K block at SI (p is 0 or 1; see Q6KBITS):
// the low and high nibbles of ql bytes 64h+32p.., with bits 2p, 2p+1 and
// 2p+4, 2p+5 of qh bytes 128+32h.. as their bits 4 and 5. Y15 holds 0x0f
// bytes, Y14 0x30. Clobbers Y12, Y13.
#define Q6X4BITS(h, p) \
	VMOVDQU (64*h+32*p)(SI), Y8; \
	VMOVDQU (128+32*h)(SI), Y12; \
	VPSRLW  $4, Y8, Y9; \
	VPAND   Y15, Y8, Y8; \
	VPAND   Y15, Y9, Y9; \
	VPSLLW  $(4-2*p), Y12, Y13; \
	VPAND   Y14, Y13, Y13; \
	VPOR    Y13, Y8, Y8; \
	VPSRLW  $(2*p), Y12, Y13; \
	VPAND   Y14, Y13, Y13; \
	VPOR    Y13, Y9, Y9

// Q6X4SCALE sets yreg to the words of int8 scales 2k and 2k+1 of the
// block at SI, eight of each (q6kShuf).
#define Q6X4SCALE(k, xreg, yreg) \
	VPBROADCASTW (192+2*(k))(SI), xreg; \
	VPSHUFB      q6kShuf<>(SB), xreg, xreg; \
	VPMOVSXBW    xreg, yreg

// Q6X4PART multiplies values 128h+32p..+31 and 128h+32p+64..+95 of the
// block by the four rows into Y0-Y3.
#define Q6X4PART(h, p) \
	Q6X4BITS(h, p); \
	Q6X4SCALE(4*h+p, X10, Y10); \
	Q6X4SCALE(4*h+p+2, X11, Y11); \
	X4DOTS(128*h+32*p, 128*h+32*p+64)

// Q6X4FOLD adds one activation row's block, int32 sums in sum, to acc:
// d_a·d·(sum − 32·Σ_k sc_k·bsum_k), the scales as words in Y8, d
// broadcast in Y9. Clobbers Y11, Y12.
#define Q6X4FOLD(bidx, didx, sum, acc) \
	VPMADDWD     (BX)(bidx), Y8, Y11; \
	VPSLLD       $5, Y11, Y11; \
	VPSUBD       Y11, sum, sum; \
	VCVTDQ2PS    sum, sum; \
	VMULPS       Y9, sum, sum; \
	VBROADCASTSS (DX)(didx), Y12; \
	VFMADD231PS  Y12, sum, acc

// Q6X4BLOCK multiplies the Q6_K block at SI by the four activation rows
// into Y4-Y7.
#define Q6X4BLOCK \
	VPXOR Y0, Y0, Y0; \
	VPXOR Y1, Y1, Y1; \
	VPXOR Y2, Y2, Y2; \
	VPXOR Y3, Y3, Y3; \
	Q6X4PART(0, 0); \
	Q6X4PART(0, 1); \
	Q6X4PART(1, 0); \
	Q6X4PART(1, 1); \
	VPMOVSXBW    192(SI), Y8; \
	VPBROADCASTW 208(SI), X9; \
	VCVTPH2PS    X9, Y9; \
	X4FOLDS(Q6X4FOLD)

// func dotQ6Kx4AVX(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)
// is dotQ6KAVX for four activation rows: out[r][o] for r < 4, o < nr.
TEXT ·dotQ6Kx4AVX(SB), NOSPLIT, $16-64
	VMOVDQU nibbleMask<>(SB), Y15
	VMOVDQU highMask<>(SB), Y14
	KX4ROWS(Q6X4BLOCK, 210, Y4, Y5, Y6, Y7)
	RET

// The Q8_0 kernels below sum each block's 32 products with an activation
// row exactly in int32 (VPMADDUBSW, VPMADDWD, then VPHADDD across the
// rows' registers and the two 128-bit lanes added), and add it to the
// row's one float sum as acc += float(sum)·(d_w·d_a), one lane per row.
// The integer sums are exact in any order, so the eight- and four-row
// kernels give a row the same bits as the single-row one (MatMul's batch
// invariance), while they scale eight or four rows' sums with one
// multiply and one FMA: two multiply-pipe ops per block and row for the
// products and a quarter or half of one for the scaling, where an FMA and
// a multiply per row took two.

// Q8INT sets dst to the eight int32 sums of the Q8_0 block at Y13 (|w|
// in Y12) times the activations at src: the signed products as
// |w|·(a·sign w) through VPMADDUBSW, pairs of words added by VPMADDWD
// (Y15: word ones).
#define Q8INT(src, dst) \
	VMOVDQU    src, dst; \
	VPSIGNB    Y13, dst, dst; \
	VPMADDUBSW dst, Y12, dst; \
	VPMADDWD   Y15, dst, dst

// Q8INT4 sets h to the block sums of the four activation rows at base,
// base+R8, base+2·R8 and base+R9, half in each 128-bit lane: lane r of
// each lane the sum of row r's values there. Clobbers t1-t3. (Six
// unpacks and three adds in place of the VPHADDDs measured the same.)
#define Q8INT4(base, h, t1, t2, t3) \
	Q8INT((base), h); \
	Q8INT((base)(R8*1), t1); \
	Q8INT((base)(R8*2), t2); \
	Q8INT((base)(R9*1), t3); \
	VPHADDD t1, h, h; \
	VPHADDD t3, t2, t2; \
	VPHADDD t2, h, h

// Q8WEIGHTS loads the Q8_0 block at SI for Q8INT: its quants in Y13,
// their magnitudes in Y12, and its d, as float32, broadcast into dreg.
#define Q8WEIGHTS(xd, dreg) \
	VMOVDQU      2(SI), Y13; \
	VPSIGNB      Y13, Y13, Y12; \
	VPBROADCASTW (SI), xd; \
	VCVTPH2PS    xd, dreg

// Q8XSTEP moves the multi-row kernels to the next block (AX: the scales'
// block stride in bytes) and loops to label while blocks remain.
#define Q8XSTEP(label) \
	ADDQ $34, SI; \
	ADDQ $32, DI; \
	ADDQ AX, DX; \
	DECQ CX; \
	JNZ  label

// Q8XSTORE4 stores the four floats of xreg into four output rows from
// (R13) on, R12 bytes apart (R11 three times that).
#define Q8XSTORE4(xreg) \
	VMOVSS     xreg, (R13); \
	VEXTRACTPS $1, xreg, (R13)(R12*1); \
	VEXTRACTPS $2, xreg, (R13)(R12*2); \
	VEXTRACTPS $3, xreg, (R13)(R11*1)

// func dotQ8_0x4AVX(w *byte, a *int8, dt *float32, dtStride, nb, nr int, dst *float32, dstStride int)
// is dotQ8_0AVX for four activation rows: out[r][o] for r < 4, o < nr.
// The rows' quants are 32·nb bytes apart; their scales are block-major,
// block b's four at dt[b·dtStride:], so one 16-byte load brings them.
// Each weight block's d, quants and their signs are loaded once for the
// four rows.
TEXT ·dotQ8_0x4AVX(SB), NOSPLIT, $16-64
	Q8XSTART

q8x4row:
	Q8XROWS
	VXORPS X4, X4, X4

q8x4block:
	Q8WEIGHTS(X14, X14)
	Q8INT4(DI, Y0, Y1, Y2, Y3)
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VCVTDQ2PS    X0, X0
	VMULPS       (DX), X14, X14
	VFMADD231PS  X14, X0, X4
	Q8XSTEP(q8x4block)

	X4OUT(dstStride+56(FP))
	Q8XSTORE4(X4)
	X4ROWDONE
	JNZ q8x4row
	VZEROUPPER
	RET

// func dotQ8_0x8AVX(w *byte, a *int8, dt *float32, dtStride, nb, nr int, dst *float32, dstStride int)
// is dotQ8_0x4AVX for eight activation rows, bit for bit its sums: one
// 32-byte load brings a block's eight scales, one multiply and one FMA
// scale the eight rows' sums.
TEXT ·dotQ8_0x8AVX(SB), NOSPLIT, $16-64
	Q8XSTART

q8x8row:
	Q8XROWS
	LEAQ   (DI)(R8*4), R10
	VXORPS Y4, Y4, Y4

q8x8block:
	Q8WEIGHTS(X14, Y14)
	Q8INT4(DI, Y0, Y1, Y2, Y3)
	Q8INT4(R10, Y5, Y1, Y2, Y3)
	VPERM2I128  $0x20, Y5, Y0, Y1
	VPERM2I128  $0x31, Y5, Y0, Y2
	VPADDD      Y2, Y1, Y1
	VCVTDQ2PS   Y1, Y1
	VMULPS      (DX), Y14, Y14
	VFMADD231PS Y14, Y1, Y4
	ADDQ        $32, R10
	Q8XSTEP(q8x8block)

	X4OUT(dstStride+56(FP))
	Q8XSTORE4(X4)
	LEAQ         (R13)(R12*4), R13
	VEXTRACTF128 $1, Y4, X4
	Q8XSTORE4(X4)
	X4ROWDONE
	JNZ          q8x8row
	VZEROUPPER
	RET

// func dotQ8_0AVX(w *byte, a *int8, ad *float32, nb, nr int, dst *float32)
// sets dst[o] to the dot product of Q8_0 weight row o (nb blocks) with
// the Q8_0 activations a (scales ad), for o < nr, two weight rows at a
// time (ROWPAIRS' pairs, two memory streams): the multi-row kernels' sums
// and operations for one activation row, so a row's results are the same
// bits whether one, four or eight rows are multiplied. The pair's sums
// share registers: lane 0 the first row's, lane 1 the second's.
TEXT ·dotQ8_0AVX(SB), NOSPLIT, $0-48
	ONES16
	MOVQ w+0(FP), SI
	MOVQ nr+32(FP), R12
	MOVQ dst+40(FP), R13
	PAIRSTART(nb+24(FP), 34, BX)

rows2:
	LEAQ   (SI)(R11*1), R9
	MOVQ   a+8(FP), DI
	MOVQ   ad+16(FP), DX
	MOVQ   nb+24(FP), CX
	VXORPS X4, X4, X4

q8x1block:
	PREFETCHT0   PFDIST(SI)
	PREFETCHT0   PFDIST(R9)
	VMOVDQU      (DI), Y10
	VMOVDQU      2(SI), Y13
	VPSIGNB      Y13, Y13, Y12
	VPSIGNB      Y13, Y10, Y0
	VPMADDUBSW   Y0, Y12, Y0
	VPMADDWD     Y15, Y0, Y0
	VMOVDQU      2(R9), Y13
	VPSIGNB      Y13, Y13, Y12
	VPSIGNB      Y13, Y10, Y1
	VPMADDUBSW   Y1, Y12, Y1
	VPMADDWD     Y15, Y1, Y1
	VPHADDD      Y1, Y0, Y0
	VPHADDD      Y0, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VCVTDQ2PS    X0, X0
	MOVWLZX      (SI), AX
	MOVWLZX      (R9), R8
	SHLL         $16, R8
	ORL          R8, AX
	VMOVD        AX, X14
	VCVTPH2PS    X14, X14
	VBROADCASTSS (DX), X11
	VMULPS       X11, X14, X14
	VFMADD231PS  X14, X0, X4
	ADDQ         $34, SI
	ADDQ         $34, R9
	ADDQ         $32, DI
	ADDQ         $4, DX
	DECQ         CX
	JNZ          q8x1block

	VMOVSHDUP X4, X8
	VMOVSS    X4, (R13)
	VMOVSS    X8, (R13)(BX*4)
	PAIREND(BX)
	RET
