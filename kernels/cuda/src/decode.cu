// decode.cu: paged attention for decode, FlashInfer style.
//
// One thread block of DEC_THREADS threads per (split, KV head, row) holds
// every query head of the KV head's group, so a K/V page is read from
// memory once for the whole group (attn reads it once per warp, a warp
// per query head). The block walks its split of the row's context a tile
// of DEC_TILE positions at a time: it reads the tile's page IDs from the
// block table once per page (into shared memory), then loads the pages'
// K and V for its KV head with 16-byte loads into shared memory (each
// slot's head row is headDim contiguous elements, whose bytes must be a
// multiple of 16), zeroing the slots past the split's end. Each warp then
// takes query heads warp, warp + DEC_WARPS, ...: lane p scores position p
// of the tile against the head's query (16-byte reads of K from shared
// memory, rows padded by 16 bytes so that the lanes of a quarter-warp hit
// distinct banks), the warp updates the head's running softmax, and each
// lane accumulates its dimensions of the output over the tile's positions
// (V read from shared memory, the weights passed by shuffle).
//
// The page size is a compile-time constant (attn_decode8, 16, 32: the
// pages of one tile follow from it without division), as in FlashInfer.
// A split starts at a multiple of the page size (launch.Attention sizes
// splits in multiples of DEC_TILE), so a tile covers DEC_TILE/BS whole
// pages. With one split the block writes the normalised output; with more
// it writes attn's partial layout (max, sum, unnormalised output) and
// attn_combine merges the splits.

#define DEC_THREADS 128
#define DEC_WARPS (DEC_THREADS / 32)
#define DEC_TILE 32
#define DEC_MAX_HEAD_DIM 128
#define DEC_DPL (DEC_MAX_HEAD_DIM / 32)
// DEC_MAX_Q bounds group * headDim: the group's queries in shared memory.
#define DEC_MAX_Q 2048
// DEC_HPW is the most query heads a warp takes: groups of up to 32.
#define DEC_HPW 8
// DEC_EPV is the elements of one 16-byte load.
#define DEC_EPV ((int)(16 / sizeof(elem_t)))

// dec_dot16 returns the dot product of the DEC_EPV elements in v with
// q[0..DEC_EPV).
DEV float dec_dot16(uint4 v, const float *q) {
	const elem_t *e = (const elem_t *)&v;
	float s = 0.0f;
#pragma unroll
	for (int k = 0; k < DEC_EPV; k++) s += q[k] * to_f(e[k]);
	return s;
}

