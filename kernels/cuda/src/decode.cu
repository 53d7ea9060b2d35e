// decode.cu: paged attention for decode, FlashInfer style, written for
// memory bandwidth.
//
// One thread block of DEC_THREADS threads per (split, KV head, row) holds
// every query head of the KV head's group, so a K/V page is read from
// memory once for the whole group. The block walks its split of the row's
// context a tile of tp positions at a time: 64, or fewer where head rows
// are long (a tile's K and V fill at most one stage of DEC_STAGE 16-byte
// chunks, 18 KB: 32 positions for head dim 128 in bf16, 16 in f32).
//
// Why (H100 figures): per (row, KV head) the work is a stream of K/V
// bytes, so the kernel is bound by the bytes it keeps in flight. To draw
// ~3 TB/s at ~1 us of latency each of 132 SMs needs ~23 KB of loads
// outstanding at all times. The previous kernel had at most one 8 KB
// tile a block, loaded by plain loads in two serial round trips, and
// nothing in flight while it computed: ~18% of a copy. Here tiles go by
// cp.async into two stages: every thread issues all its copies of tile t+1
// (8 of 16 bytes at head dim 64) before it waits for tile t, and the block
// computes tile t while t+1 is in flight. Per block: 44 KB of static
// shared memory (two stages, 8 KB of queries; 5 blocks fit an SM) and 128
// registers a thread under __launch_bounds__(128, 4) (no spills: 4 blocks
// an SM), so up to 4 x 16 KB = 64 KB in flight per SM, never less than
// the 16 KB of the tiles being computed. The block table is read once per
// page: tile t+2's page IDs are loaded into a register while tile t is
// computed and stored in shared memory after it, so no copy waits on one.
//
// The arithmetic must then keep up: a group of 8 does 16 FMAs per 2-byte
// element on the CUDA cores, so every K/V element is read and converted
// once for all the heads a warp holds. Warp w takes query heads w,
// w + DEC_WARPS, ... Scores: lane p scores positions p and p + 32 (K rows
// padded by one chunk, so a quarter-warp's 16-byte reads hit distinct
// banks; queries read as 16-byte broadcasts). The warp updates each
// head's running softmax and writes the weights over the stage's K, which
// all warps have read by then. Output: lane i owns DPL consecutive
// dimensions (1, 2 or 4: head dims up to 32, 64 and 128, a template
// parameter, so no FMA goes to a dimension past the head); four positions
// at a time it reads and converts their V once and takes each head's four
// weights in one 16-byte read. Counted for group 8, head dim 64, bf16:
// ~1,100 warp instructions a warp per 16 KB tile, so at 4 a clock the
// issue limit is ~3.4 TB/s, about 65% busy at 80% of the copy rate.
//
// The page size is a compile-time constant (attn_decode8, 16, 32: page
// and slot of a position follow without division), as in FlashInfer. A
// split starts at a multiple of 32 positions (launch.Attention sizes
// splits in multiples of 32) and so at a page boundary. Positions past
// the split's end are not loaded: their scores and weights are masked,
// and V rows up to the next multiple of 4 are zeroed for the output loop.
// With one split the block writes the normalised output; with more it
// writes attn's partial layout (max, sum, unnormalised output), and the
// row's last split to finish merges them (split_merge).

#define DEC_THREADS 128
#define DEC_WARPS (DEC_THREADS / 32)
#define DEC_TILE 64 // most positions per tile
#define DEC_PPL (DEC_TILE / 32)
#define DEC_MAX_HEAD_DIM 128
// DEC_STAGE is the 16-byte chunks of one stage: K, then V, of a tile of
// DEC_TILE positions whose padded rows are 9 chunks (head dim 64 of
// 16-bit elements).
#define DEC_STAGE (2 * DEC_TILE * 9)
// DEC_PAGES bounds the pages of one tile (pages of at least 8 slots).
#define DEC_PAGES (DEC_TILE / 8)
// DEC_MAX_Q bounds group * headDim: the group's queries in shared memory.
#define DEC_MAX_Q 2048
// DEC_HPW is the most query heads a warp takes: groups of up to 32.
#define DEC_HPW 8
// DEC_EPV is the elements of one 16-byte chunk.
#define DEC_EPV ((int)(16 / sizeof(elem_t)))

// dec_dot returns the dot product of the DEC_EPV floats in k with the
// DEC_EPV floats of q (16-byte aligned shared memory).
DEV float dec_dot(const float *k, const uint4 *q) {
	float s = 0.0f;
#pragma unroll
	for (int v = 0; v < DEC_EPV / 4; v++) {
		uint4 u = q[v];
		s += k[4 * v] * __uint_as_float(u.x) + k[4 * v + 1] * __uint_as_float(u.y) +
		     k[4 * v + 2] * __uint_as_float(u.z) + k[4 * v + 3] * __uint_as_float(u.w);
	}
	return s;
}

