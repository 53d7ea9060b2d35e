// The frames of the K-quant kernels shared by AVX2 (simd_amd64.s) and
// AVX-512 (simd512_amd64.s): the single-row ones' loop over pairs of
// weight rows (KROWS), and the four-row ones' over weight rows, each
// times four activation rows, the sums stored into four output rows.
// Each file defines X4STORE(acc, addr), which sums the lanes of acc into
// the float at addr with its own registers' width.

// KROWS runs a K-quant dot over the rows of a single-row kernel,
// func(w *byte, a *int8, ad *float32, bs *int16, nb, nrows int, out
// *float32) with SI: the first weight row, R12: nrows, R13: out.
// BLOCK(base, acc, minacc) multiplies one block of bsize bytes into a
// row's sum and minimums' sum: rows i and i+h for h = nrows/2 side by
// side (two memory streams, which one core reads faster than one), R10
// counting the pairs, AX = h, R11 = h rows' bytes, the sums in accA, minA
// and accB, minB, zeroed by ZERO; SUMA and SUMB leave each row's result
// in X0. An odd last row goes through as a pair with itself (AX = R11 =
// 0).
#define KROWS(BLOCK, bsize, ZERO, SUMA, SUMB, accA, minA, accB, minB) \
	MOVQ  R12, R10; \
	SHRQ  $1, R10; \
	MOVQ  R10, AX; \
	MOVQ  nb+32(FP), R11; \
	IMULQ $bsize, R11; \
	IMULQ R10, R11; \
	ANDQ  $1, R12; \
	TESTQ R10, R10; \
	JZ    odd; \
rows2: \
	LEAQ (SI)(R11*1), R9; \
	MOVQ a+8(FP), DI; \
	MOVQ ad+16(FP), DX; \
	MOVQ bs+24(FP), BX; \
	MOVQ nb+32(FP), CX; \
	ZERO; \
block: \
	BLOCK(SI, accA, minA); \
	BLOCK(R9, accB, minB); \
	ADDQ $bsize, SI; \
	ADDQ $bsize, R9; \
	ADDQ $256, DI; \
	ADDQ $4, DX; \
	ADDQ $32, BX; \
	DECQ CX; \
	JNZ  block; \
	SUMA; \
	VMOVSS X0, (R13); \
	SUMB; \
	VMOVSS X0, (R13)(AX*4); \
	ADDQ   $4, R13; \
	DECQ   R10; \
	JNZ    rows2; \
	ADDQ   R11, SI; \
	LEAQ   (R13)(AX*4), R13; \
odd: \
	TESTQ R12, R12; \
	JZ    end; \
	XORQ  R12, R12; \
	XORQ  AX, AX; \
	XORQ  R11, R11; \
	MOVQ  $1, R10; \
	JMP   rows2; \
end: \
	VZEROUPPER

// X4ROWSTART keeps the four-row kernels' count of weight rows (nrarg)
// and their output pointer (dstarg) in the frame's locals rows and outp,
// as their block loops take every free register.
#define X4ROWSTART(nrarg, dstarg) \
	MOVQ nrarg, AX; \
	MOVQ AX, rows-8(SP); \
	MOVQ dstarg, AX; \
	MOVQ AX, outp-16(SP)

// X4ROWPTRS starts a weight row of the four-row Q8_0 and Q4_0 kernels,
// func(w *byte, a *int8, ad *float32, nb, nr int, dst *float32, dstStride
// int): the first activation row's quants in DI, scales DX, the blocks to
// go in CX. The activation rows' quants are R8 = 32·nb bytes apart, their
// scales R10 = 4·nb; R9 and R11 hold three of each, R12 zero.
#define X4ROWPTRS \
	MOVQ a+8(FP), DI; \
	MOVQ ad+16(FP), DX; \
	MOVQ nb+24(FP), CX; \
	MOVQ CX, R8; \
	SHLQ $5, R8; \
	MOVQ CX, R10; \
	SHLQ $2, R10; \
	LEAQ (R8)(R8*2), R9; \
	LEAQ (R10)(R10*2), R11; \
	XORQ R12, R12

// X4OUT loads outp into R13, the output rows' stride (stridearg floats)
// in bytes into R12 and three times it into R11.
#define X4OUT(stridearg) \
	MOVQ outp-16(SP), R13; \
	MOVQ stridearg, R12; \
	SHLQ $2, R12; \
	LEAQ (R12)(R12*2), R11

// X4STORES stores a0 ... a3 for the four output rows from R13 on.
#define X4STORES(a0, a1, a2, a3) \
	X4STORE(a0, (R13)); \
	X4STORE(a1, (R13)(R12*1)); \
	X4STORE(a2, (R13)(R12*2)); \
	X4STORE(a3, (R13)(R11*1))

// X4ROWDONE moves outp on to the next weight row's and counts the row
// off rows (the flags say whether any are left).
#define X4ROWDONE \
	ADDQ $4, outp-16(SP); \
	DECQ rows-8(SP)

// X4NEXT stores the four activation rows' sums in a0 ... a3 for the
// weight row just done at outp, the rows stridearg floats apart, and
// moves on (X4ROWDONE). Clobbers R11-R13.
#define X4NEXT(a0, a1, a2, a3, stridearg) \
	X4OUT(stridearg); \
	X4STORES(a0, a1, a2, a3); \
	X4ROWDONE

// KXROWSETUP starts a weight row of the four- and eight-row K-quant
// kernels, func(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst
// *float32, dstStride int): the first activation row's quants in DI,
// scales DX, 16-value sums BX, the blocks to go in CX. The activation
// rows' quants are R8 = 256·nb bytes apart, their scales R10 = 4·nb and
// their sums AX = 32·nb; R9, R11 and R13 hold three of each, R12 zero.
#define KXROWSETUP \
	MOVQ a+8(FP), DI; \
	MOVQ ad+16(FP), DX; \
	MOVQ bs+24(FP), BX; \
	MOVQ nb+32(FP), CX; \
	MOVQ CX, R8; \
	SHLQ $8, R8; \
	MOVQ CX, R10; \
	SHLQ $2, R10; \
	MOVQ CX, AX; \
	SHLQ $5, AX; \
	LEAQ (R8)(R8*2), R9; \
	LEAQ (R10)(R10*2), R11; \
	LEAQ (AX)(AX*2), R13; \
	XORQ R12, R12

// KXZERO zeroes four accumulators.
#define KXZERO(a0, a1, a2, a3) \
	VXORPS a0, a0, a0; \
	VXORPS a1, a1, a1; \
	VXORPS a2, a2, a2; \
	VXORPS a3, a3, a3

// KX4ROWS is the loop of the four-row K-quant kernels over weight rows
// and their blocks of bsize bytes: BLOCK multiplies the block at SI by
// the four activation rows (KXROWSETUP's pointers) into the float sums
// a0 ... a3.
#define KX4ROWS(BLOCK, bsize, a0, a1, a2, a3) \
	MOVQ w+0(FP), SI; \
	X4ROWSTART(nr+40(FP), dst+48(FP)); \
row: \
	KXROWSETUP; \
	KXZERO(a0, a1, a2, a3); \
block: \
	BLOCK; \
	ADDQ $bsize, SI; \
	ADDQ $256, DI; \
	ADDQ $4, DX; \
	ADDQ $32, BX; \
	DECQ CX; \
	JNZ  block; \
	X4NEXT(a0, a1, a2, a3, dstStride+56(FP)); \
	JNZ  row; \
	VZEROUPPER
