// attention.cu: paged causal attention for prefill and decode alike.
//
// Row r (a query token at position row_pos[r]) attends to positions
// 0..row_pos[r] of its sequence, read through its block table, after
// kv_append has stored this step's K/V: a prefill row sees the cached
// prefix and the new tokens before it, a decode row its whole context.
//
// attn runs one thread block per (split, KV head, row), one warp per query
// head of the KV head's group (GQA), so all the group's warps read the same
// K/V lines. Each split covers `split` positions. With one split per row
// (gridDim.x == 1) the block writes the normalised output itself; with
// more (FlashDecoding: a batch of long decodes fills the GPU) it writes
// its running softmax (max, sum, unnormalised output) to part, and the
// last of a row's splits to finish merges them (split_merge).
//
// Two kernels run the same body: attn for groups of up to 16 query heads
// (512 threads), whose bound leaves the compiler the registers it wants
// (80 on sm_90 with NVRTC 11.8; ptxas settles on 64 for sm_80), and
// attn_wide for groups of 17 to 32 (1,024 threads), whose bound caps a
// thread at 64 registers, so that 1,024 of them fit a block's 65,536: the
// compiler spills the rest (16 bytes on sm_90). Without the split, attn
// at 79 registers could not launch groups of 26 or more.

#define ATTN_UNROLL 8

// split_merge ends a block of a launch with several splits, once the
// block has written its partials (max in natural-log units, sum,
// unnormalised output: [row][query head][split][headDim + 2] in part) for
// row r's query heads over KV head g: the last of the row's splits to
// finish (an atomic count per (row, KV head) in count, int
// [rows][kvHeads]) merges them into out and sets the count back to 0 for
// the next launch. Only the splits that hold some of the row's context
// count. Every thread of the block calls it.
DEV void split_merge(elem_t *out, const float *part, int *count, const int *row_pos, int r, int g, int group,
		     int nHeads, int headDim, int split) {
	__shared__ int last;
	int ns = row_pos[r] / split + 1, *c = count + (long long)r * gridDim.y + g;
	__threadfence(); // this block's partials, seen by whichever block merges
	__syncthreads();
	if (threadIdx.x == 0) last = atomicAdd(c, 1) == ns - 1;
	__syncthreads();
	if (!last) return;
	__threadfence();
	for (int i = threadIdx.x; i < group * headDim; i += blockDim.x) {
		int hh = i / headDim, d = i - hh * headDim, h = g * group + hh;
		// The other blocks' partials, from L2 (__ldcg): this block's L1
		// holds none of them, but need not be coherent with theirs.
		const float *pp = part + ((long long)r * nHeads + h) * gridDim.x * (headDim + 2);
		float m = -PREFIXD_INF, l = 0.0f, a = 0.0f;
		for (int s = 0; s < ns; s++) m = fmaxf(m, __ldcg(pp + s * (headDim + 2)));
		for (int s = 0; s < ns; s++) {
			const float *ps = pp + s * (headDim + 2);
			float w = expf(__ldcg(ps) - m);
			l += __ldcg(ps + 1) * w;
			a += __ldcg(ps + 2 + d) * w;
		}
		out[((long long)r * nHeads + h) * headDim + d] = from_f(a / l);
	}
	if (threadIdx.x == 0) *c = 0;
}

