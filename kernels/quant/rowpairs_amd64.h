// ROWPAIRS is the row loop of the float types' single-row kernels, AVX2
// (simd_amd64.s) and AVX-512 (simd512_amd64.s), func(w *byte, x *float32,
// n, nrows int, out *float32) with SI: the first weight row, R12: nrows,
// R13: out. DOT dots the weight rows at SI and R9 (n values of size bytes
// each) with x at DI (CX: n), leaving the two sums in X0 and X8 and SI at
// the end of its row. The rows go in pairs i and i+h for h = nrows/2 (two
// memory streams, which one core reads faster than one), R10 counting the
// pairs, BX = h, R11 = h rows' bytes; an odd last row goes through as a
// pair with itself (BX = R11 = 0).
#define ROWPAIRS(size, DOT) \
	PAIRSTART(n+16(FP), size, BX); \
rows2: \
	LEAQ (SI)(R11*1), R9; \
	MOVQ x+8(FP), DI; \
	MOVQ n+16(FP), CX; \
	DOT; \
	VMOVSS X0, (R13); \
	VMOVSS X8, (R13)(BX*4); \
	PAIREND(BX)

// PAIRSTART sets R10 to the pairs of the R12 rows, h (a register) to
// their number, R11 to h rows of narg units of size bytes and R12 to
// whether a row is left over, and jumps to odd if there are no pairs.
#define PAIRSTART(narg, size, h) \
	MOVQ   R12, R10; \
	SHRQ   $1, R10; \
	MOVQ   R10, h; \
	MOVQ   narg, R11; \
	IMUL3Q $size, R11, R11; \
	IMULQ  R10, R11; \
	ANDQ   $1, R12; \
	TESTQ  R10, R10; \
	JZ     odd

// PAIREND ends the pair loop at rows2 whose two results were stored at
// (R13) and h floats after: it moves R13 on and loops while pairs
// remain, then moves SI and R13 past the second rows and runs a row left
// over as a pair with itself (h = R11 = 0).
#define PAIREND(h) \
	ADDQ   $4, R13; \
	DECQ   R10; \
	JNZ    rows2; \
	ADDQ   R11, SI; \
	LEAQ   (R13)(h*4), R13; \
odd: \
	TESTQ R12, R12; \
	JZ    end; \
	XORQ  R12, R12; \
	XORQ  h, h; \
	XORQ  R11, R11; \
	MOVQ  $1, R10; \
	JMP   rows2; \
end: \
	VZEROUPPER

// PFDIST is how far ahead of each weight stream the AVX2 single-row
// K-quant and Q8_0 kernels prefetch, in bytes. Decode reads each weight
// once, and these kernels spend ~100 instructions on a 210-byte Q6_K block,
// too many for the out-of-order window to keep enough loads in flight; the
// hardware prefetcher alone left the 110M Q6_K model's decode at 157-199
// tok/s against 221-261 with the prefetches (2 threads, PREFIXD_CPU=avx2,
// interleaved; 1024 and 4096 bytes measured within the noise of 2048).
#define PFDIST 2048

// PREFETCHBLOCK prefetches the 256 bytes (a K-quant block at most)
// PFDIST bytes after base into the cache.
#define PREFETCHBLOCK(base) \
	PREFETCHT0 (PFDIST)(base); \
	PREFETCHT0 (PFDIST+64)(base); \
	PREFETCHT0 (PFDIST+128)(base); \
	PREFETCHT0 (PFDIST+192)(base)

// KSTEP steps the K-quant kernels to the next block of bsize bytes (SI)
// and of the activations (DI quants, DX scales, BX 16-value sums) and
// loops to label while CX counts blocks down.
#define KSTEP(bsize, label) \
	ADDQ $bsize, SI; \
	ADDQ $256, DI; \
	ADDQ $4, DX; \
	ADDQ $32, BX; \
	DECQ CX; \
	JNZ  label

// KROWPTRS points the K-quant kernels at a weight row's activations,
// func(w *byte, a *int8, ad *float32, bs *int16, ...): the quants in DI,
// scales DX, 16-value sums BX, and the blocks to go (nbarg) in CX.
#define KROWPTRS(nbarg) \
	MOVQ a+8(FP), DI; \
	MOVQ ad+16(FP), DX; \
	MOVQ bs+24(FP), BX; \
	MOVQ nbarg, CX

// KROWS is ROWPAIRS for the K-quants' single-row kernels, func(w *byte, a
// *int8, ad *float32, bs *int16, nb, nrows int, out *float32), with h in
// AX: BLOCK(base, acc) multiplies one block of bsize bytes at base by the
// activation row into a row's float sum, accA for the first row of a pair
// and accB for the second, each summed into X0 by HSUM8 as the four-row
// kernels' X4STORE sums theirs.
#define KROWS(BLOCK, bsize, accA, accB) \
	PAIRSTART(nb+32(FP), bsize, AX); \
rows2: \
	LEAQ   (SI)(R11*1), R9; \
	KROWPTRS(nb+32(FP)); \
	VXORPS accA, accA, accA; \
	VXORPS accB, accB, accB; \
block: \
	PREFETCHBLOCK(SI); \
	PREFETCHBLOCK(R9); \
	BLOCK(SI, accA); \
	BLOCK(R9, accB); \
	ADDQ   $bsize, R9; \
	KSTEP(bsize, block); \
	VMOVAPS accA, Y0; \
	HSUM8; \
	VMOVSS X0, (R13); \
	VMOVAPS accB, Y0; \
	HSUM8; \
	VMOVSS X0, (R13)(AX*4); \
	PAIREND(AX)
