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
	MOVQ   R12, R10; \
	SHRQ   $1, R10; \
	MOVQ   R10, BX; \
	MOVQ   n+16(FP), R11; \
	IMUL3Q $size, R11, R11; \
	IMULQ  R10, R11; \
	ANDQ   $1, R12; \
	TESTQ  R10, R10; \
	JZ     odd; \
rows2: \
	LEAQ (SI)(R11*1), R9; \
	MOVQ x+8(FP), DI; \
	MOVQ n+16(FP), CX; \
	DOT; \
	VMOVSS X0, (R13); \
	VMOVSS X8, (R13)(BX*4); \
	ADDQ   $4, R13; \
	DECQ   R10; \
	JNZ    rows2; \
	ADDQ   R11, SI; \
	LEAQ   (R13)(BX*4), R13; \
odd: \
	TESTQ R12, R12; \
	JZ    end; \
	XORQ  R12, R12; \
	XORQ  BX, BX; \
	XORQ  R11, R11; \
	MOVQ  $1, R10; \
	JMP   rows2; \
end: \
	VZEROUPPER