DEV void attn_body(elem_t *out, float *part, int *count, const float *q, int ldq, const elem_t *kv,
		   long long blockStride, long long layerOff, const int *row_pos, const int *row_bt, const int *bt, int bs,
		   int nHeads, int kvHeads, int headDim, int split) {
	int s = blockIdx.x, g = blockIdx.y, r = blockIdx.z;
	int group = nHeads / kvHeads, lane = threadIdx.x & 31;
	int h = g * group + (threadIdx.x >> 5);
	int p0 = s * split, p1 = min(row_pos[r] + 1, p0 + split);
	if (p0 >= p1) return; // the row's context ends before this split
	int kvDim = kvHeads * headDim;
	const int *tbl = bt + row_bt[r];
	float scale = rsqrtf((float)headDim);
	float qv[ATTN_DPL], acc[ATTN_DPL];
	const float *qr = q + (long long)r * ldq + h * headDim;
#pragma unroll
	for (int j = 0; j < ATTN_DPL; j++) {
		int d = lane + 32 * j;
		qv[j] = d < headDim ? qr[d] * scale : 0.0f;
		acc[j] = 0.0f;
	}
	float m = -PREFIXD_INF, l = 0.0f;
	// ATTN_UNROLL positions at a time: their K and V loads are independent,
	// so they are in flight together, and their dot-product reductions
	// interleave; the running softmax is rescaled once per group.
	for (int p = p0; p < p1; p += ATTN_UNROLL) {
		float dot[ATTN_UNROLL];
		const elem_t *vp[ATTN_UNROLL];
#pragma unroll
		for (int u = 0; u < ATTN_UNROLL; u++) {
			// Past the split's end, reread its last position; its
			// weight is zero below.
			const elem_t *kp = kv + kv_slot(tbl, min(p + u, p1 - 1), bs, kvDim, blockStride, layerOff) + g * headDim;
			vp[u] = kp + (long long)bs * kvDim;
			float s = 0.0f;
#pragma unroll
			for (int j = 0; j < ATTN_DPL; j++) {
				int d = lane + 32 * j;
				if (d < headDim) s += qv[j] * to_f(kp[d]);
			}
			dot[u] = s;
		}
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
			for (int u = 0; u < ATTN_UNROLL; u++) dot[u] += __shfl_xor_sync(0xffffffffu, dot[u], o);
		}
		float mn = m;
#pragma unroll
		for (int u = 0; u < ATTN_UNROLL; u++)
			if (p + u < p1) mn = fmaxf(mn, dot[u]);
		float c = expf(m - mn);
		l *= c;
#pragma unroll
		for (int j = 0; j < ATTN_DPL; j++) acc[j] *= c;
#pragma unroll
		for (int u = 0; u < ATTN_UNROLL; u++) {
			float e = p + u < p1 ? expf(dot[u] - mn) : 0.0f;
			l += e;
#pragma unroll
			for (int j = 0; j < ATTN_DPL; j++) {
				int d = lane + 32 * j;
				if (d < headDim) acc[j] += e * to_f(vp[u][d]);
			}
		}
		m = mn;
	}
	if (gridDim.x == 1) {
		elem_t *o = out + ((long long)r * nHeads + h) * headDim;
#pragma unroll
		for (int j = 0; j < ATTN_DPL; j++) {
			int d = lane + 32 * j;
			if (d < headDim) o[d] = from_f(acc[j] / l);
		}
		return;
	}
	float *pp = part + (((long long)r * nHeads + h) * gridDim.x + s) * (headDim + 2);
	if (lane == 0) pp[0] = m, pp[1] = l;
#pragma unroll
	for (int j = 0; j < ATTN_DPL; j++) {
		int d = lane + 32 * j;
		if (d < headDim) pp[2 + d] = acc[j];
	}
	split_merge(out, part, count, row_pos, r, g, group, nHeads, headDim, split);
}

#define ATTN_PARAMS                                                                                          \
	elem_t *out, float *part, int *count, const float *q, int ldq, const elem_t *kv, long long blockStride, \
		long long layerOff, const int *row_pos, const int *row_bt, const int *bt, int bs, int nHeads,   \
		int kvHeads, int headDim, int split
#define ATTN_ARGS out, part, count, q, ldq, kv, blockStride, layerOff, row_pos, row_bt, bt, bs, nHeads, kvHeads, headDim, split

KERNEL void __launch_bounds__(512) attn(ATTN_PARAMS) { attn_body(ATTN_ARGS); }
KERNEL void __launch_bounds__(1024) attn_wide(ATTN_PARAMS) { attn_body(ATTN_ARGS); }