// dec_pages returns how many pages the tile of positions t.. (at most tp,
// none at or past p1) spans.
template <int BS> DEV int dec_pages(int t, int tp, int p1) { return t < p1 ? (min(t + tp, p1) - 1) / BS - t / BS + 1 : 0; }

// dec_issue starts the cp.async copies of the K and V rows of positions
// t..t+n (through the tile's page IDs pg) into stage st, and commits them
// as one group. It zeroes the V rows from n up to a multiple of 4, which
// the output loop reads four at a time (with weights of zero: a stale NaN
// there would still poison the sum).
template <int BS>
DEV void dec_issue(uint4 *st, const int *pg, const elem_t *kv, long long blockStride, long long layerOff, int kvDim,
		   int g, int headDim, int t, int n) {
	int cpr = headDim / DEC_EPV, rs = cpr + 1, first = t / BS;
	for (int c = threadIdx.x; c < n * cpr; c += DEC_THREADS) {
		int i = c / cpr, ch = c - i * cpr, pos = t + i;
		const elem_t *kp = kv + (long long)pg[pos / BS - first] * blockStride + layerOff +
				   (long long)(pos % BS) * kvDim + g * headDim + ch * DEC_EPV;
		uint4 *d = st + i * rs + ch;
		cp_async16((void *)d, kp); // void *: no lookup of the emulator's own by uint4's namespace
		cp_async16((void *)(d + DEC_STAGE / 2), kp + (long long)BS * kvDim);
	}
	cp_async_commit();
	for (int c = n * cpr + threadIdx.x; c < (n + 3) / 4 * 4 * cpr; c += DEC_THREADS) {
		int i = c / cpr;
		st[DEC_STAGE / 2 + i * rs + c - i * cpr] = make_uint4(0, 0, 0, 0);
	}
}

// dec_v reads the DPL elements at p (aligned to their size) into f.
template <int DPL> DEV void dec_v(const elem_t *p, float *f) {
#if defined(PREFIXD_KV_F32)
#pragma unroll
	for (int k = 0; k < DPL; k++) f[k] = p[k];
#else
	if (DPL == 1) {
		f[0] = to_f(p[0]);
		return;
	}
#pragma unroll
	for (int k = 0; k < DPL / 2; k++) { // two 16-bit elements a load
		unsigned u = ((const unsigned *)p)[k];
		f[2 * k] = to_f((elem_t)(u & 0xffffu));
		f[2 * k + 1] = to_f((elem_t)(u >> 16));
	}
#endif
}

// The weights of a tile (DEC_HPW * DEC_WARPS query heads, DEC_TILE
// positions) fit over a stage's K.
static_assert(DEC_HPW * DEC_WARPS * DEC_TILE * sizeof(float) <= DEC_STAGE / 2 * 16, "weights over K");

// dec_shared is attn_decode's shared memory, declared once per kernel
// (each instance of the body declaring its own would triple it).
struct dec_shared {
	uint4 kvs[2 * DEC_STAGE];   // two stages of K and V
	uint4 qs4[DEC_MAX_Q / 4];   // the group's queries, scaled
	int pages[2][DEC_PAGES];    // page IDs of the next two tiles
};

