// tensor.cu: the tensor-core primitives a FlashAttention-style prefill
// kernel is built from (compute capability 8.0 and later), and tc_check,
// which runs them once so that the kernel tests check their fragment
// layouts against a scalar reference: on the emulator (emu.h implements
// each instruction with the layouts PTX defines) and on a GPU (the
// hardware's), so both agree with PTX and with each other.

// mma_16816 is mma.sync.aligned.m16n8k16.row.col with float
// accumulators, on f16 elements if f16 else bf16: d += a·b over a warp's
// fragments (emu.h's mma_16816 gives the layout).
#ifndef PREFIXD_EMU
#define PREFIXD_MMA_16816(T)                                                                                  \
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." T "." T ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, " \
		     "{%8, %9}, {%0, %1, %2, %3};\n"                                                                \
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                               \
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
#endif
DEV void mma_16816(float *d, const unsigned *a, const unsigned *b, bool f16) {
#ifndef PREFIXD_EMU
	if (f16)
		PREFIXD_MMA_16816("f16");
	else
		PREFIXD_MMA_16816("bf16");
#else
	emu::mma_16816(d, a, b, !f16);
#endif
}

// ldmatrix_x4 and ldmatrix_x2 are ldmatrix.sync.aligned.m8n8.x4 and .x2
// (.trans if trans) .shared.b16: p is this lane's row address (16-byte
// aligned, in shared memory).
DEV void ldmatrix_x4(unsigned *r, const void *p) {
#ifndef PREFIXD_EMU
	unsigned s = (unsigned)__cvta_generic_to_shared(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(s));
#else
	emu::ldmatrix(r, 4, false, p);
#endif
}

DEV void ldmatrix_x2(unsigned *r, const void *p, bool trans) {
#ifndef PREFIXD_EMU
	unsigned s = (unsigned)__cvta_generic_to_shared(p);
	if (trans)
		asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
	else
		asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
#else
	emu::ldmatrix(r, 2, trans, p);
#endif
}

// cp_async16, cp_async_commit and cp_async_wait<N> are cp.async.cg of 16
// bytes from global to shared memory, cp.async.commit_group and
// cp.async.wait_group N (all groups but the N most recent: 1 for double
// buffering).
DEV void cp_async16(void *dst, const void *src) {
#ifndef PREFIXD_EMU
	unsigned s = (unsigned)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src));
#else
	emu::cp_async16(dst, src);
#endif
}

DEV void cp_async_commit() {
#ifndef PREFIXD_EMU
	asm volatile("cp.async.commit_group;\n" ::);
#else
	emu::cp_async_commit();
#endif
}

template <int N> DEV void cp_async_wait() {
#ifndef PREFIXD_EMU
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#else
	emu::cp_async_wait(N);
#endif
}

// tc_check runs on one warp: it copies A (16x16, row-major), Bt (B as
// 8x16, n by k) and B (16x8, k by n) of 16-bit elements (bf16, or IEEE
// half if f16) into shared memory with cp.async, loads A's fragments with
// ldmatrix.x4, B's from Bt with ldmatrix.x2 and from B with
// ldmatrix.x2.trans, and writes both products A·B, d[0] through Bt and
// d[1] through B, each 16x8 floats row-major.
KERNEL void __launch_bounds__(32) tc_check(float *d, const unsigned short *a, const unsigned short *bt,
					   const unsigned short *b, int f16) {
	__shared__ __align__(16) unsigned short as[16 * 16], bts[8 * 16], bs[16 * 8];
	int lane = threadIdx.x;
	cp_async16(as + 8 * lane, a + 8 * lane); // 32 chunks of 16 bytes
	if (lane < 16)
		cp_async16(bts + 8 * lane, bt + 8 * lane);
	else
		cp_async16(bs + 8 * (lane - 16), b + 8 * (lane - 16));
	cp_async_commit();
	cp_async_wait<0>();
	__syncthreads();
	unsigned af[4], bf[2], bf2[2];
	int i = lane / 8, j = lane % 8;
	// Matrix i of A: rows 8(i%2).., columns 8(i/2)..: a[0..3]'s order.
	ldmatrix_x4(af, as + (j + 8 * (i & 1)) * 16 + 8 * (i >> 1));
	// Bt's rows are B's columns: matrix i holds k 8i.. of columns 0..7.
	ldmatrix_x2(bf, bts + j * 16 + 8 * (i & 1), false);
	// B's rows are k: matrix i holds rows 8i.. , transposed.
	ldmatrix_x2(bf2, bs + (j + 8 * (i & 1)) * 8, true);
	float d0[4] = {0, 0, 0, 0}, d1[4] = {0, 0, 0, 0};
	mma_16816(d0, af, bf, f16);
	mma_16816(d1, af, bf2, f16);
	int g = lane / 4, t = lane % 4;
	for (int k = 0; k < 4; k++) {
		int row = g + 8 * (k >> 1), col = 2 * t + (k & 1);
		d[row * 8 + col] = d0[k];
		d[128 + row * 8 + col] = d1[k];
	}
}