template <int BS>
DEV void attn_decode_body(elem_t *out, float *part, const float *q, int ldq, const elem_t *kv, long long blockStride,
			  long long layerOff, const int *row_pos, const int *row_bt, const int *bt, int nHeads,
			  int kvHeads, int headDim, int split) {
	// K and V of a tile, rows padded by one 16-byte chunk.
	__shared__ uint4 ks[DEC_TILE * (DEC_MAX_HEAD_DIM / (16 / sizeof(elem_t)) + 1)];
	__shared__ uint4 vs[DEC_TILE * (DEC_MAX_HEAD_DIM / (16 / sizeof(elem_t)) + 1)];
	__shared__ float qs[DEC_MAX_Q];
	__shared__ int pages[DEC_TILE / BS];
	int s = blockIdx.x, g = blockIdx.y, r = blockIdx.z;
	int p0 = s * split, p1 = min(row_pos[r] + 1, p0 + split);
	if (p0 >= p1) return; // the row's context ends before this split
	int group = nHeads / kvHeads, kvDim = kvHeads * headDim;
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int cpr = headDim / DEC_EPV, rs = cpr + 1; // 16-byte chunks per row, and per shared row
	const int *tbl = bt + row_bt[r];
	float scale = rsqrtf((float)headDim);
	const float *qr = q + (long long)r * ldq + (long long)g * group * headDim;
	for (int i = threadIdx.x; i < group * headDim; i += DEC_THREADS) qs[i] = qr[i] * scale;
	float m[DEC_HPW], l[DEC_HPW], acc[DEC_HPW][DEC_DPL];
#pragma unroll
	for (int j = 0; j < DEC_HPW; j++) {
		m[j] = -PREFIXD_INF;
		l[j] = 0.0f;
#pragma unroll
		for (int k = 0; k < DEC_DPL; k++) acc[j][k] = 0.0f;
	}
	for (int t = p0; t < p1; t += DEC_TILE) {
		int n = min(DEC_TILE, p1 - t); // positions of the tile in the split
		__syncthreads();               // the last tile's readers are done
		if (threadIdx.x < DEC_TILE / BS && threadIdx.x * BS < n) pages[threadIdx.x] = tbl[t / BS + threadIdx.x];
		__syncthreads();
		for (int c = threadIdx.x; c < DEC_TILE * cpr; c += DEC_THREADS) {
			int i = c / cpr, ch = c - i * cpr;
			uint4 kk = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
			if (i < n) {
				const elem_t *kp = kv + (long long)pages[i / BS] * blockStride + layerOff +
						   (long long)(i % BS) * kvDim + g * headDim + ch * DEC_EPV;
				kk = *(const uint4 *)kp;
				vv = *(const uint4 *)(kp + (long long)BS * kvDim);
			}
			ks[i * rs + ch] = kk;
			vs[i * rs + ch] = vv;
		}
		__syncthreads();
#pragma unroll
		for (int j = 0; j < DEC_HPW; j++) {
			int hh = warp + j * DEC_WARPS; // the same for the whole warp
			if (hh >= group) break;
			const float *qh = qs + hh * headDim;
			float sc = 0.0f;
			for (int ch = 0; ch < cpr; ch++) sc += dec_dot16(ks[lane * rs + ch], qh + ch * DEC_EPV);
			if (lane >= n) sc = -PREFIXD_INF;
			float mx = sc;
			for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
			float mn = fmaxf(m[j], mx); // finite: the tile has a position
			float corr = expf(m[j] - mn);
			float e = lane < n ? expf(sc - mn) : 0.0f;
			l[j] = l[j] * corr + warp_sum(e);
			m[j] = mn;
#pragma unroll
			for (int k = 0; k < DEC_DPL; k++) acc[j][k] *= corr;
			const elem_t *vrow = (const elem_t *)vs;
			for (int p = 0; p < n; p++) {
				float w = __shfl_sync(0xffffffffu, e, p);
				const elem_t *vp = vrow + p * rs * DEC_EPV;
#pragma unroll
				for (int k = 0; k < DEC_DPL; k++) {
					int d = lane + 32 * k;
					if (d < headDim) acc[j][k] += w * to_f(vp[d]);
				}
			}
		}
	}
#pragma unroll
	for (int j = 0; j < DEC_HPW; j++) {
		int hh = warp + j * DEC_WARPS;
		if (hh >= group) break;
		int h = g * group + hh;
		if (gridDim.x == 1) {
			elem_t *o = out + ((long long)r * nHeads + h) * headDim;
#pragma unroll
			for (int k = 0; k < DEC_DPL; k++) {
				int d = lane + 32 * k;
				if (d < headDim) o[d] = from_f(acc[j][k] / l[j]);
			}
			continue;
		}
		float *pp = part + (((long long)r * nHeads + h) * gridDim.x + s) * (headDim + 2);
		if (lane == 0) pp[0] = m[j], pp[1] = l[j];
#pragma unroll
		for (int k = 0; k < DEC_DPL; k++) {
			int d = lane + 32 * k;
			if (d < headDim) pp[2 + d] = acc[j][k];
		}
	}
}

// attn_decode8, attn_decode16 and attn_decode32 are attn_decode_body for
// pages of 8, 16 and 32 slots. Grid: (splits, KV heads, rows).
#define ATTN_DECODE_PARAMS                                                                                   \
	elem_t *out, float *part, const float *q, int ldq, const elem_t *kv, long long blockStride,          \
		long long layerOff, const int *row_pos, const int *row_bt, const int *bt, int nHeads, int kvHeads, \
		int headDim, int split
#define ATTN_DECODE_ARGS out, part, q, ldq, kv, blockStride, layerOff, row_pos, row_bt, bt, nHeads, kvHeads, headDim, split

KERNEL void __launch_bounds__(128) attn_decode8(ATTN_DECODE_PARAMS) { attn_decode_body<8>(ATTN_DECODE_ARGS); }
KERNEL void __launch_bounds__(128) attn_decode16(ATTN_DECODE_PARAMS) { attn_decode_body<16>(ATTN_DECODE_ARGS); }
KERNEL void __launch_bounds__(128) attn_decode32(ATTN_DECODE_PARAMS) { attn_decode_body<32>(ATTN_DECODE_ARGS); }
