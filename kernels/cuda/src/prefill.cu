// prefill.cu: paged causal attention for prefill on tensor cores,
// FlashAttention-2 style.
//
// The step's rows are cut into query tiles of up to PF_TILE_TOKENS
// consecutive tokens of one sequence (launch.StepBuilder lists each
// tile's first row and its rows). As in FlashInfer, a tile's tokens and
// the query heads of one KV head's group are packed into rows, token-major
// (packed row m is token m/group, head m%group), so the whole group shares
// every K/V tile the block loads. A thread block of PF_THREADS threads
// takes PF_ROWS packed rows: blockIdx = (query tile, KV head, chunk of
// PF_ROWS packed rows); each of its four warps holds 16 of them as the A
// operand of mma.sync m16n8k16 (Q rounded to the element type, scaled by
// log2(e)/sqrt(headDim), in registers for the whole kernel).
//
// The block walks the context a tile of PF_KT positions at a time, from
// position 0 up to its last row's position: the tiles past it (above the
// causal diagonal) are never loaded. Each tile's K and V rows come through
// the block table into shared memory with cp.async, the next tile's copies
// in flight while the tensor cores work on this one (two stages). A warp
// computes S = Q·Kᵀ (16 x PF_KT, float accumulators), masks the positions
// past each row's own (only in the tiles that reach past the block's first
// row), updates each row's running maximum and sum (online softmax, exp2),
// turns S into P in the element type in place (the accumulator layout of
// two n-tiles is the A operand's layout) and accumulates O += P·V, V read
// with ldmatrix.trans. Positions past the block's last row are zeroed in
// shared memory, not loaded, so no stale NaN reaches P·V.
//
// The head size is a compile-time constant (attn_prefill64 and 128). On
// f32 builds the K/V rows and Q are rounded to bf16 on the way in; launch
// picks the kernel only for bf16 and f16 pools, where f32 keeps attn's
// exact sums.

#define PF_THREADS 128
#define PF_ROWS 64 // packed rows per block: 16 per warp
#define PF_KT 32   // positions per K/V tile
#define PF_PAD 8   // 16-bit elements of padding per shared row (16 bytes: ldmatrix's rows hit distinct banks)

typedef unsigned short tc_t; // the 16-bit elements the tensor cores read

#if defined(PREFIXD_KV_F16)
#define PF_F16 true
DEV tc_t to_tc(float f) { return f_to_f16(f); }
#else
#define PF_F16 false
DEV tc_t to_tc(float f) { return f_to_bf16(f); }
#endif

// pf_pack puts two floats in one register of an A fragment, the lower
// index in the lower half.
DEV unsigned pf_pack(float lo, float hi) { return (unsigned)to_tc(lo) | (unsigned)to_tc(hi) << 16; }

// pf_softmax folds a tile's scores s (KT m16n8 fragments, -inf where a
// position is excluded) into the running softmax of the fragments' two
// rows (h = 0: row lane/4, h = 1: row lane/4 + 8; a quad's four lanes
// hold one row): each row's maximum mx and sum, its NT output fragments o
// rescaled to the new maximum, and s turned into the weights
// exp2(s - max). Every row must have a finite score by its first tile.
// attn_prefill and attn_decode_tc share it.
template <int KT, int NT> DEV void pf_softmax(float (*s)[4], float (*o)[4], float *mx, float *sum) {
#pragma unroll
	for (int h = 0; h < 2; h++) {
		float m = mx[h];
#pragma unroll
		for (int j = 0; j < KT; j++)
#pragma unroll
			for (int e = 0; e < 2; e++) m = fmaxf(m, s[j][2 * h + e]);
		m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
		m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
		float corr = exp2f(mx[h] - m);
		mx[h] = m;
		sum[h] *= corr;
#pragma unroll
		for (int j = 0; j < NT; j++) o[j][2 * h] *= corr, o[j][2 * h + 1] *= corr;
#pragma unroll
		for (int j = 0; j < KT; j++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				float p = exp2f(s[j][2 * h + e] - m);
				s[j][2 * h + e] = p;
				sum[h] += p;
			}
	}
}