template <int BS, int DPL>
DEV void attn_decode_body(dec_shared &sh, elem_t *out, float *part, int *count, const float *q, int ldq, const elem_t *kv,
			  long long blockStride, long long layerOff, const int *row_pos, const int *row_bt, const int *bt,
			  int nHeads, int kvHeads, int headDim, int split) {
	uint4 *kvs = sh.kvs, *qs4 = sh.qs4;
	int(*pages)[DEC_PAGES] = sh.pages;
	float *qs = (float *)qs4;
	int s = blockIdx.x, g = blockIdx.y, r = blockIdx.z;
	int p0 = s * split, p1 = min(row_pos[r] + 1, p0 + split);
	if (p0 >= p1) return; // the row's context ends before this split
	int group = nHeads / kvHeads, kvDim = kvHeads * headDim;
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int cpr = headDim / DEC_EPV, rs = cpr + 1; // 16-byte chunks per row, and per shared row
	int tp = DEC_TILE;                          // positions per tile: 16 at least (rows of at most 33 chunks)
	while (2 * tp * rs > DEC_STAGE) tp >>= 1;
	// Lane owns dimensions lane*DPL.. (nd of them: DPL, or none past the
	// head); d0 is where it reads V, clamped into the row.
	int nd = min(DPL, max(0, headDim - lane * DPL)), d0 = min(lane * DPL, headDim - DPL);
	const int *tbl = bt + row_bt[r];
	float scale = rsqrtf((float)headDim);
	const float *qr = q + (long long)r * ldq + (long long)g * group * headDim;
	for (int i = threadIdx.x; i < group * headDim; i += DEC_THREADS) qs[i] = qr[i] * scale;
	for (int k = 0; k < 2; k++) {
		int t = p0 + k * tp;
		if (threadIdx.x < dec_pages<BS>(t, tp, p1)) pages[k][threadIdx.x] = tbl[t / BS + threadIdx.x];
	}
	__syncthreads();
	dec_issue<BS>(kvs, pages[0], kv, blockStride, layerOff, kvDim, g, headDim, p0, min(tp, p1 - p0));
	float m[DEC_HPW], l[DEC_HPW], acc[DEC_HPW][DPL];
#pragma unroll
	for (int j = 0; j < DEC_HPW; j++) {
		m[j] = -PREFIXD_INF;
		l[j] = 0.0f;
#pragma unroll
		for (int k = 0; k < DPL; k++) acc[j][k] = 0.0f;
	}
	for (int it = 0, t = p0; t < p1; it++, t += tp) {
		int n = min(tp, p1 - t); // positions of the tile in the split
		// Tile it+1 into the other stage (read by tile it-1, whose
		// readers passed the barrier that ended their iteration).
		int tn = t + tp;
		if (tn < p1)
			dec_issue<BS>(kvs + DEC_STAGE * ((it + 1) & 1), pages[(it + 1) & 1], kv, blockStride, layerOff, kvDim, g,
				      headDim, tn, min(tp, p1 - tn));
		else
			cp_async_commit(); // an empty group: wait<1> below still means this tile
		// The page IDs of tile it+2, in flight while this tile is computed.
		int t2 = t + 2 * tp, pid = 0;
		bool ld = threadIdx.x < dec_pages<BS>(t2, tp, p1);
		if (ld) pid = tbl[t2 / BS + threadIdx.x];
		cp_async_wait<1>();
		__syncthreads();
		const uint4 *ks = kvs + DEC_STAGE * (it & 1), *vs = ks + DEC_STAGE / 2;
		float sc[DEC_HPW][DEC_PPL];
#pragma unroll
		for (int j = 0; j < DEC_HPW; j++)
#pragma unroll
			for (int u = 0; u < DEC_PPL; u++) sc[j][u] = 0.0f;
		for (int ch = 0; ch < cpr; ch++) {
#pragma unroll
			for (int u = 0; u < DEC_PPL; u++) {
				int p = lane + 32 * u;
				if (p >= n) break;
				uint4 kc = ks[p * rs + ch];
				const elem_t *ke = (const elem_t *)&kc;
				float kf[DEC_EPV];
#pragma unroll
				for (int e = 0; e < DEC_EPV; e++) kf[e] = to_f(ke[e]);
#pragma unroll
				for (int j = 0; j < DEC_HPW; j++) {
					int hh = warp + j * DEC_WARPS; // the same for the whole warp
					if (hh >= group) break;
					sc[j][u] += dec_dot(kf, qs4 + (hh * headDim + ch * DEC_EPV) / 4);
				}
			}
		}
		// The weights go to shared memory over this stage's K, which every
		// warp has finished reading: ws[hh][p] for query head hh of the
		// group, zero past the tile's end.
		__syncthreads();
		float *ws = (float *)ks;
#pragma unroll
		for (int j = 0; j < DEC_HPW; j++) {
			int hh = warp + j * DEC_WARPS;
			if (hh >= group) break;
			float mx = -PREFIXD_INF;
#pragma unroll
			for (int u = 0; u < DEC_PPL; u++)
				if (lane + 32 * u < n) mx = fmaxf(mx, sc[j][u]);
			for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
			float mn = fmaxf(m[j], mx); // finite: the tile has a position
			float corr = expf(m[j] - mn), sum = 0.0f;
#pragma unroll
			for (int u = 0; u < DEC_PPL; u++) {
				float e = lane + 32 * u < n ? expf(sc[j][u] - mn) : 0.0f;
				sum += e;
				ws[hh * DEC_TILE + lane + 32 * u] = e;
			}
			l[j] = l[j] * corr + sum; // this lane's share: the warp's sum is taken at the end
			m[j] = mn;
#pragma unroll
			for (int k = 0; k < DPL; k++) acc[j][k] *= corr;
		}
		__syncwarp(); // a warp reads only the weights its own lanes wrote
		// Four positions at a time: V read and converted once for all
		// the warp's heads, each head's four weights in one 16-byte read.
		const elem_t *vb = (const elem_t *)vs + d0;
		for (int p = 0; p < n; p += 4) {
			float vf[4][DPL];
#pragma unroll
			for (int i = 0; i < 4; i++) dec_v<DPL>(vb + (p + i) * rs * DEC_EPV, vf[i]);
#pragma unroll
			for (int j = 0; j < DEC_HPW; j++) {
				int hh = warp + j * DEC_WARPS;
				if (hh >= group) break;
				uint4 wq = *(const uint4 *)(ws + hh * DEC_TILE + p);
				float w4[4] = {__uint_as_float(wq.x), __uint_as_float(wq.y), __uint_as_float(wq.z),
					       __uint_as_float(wq.w)};
#pragma unroll
				for (int i = 0; i < 4; i++)
#pragma unroll
					for (int k = 0; k < DPL; k++) acc[j][k] += w4[i] * vf[i][k];
			}
		}
		if (ld) pages[it & 1][threadIdx.x] = pid; // tile it+2's: tile it's were read when it was issued
		__syncthreads(); // this stage and these page IDs are free to reuse
	}
#pragma unroll
	for (int j = 0; j < DEC_HPW; j++) {
		int hh = warp + j * DEC_WARPS;
		if (hh >= group) break;
		int h = g * group + hh;
		l[j] = warp_sum(l[j]);
		if (gridDim.x == 1) {
			elem_t *o = out + ((long long)r * nHeads + h) * headDim + lane * DPL;
#pragma unroll
			for (int k = 0; k < DPL; k++)
				if (k < nd) o[k] = from_f(acc[j][k] / l[j]);
			continue;
		}
		float *pp = part + (((long long)r * nHeads + h) * gridDim.x + s) * (headDim + 2);
		if (lane == 0) pp[0] = m[j], pp[1] = l[j];
#pragma unroll
		for (int k = 0; k < DPL; k++)
			if (k < nd) pp[2 + lane * DPL + k] = acc[j][k];
	}
	if (gridDim.x > 1) split_merge(out, part, count, row_pos, r, g, group, nHeads, headDim, split);
}

