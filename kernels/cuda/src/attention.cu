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
// its running softmax (max, sum, unnormalised output) to part and
// attn_combine merges the splits.
//
// Two kernels run the same body: attn for groups of up to 16 query heads
// (512 threads), whose bound leaves the compiler the registers it wants
// (80 on sm_90 with NVRTC 11.8; ptxas settles on 64 for sm_80), and
// attn_wide for groups of 17 to 32 (1,024 threads), whose bound caps a
// thread at 64 registers, so that 1,024 of them fit a block's 65,536: the
// compiler spills the rest (16 bytes on sm_90). Without the split, attn
// at 79 registers could not launch groups of 26 or more.

#define ATTN_UNROLL 8

DEV void attn_body(elem_t *out, float *part, const float *q, int ldq, const elem_t *kv, long long blockStride,
		   long long layerOff, const int *row_pos, const int *row_bt, const int *bt, int bs, int nHeads,
		   int kvHeads, int headDim, int split) {
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
}

KERNEL void __launch_bounds__(512) attn(elem_t *out, float *part, const float *q, int ldq, const elem_t *kv,
					long long blockStride, long long layerOff, const int *row_pos,
					const int *row_bt, const int *bt, int bs, int nHeads, int kvHeads,
					int headDim, int split) {
	attn_body(out, part, q, ldq, kv, blockStride, layerOff, row_pos, row_bt, bt, bs, nHeads, kvHeads, headDim, split);
}

KERNEL void __launch_bounds__(1024) attn_wide(elem_t *out, float *part, const float *q, int ldq, const elem_t *kv,
					      long long blockStride, long long layerOff, const int *row_pos,
					      const int *row_bt, const int *bt, int bs, int nHeads, int kvHeads,
					      int headDim, int split) {
	attn_body(out, part, q, ldq, kv, blockStride, layerOff, row_pos, row_bt, bt, bs, nHeads, kvHeads, headDim, split);
}

// attn_combine merges the nsplit splits of attn's part for (head, row) =
// (blockIdx.x, blockIdx.y) into out, elem_t [rows][nHeads][headDim]. Only
// the splits that hold some of the row's context count.
KERNEL void __launch_bounds__(256) attn_combine(elem_t *out, const float *part, const int *row_pos, int nHeads,
						int headDim, int split, int nsplit) {
	int h = blockIdx.x, r = blockIdx.y;
	int ns = row_pos[r] / split + 1;
	const float *pp = part + ((long long)r * nHeads + h) * nsplit * (headDim + 2);
	float m = -PREFIXD_INF;
	for (int s = 0; s < ns; s++) m = fmaxf(m, pp[s * (headDim + 2)]);
	float l = 0.0f;
	for (int s = 0; s < ns; s++) l += pp[s * (headDim + 2) + 1] * expf(pp[s * (headDim + 2)] - m);
	elem_t *o = out + ((long long)r * nHeads + h) * headDim;
	for (int d = threadIdx.x; d < headDim; d += blockDim.x) {
		float a = 0.0f;
		for (int s = 0; s < ns; s++) a += pp[s * (headDim + 2) + 2 + d] * expf(pp[s * (headDim + 2)] - m);
		o[d] = from_f(a / l);
	}
}