// pf_copy8 copies 8 elements (a 16-byte chunk of shared memory) from
// global memory: by cp.async on 16-bit pools, rounded to bf16 on f32 ones.
DEV void pf_copy8(tc_t *dst, const elem_t *src) {
#if defined(PREFIXD_KV_F32)
	for (int k = 0; k < 8; k++) dst[k] = to_tc(src[k]);
#else
	cp_async16(dst, src);
#endif
}

// pf_load issues the copies of K/V tile t (positions t..t+PF_KT-1) of
// KV head g into ks and vs, zeroing the positions past last.
template <int HD>
DEV void pf_load(tc_t *ks, tc_t *vs, const elem_t *kv, long long blockStride, long long layerOff, const int *tbl,
		 int bs, int kvDim, int g, int t, int last) {
	const int RS = HD + PF_PAD, CPR = HD / 8; // shared row stride; 16-byte chunks per row
	for (int i = threadIdx.x; i < PF_KT * CPR; i += PF_THREADS) {
		int p = i / CPR, ch = i % CPR;
		tc_t *kd = ks + p * RS + ch * 8, *vd = vs + p * RS + ch * 8;
		if (t + p > last) {
			*(uint4 *)kd = make_uint4(0, 0, 0, 0);
			*(uint4 *)vd = make_uint4(0, 0, 0, 0);
			continue;
		}
		const elem_t *k = kv + (long long)tbl[(t + p) / bs] * blockStride + layerOff +
				  (long long)((t + p) % bs) * kvDim + g * HD + ch * 8;
		pf_copy8(kd, k);
		pf_copy8(vd, k + (long long)bs * kvDim);
	}
}