// attn_decode picks the body for headDim's dimensions per lane.
template <int BS>
DEV void attn_decode(elem_t *out, float *part, int *count, const float *q, int ldq, const elem_t *kv, long long blockStride,
		     long long layerOff, const int *row_pos, const int *row_bt, const int *bt, int nHeads, int kvHeads,
		     int headDim, int split) {
	__shared__ dec_shared sh;
	if (headDim <= 32)
		attn_decode_body<BS, 1>(sh, out, part, count, q, ldq, kv, blockStride, layerOff, row_pos, row_bt, bt, nHeads, kvHeads,
					headDim, split);
	else if (headDim <= 64)
		attn_decode_body<BS, 2>(sh, out, part, count, q, ldq, kv, blockStride, layerOff, row_pos, row_bt, bt, nHeads, kvHeads,
					headDim, split);
	else
		attn_decode_body<BS, 4>(sh, out, part, count, q, ldq, kv, blockStride, layerOff, row_pos, row_bt, bt, nHeads, kvHeads,
					headDim, split);
}

// attn_decode8, attn_decode16 and attn_decode32 are attn_decode for pages
// of 8, 16 and 32 slots. Grid: (splits, KV heads, rows).
#define ATTN_DECODE_PARAMS                                                                                   \
	elem_t *out, float *part, int *count, const float *q, int ldq, const elem_t *kv, long long blockStride,          \
		long long layerOff, const int *row_pos, const int *row_bt, const int *bt, int nHeads, int kvHeads, \
		int headDim, int split
#define ATTN_DECODE_ARGS out, part, count, q, ldq, kv, blockStride, layerOff, row_pos, row_bt, bt, nHeads, kvHeads, headDim, split

KERNEL void __launch_bounds__(128, 4) attn_decode8(ATTN_DECODE_PARAMS) { attn_decode<8>(ATTN_DECODE_ARGS); }
KERNEL void __launch_bounds__(128, 4) attn_decode16(ATTN_DECODE_PARAMS) { attn_decode<16>(ATTN_DECODE_ARGS); }
KERNEL void __launch_bounds__(128, 4) attn_decode32(ATTN_DECODE_PARAMS) { attn_decode<32>(ATTN_DECODE_ARGS); }
