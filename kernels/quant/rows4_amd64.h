// The frame of the four-row kernels, AVX2 (simd_amd64.s) and AVX-512
// (simd512_amd64.s): one weight row at a time (SI) times four activation
// rows, the sums stored into four output rows. Each file defines
// X4STORE(acc, addr), which sums the lanes of acc into the float at addr
// with its own registers' width. It needs rowpairs_amd64.h's KSTEP.

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
	X4STRIDES(5)

// Q8XSTART starts the AVX2 multi-row Q8_0 kernels, func(w *byte, a
// *int8, dt *float32, dtStride, nb, nr int, dst *float32, dstStride int):
// word ones in Y15 (simd_amd64.s' ONES16), SI the weights, the row count
// and output pointer in the frame (X4ROWSTART), AX the scales' block
// stride in bytes.
#define Q8XSTART \
	ONES16; \
	MOVQ w+0(FP), SI; \
	X4ROWSTART(nr+40(FP), dst+48(FP)); \
	MOVQ dtStride+24(FP), AX; \
	SHLQ $2, AX

// Q8XROWS sets the Q8_0 multi-row kernels' pointers for a weight row: DI
// the first activation row's quants, DX its scales (block-major), CX the
// blocks, R8 the rows' stride (32·nb bytes) and R9 three times it.
#define Q8XROWS \
	MOVQ a+8(FP), DI; \
	MOVQ dt+16(FP), DX; \
	MOVQ nb+32(FP), CX; \
	MOVQ CX, R8; \
	SHLQ $5, R8; \
	LEAQ (R8)(R8*2), R9

// X4STRIDES sets the activation rows' strides from the blocks in CX: R8
// = CX<<qshift bytes of quants, R10 = 4·CX of scales, R9 and R11 three
// of each, R12 zero.
#define X4STRIDES(qshift) \
	MOVQ CX, R8; \
	SHLQ $qshift, R8; \
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
	X4STRIDES(8); \
	MOVQ CX, AX; \
	SHLQ $5, AX; \
	LEAQ (AX)(AX*2), R13

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
	KSTEP(bsize, block); \
	X4NEXT(a0, a1, a2, a3, dstStride+56(FP)); \
	JNZ  row; \
	VZEROUPPER