template <int HD>
DEV void attn_prefill_body(elem_t *out, const float *q, int ldq, const elem_t *kv, long long blockStride,
			   long long layerOff, const int *row_pos, const int *row_bt, const int *bt, const int *tiles,
			   int bs, int nHeads, int kvHeads) {
	const int RS = HD + PF_PAD, KS = HD / 16, NT = HD / 8; // row stride; k-steps of Q·Kᵀ; n-tiles of O
	// Two stages of a K tile and a V tile, each PF_KT rows; Q's PF_ROWS
	// rows pass through stage 1 before the loop.
	__shared__ __align__(16) tc_t kvs[2 * 2 * PF_KT * RS];
	const int TILE = PF_KT * RS;
	int g = blockIdx.y, group = nHeads / kvHeads;
	int r0 = tiles[2 * blockIdx.x], n = tiles[2 * blockIdx.x + 1];
	int m0 = blockIdx.z * PF_ROWS, mEnd = min(n * group, m0 + PF_ROWS);
	if (m0 >= mEnd) return; // the tile's last chunk of packed rows ends before this one
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int pos0 = row_pos[r0], first = pos0 + m0 / group, last = pos0 + (mEnd - 1) / group;
	int kvDim = kvHeads * HD;
	const int *tbl = bt + row_bt[r0];

	pf_load<HD>(kvs, kvs + TILE, kv, blockStride, layerOff, tbl, bs, kvDim, g, 0, last);
	cp_async_commit();
	tc_t *qs = kvs + 2 * TILE;
	float scale = rsqrtf((float)HD) * 1.4426950408889634f;
	for (int i = threadIdx.x; i < PF_ROWS * HD; i += PF_THREADS) {
		int m = i / HD, d = i % HD, pm = m0 + m;
		float v = 0.0f;
		if (pm < mEnd) v = q[(long long)(r0 + pm / group) * ldq + (g * group + pm % group) * HD + d] * scale;
		qs[m * RS + d] = to_tc(v);
	}
	__syncthreads();
	unsigned qf[KS][4];
#pragma unroll
	for (int k = 0; k < KS; k++)
		ldmatrix_x4(qf[k], qs + (warp * 16 + (lane & 7) + 8 * ((lane >> 3) & 1)) * RS + 16 * k + 8 * (lane >> 4));
	__syncthreads(); // stage 1 is free for the first prefetch

	// This lane's two rows (g and g+8 of the warp's 16): their positions.
	// A row past the block's end computes with the last row's position and
	// is not written.
	int rowPos[2];
	for (int h = 0; h < 2; h++) {
		int pm = m0 + warp * 16 + lane / 4 + 8 * h;
		rowPos[h] = pm < mEnd ? pos0 + pm / group : last;
	}
	float o[NT][4], mx[2] = {-PREFIXD_INF, -PREFIXD_INF}, sum[2] = {0.0f, 0.0f};
#pragma unroll
	for (int j = 0; j < NT; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;

	for (int it = 0, t = 0; t <= last; it++, t += PF_KT) {
		if (t + PF_KT <= last)
			pf_load<HD>(kvs + 2 * TILE * ((it + 1) & 1), kvs + 2 * TILE * ((it + 1) & 1) + TILE, kv, blockStride,
				    layerOff, tbl, bs, kvDim, g, t + PF_KT, last);
		cp_async_commit();
		cp_async_wait<1>(); // this tile's copies have landed; the next tile's may be in flight
		__syncthreads();
		const tc_t *ks = kvs + 2 * TILE * (it & 1), *vs = ks + TILE;
		float s[PF_KT / 8][4];
#pragma unroll
		for (int j = 0; j < PF_KT / 8; j++) {
			s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
			for (int k = 0; k < KS; k++) {
				unsigned b[2];
				ldmatrix_x2(b, ks + (8 * j + (lane & 7)) * RS + 16 * k + 8 * ((lane >> 3) & 1), false);
				mma_16816(s[j], qf[k], b, PF_F16);
			}
		}
		bool diag = t + PF_KT - 1 > first; // some position of the tile is past some row's
		if (diag) {
#pragma unroll
			for (int h = 0; h < 2; h++)
#pragma unroll
				for (int j = 0; j < PF_KT / 8; j++)
#pragma unroll
					for (int e = 0; e < 2; e++)
						if (t + 8 * j + 2 * (lane & 3) + e > rowPos[h]) s[j][2 * h + e] = -PREFIXD_INF;
		}
		// Position t <= rowPos in tile 0, so each row's maximum is finite
		// from the first tile on.
		pf_softmax<PF_KT / 8, NT>(s, o, mx, sum);
#pragma unroll
		for (int k = 0; k < PF_KT / 16; k++) {
			unsigned pa[4] = {pf_pack(s[2 * k][0], s[2 * k][1]), pf_pack(s[2 * k][2], s[2 * k][3]),
					  pf_pack(s[2 * k + 1][0], s[2 * k + 1][1]), pf_pack(s[2 * k + 1][2], s[2 * k + 1][3])};
#pragma unroll
			for (int j = 0; j < NT; j++) {
				unsigned b[2];
				ldmatrix_x2(b, vs + (16 * k + (lane & 7) + 8 * ((lane >> 3) & 1)) * RS + 8 * j, true);
				mma_16816(o[j], pa, b, PF_F16);
			}
		}
		__syncthreads(); // the next iteration's prefetch overwrites this stage
	}
	for (int h = 0; h < 2; h++) {
		float l = sum[h];
		l += __shfl_xor_sync(0xffffffffu, l, 1);
		l += __shfl_xor_sync(0xffffffffu, l, 2);
		int pm = m0 + warp * 16 + lane / 4 + 8 * h;
		if (pm >= mEnd) continue;
		elem_t *op = out + ((long long)(r0 + pm / group) * nHeads + g * group + pm % group) * HD + 2 * (lane & 3);
#pragma unroll
		for (int j = 0; j < NT; j++) {
			op[8 * j] = from_f(o[j][2 * h] / l);
			op[8 * j + 1] = from_f(o[j][2 * h + 1] / l);
		}
	}
}

KERNEL void __launch_bounds__(128) attn_prefill64(elem_t *out, const float *q, int ldq, const elem_t *kv,
						  long long blockStride, long long layerOff, const int *row_pos,
						  const int *row_bt, const int *bt, const int *tiles, int bs,
						  int nHeads, int kvHeads) {
	attn_prefill_body<64>(out, q, ldq, kv, blockStride, layerOff, row_pos, row_bt, bt, tiles, bs, nHeads, kvHeads);
}

KERNEL void __launch_bounds__(128) attn_prefill128(elem_t *out, const float *q, int ldq, const elem_t *kv,
						   long long blockStride, long long layerOff, const int *row_pos,
						   const int *row_bt, const int *bt, const int *tiles, int bs,
						   int nHeads, int kvHeads) {
	attn_prefill_body<128>(out, q, ldq, kv, blockStride, layerOff, row_pos, row_bt, bt, tiles, bs, nHeads, kvHeads);
}
