// decode_tc.cu: paged attention for decode on tensor cores, a variant of
// attn_decode (decode.cu) with the same launch contract: grid (splits, KV
// heads, rows), DT_THREADS threads holding the KV head's whole group,
// attn's partial layout where there are several splits, the page size a
// template parameter (attn_decode_tc8, 16 and 32). Heads of 64 or 128 and
// groups of up to 16 only (launch.TensorCoreDecode). It is built for
// 16-bit pools; on an f32 pool (the tests' thread schedules run there) it
// rounds K/V to bf16 on the way in, as attn_prefill does.
//
// Why: attn_decode does a group's Q·Kᵀ and P·V as fp32 FMAs on the CUDA
// cores and is issue-bound (Nsight on an H100, 64 x 1,024 tokens,
// TinyLlama's group of 8 heads of 64: 0.57 instructions issued a
// scheduler a clock, 36% of a copy's bandwidth). Here both products are
// mma.sync.m16n8k16 (bf16/f16 in, fp32 accumulators): the group's query
// heads (up to 16, zero-padded) are the MMA's 16 rows, rounded to the
// element type (scaled by log2(e)/sqrt(headDim)) as attn_prefill rounds
// them, and the weights P are rounded the same way before P·V.
//
// Tiles of 64 positions (32 for heads of 128, so a stage of K and V stays
// 18 KB) come by cp.async into two stages, the next tile in flight
// while this one is computed, page IDs read a tile ahead as attn_decode
// reads them. A tile is cut into slices of 16 positions: warp w takes
// slice w % NS (NS = tile / 16: 4, or 2 for heads of 128) and output
// dimensions 64·(w / NS) .. +64, so every warp holds 8 n-tiles of O (32
// floats) whatever the head. (With heads of 128 two warps compute the same
// slice's scores, 16 MMAs that cost less than an idle warp would.) Each
// warp keeps its own running max and sum over its slices of every tile of
// the split (flash-decoding); at the end the warps merge (max, sum,
// output) through shared memory, over the stages, which are free by then.
//
// Issue estimate (group 8, head 64, bf16; a tile is 64 positions, 16 KB
// of K and V; counted from the code, not measured). Per warp and tile (its
// 16-position slice): Q's 4 ldmatrix.x4, K's 8 ldmatrix.x2 and 8 MMAs; the
// softmax of 8 scores a lane with the quad shuffles, exp2s and rescaling
// O's 32 accumulators (~100); packing P (~16); V's 8 ldmatrix.x2.trans
// and 8 MMAs; its 8 cp.async of the next tile with their addressing
// (~80): ~300 warp instructions, ~1,200 a tile for the block, where
// attn_decode counts ~1,100 a warp, ~4,400 a tile. At 4 instructions a
// clock an SM (1.75 GHz) that is an issue limit of ~12 TB/s, against
// attn_decode's ~3.4: at 80% of the H100's measured copy (2.24 TB/s of
// 2.8) the schedulers would be ~18% busy, or ~35% if the real count is
// twice the estimate as it was for attn_decode (Nsight: 0.57 issued a
// scheduler at 1.0 TB/s where ~0.3 was counted). The MMAs: 16 per warp
// and tile is under 1% of the tensor cores' rate (half the rows are
// padding at group 8): they are there to take the FMAs off the issue
// slots. Memory: 80% of the copy is ~17 GB/s an SM, ~17 KB in flight at
// ~1 us of latency; a block keeps up to one 16-18 KB tile in flight while
// it computes the other, and 5 blocks fit an SM: 41 KB of shared memory
// each (two stages, Q, page IDs), and 92-93 registers (no spills; no
// per-lane score array over 8 heads, 32 accumulators) within the 102 of
// __launch_bounds__(128, 5). The barriers stay two a tile as in
// attn_decode; 20 warps an SM (5 a scheduler, not 4 a scheduler at 124
// registers) are what hides them. At TinyLlama's shape the automatic split
// gives 1,024 blocks: 1.55 waves of 660 (attn_decode: 1.94 of 528).

#define DT_THREADS 128
#define DT_WARPS (DT_THREADS / 32)
#define DT_SLICE 16 // positions per warp slice: one k-step of P·V
#define DT_OD 64    // output dimensions per warp: 8 n-tiles
// DT_STAGE is the 16-bit elements of one stage: K then V of 64 positions
// of 64 (or 32 of 128) elements, each row padded by PF_PAD.
#define DT_STAGE (2 * 64 * (64 + PF_PAD))
#define DT_PAGES (64 / 8) // pages of one tile (pages of at least 8 slots)

// dt_shared is attn_decode_tc's shared memory, declared once per kernel.
struct dt_shared {
	__align__(16) tc_t kvs[2 * DT_STAGE];        // two stages; the warps' merge at the end
	__align__(16) tc_t qs[16 * (128 + PF_PAD)]; // the group's queries: the MMA's A rows
	int pages[2][DT_PAGES];                      // page IDs of the next two tiles
};

// The merge's (max, sum, output) of each warp fit over the stages.
static_assert(DT_WARPS * 16 * (2 + DT_OD) * sizeof(float) <= 2 * DT_STAGE * sizeof(tc_t), "merge over stages");

// dt_issue starts the copies of the K and V rows of positions t..t+n
// (through the tile's page IDs pg) into stage st, commits them as one
// group, and zeroes the V rows from n to the end of the last slice, which
// P·V reads with weights of zero (a stale NaN there would still poison
// the sum).
template <int BS, int HD>
DEV void dt_issue(tc_t *st, const int *pg, const elem_t *kv, long long blockStride, long long layerOff, int kvDim,
		  int g, int t, int n) {
	const int RS = HD + PF_PAD, CPR = HD / 8, TILE = DT_STAGE / 2;
	int first = t / BS;
	for (int c = threadIdx.x; c < n * CPR; c += DT_THREADS) {
		int i = c / CPR, ch = c - i * CPR, pos = t + i;
		const elem_t *kp = kv + (long long)pg[pos / BS - first] * blockStride + layerOff +
				   (long long)(pos % BS) * kvDim + g * HD + ch * 8;
		pf_copy8(st + i * RS + ch * 8, kp);
		pf_copy8(st + TILE + i * RS + ch * 8, kp + (long long)BS * kvDim);
	}
	cp_async_commit();
	for (int c = n * CPR + threadIdx.x; c < (n + DT_SLICE - 1) / DT_SLICE * DT_SLICE * CPR; c += DT_THREADS) {
		int i = c / CPR;
		*(uint4 *)(st + TILE + i * RS + (c - i * CPR) * 8) = make_uint4(0, 0, 0, 0);
	}
}

template <int BS, int HD>
DEV void attn_decode_tc_body(dt_shared &sh, elem_t *out, float *part, int *count, const float *q, int ldq, const elem_t *kv,
			     long long blockStride, long long layerOff, const int *row_pos, const int *row_bt,
			     const int *bt, int nHeads, int kvHeads, int split) {
	const int RS = HD + PF_PAD, KS = HD / 16, TP = HD == 128 ? 32 : 64, NS = TP / DT_SLICE, TILE = DT_STAGE / 2;
	int s = blockIdx.x, g = blockIdx.y, r = blockIdx.z;
	int p0 = s * split, p1 = min(row_pos[r] + 1, p0 + split);
	if (p0 >= p1) return; // the row's context ends before this split
	int group = nHeads / kvHeads, kvDim = kvHeads * HD;
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int slice = warp % NS, od = DT_OD * (warp / NS); // this warp's positions in a tile, and output dimensions
	const int *tbl = bt + row_bt[r];
	float scale = rsqrtf((float)HD) * 1.4426950408889634f;
	const float *qr = q + (long long)r * ldq + (long long)g * group * HD;
	for (int i = threadIdx.x; i < 16 * HD; i += DT_THREADS) {
		int m = i / HD, d = i - m * HD;
		sh.qs[m * RS + d] = to_tc(m < group ? qr[i] * scale : 0.0f);
	}
	for (int k = 0; k < 2; k++) {
		int t = p0 + k * TP;
		if (threadIdx.x < dec_pages<BS>(t, TP, p1)) sh.pages[k][threadIdx.x] = tbl[t / BS + threadIdx.x];
	}
	__syncthreads();
	dt_issue<BS, HD>(sh.kvs, sh.pages[0], kv, blockStride, layerOff, kvDim, g, p0, min(TP, p1 - p0));
	// This lane's rows of the accumulators: query heads lane/4 and lane/4 + 8.
	float o[DT_OD / 8][4], mx[2] = {-PREFIXD_INF, -PREFIXD_INF}, sum[2] = {0.0f, 0.0f};
#pragma unroll
	for (int j = 0; j < DT_OD / 8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
	for (int it = 0, t = p0; t < p1; it++, t += TP) {
		int n = min(TP, p1 - t), tn = t + TP;
		if (tn < p1)
			dt_issue<BS, HD>(sh.kvs + DT_STAGE * ((it + 1) & 1), sh.pages[(it + 1) & 1], kv, blockStride, layerOff,
					 kvDim, g, tn, min(TP, p1 - tn));
		else
			cp_async_commit(); // an empty group: wait<1> below still means this tile
		int t2 = t + 2 * TP, pid = 0;
		bool ld = threadIdx.x < dec_pages<BS>(t2, TP, p1);
		if (ld) pid = tbl[t2 / BS + threadIdx.x];
		cp_async_wait<1>();
		__syncthreads();
		int base = slice * DT_SLICE; // the slice's first position in the tile
		if (base < n) {              // the same for the whole warp
			const tc_t *ks = sh.kvs + DT_STAGE * (it & 1) + base * RS, *vs = ks + TILE;
			float sc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
			for (int k = 0; k < KS; k++) {
				unsigned a[4];
				ldmatrix_x4(a, sh.qs + ((lane & 7) + 8 * ((lane >> 3) & 1)) * RS + 16 * k + 8 * (lane >> 4));
#pragma unroll
				for (int j = 0; j < 2; j++) {
					unsigned b[2];
					ldmatrix_x2(b, ks + (8 * j + (lane & 7)) * RS + 16 * k + 8 * ((lane >> 3) & 1), false);
					mma_16816(sc[j], a, b, PF_F16);
				}
			}
#pragma unroll
			for (int j = 0; j < 2; j++)
#pragma unroll
				for (int e = 0; e < 2; e++)
					if (base + 8 * j + 2 * (lane & 3) + e >= n) sc[j][e] = sc[j][2 + e] = -PREFIXD_INF;
			// The slice's first position is in the tile, so each row's
			// maximum is finite.
			pf_softmax<2, DT_OD / 8>(sc, o, mx, sum);
			unsigned pa[4] = {pf_pack(sc[0][0], sc[0][1]), pf_pack(sc[0][2], sc[0][3]), pf_pack(sc[1][0], sc[1][1]),
					  pf_pack(sc[1][2], sc[1][3])};
#pragma unroll
			for (int j = 0; j < DT_OD / 8; j++) {
				unsigned b[2];
				ldmatrix_x2(b, vs + ((lane & 7) + 8 * ((lane >> 3) & 1)) * RS + od + 8 * j, true);
				mma_16816(o[j], pa, b, PF_F16);
			}
		}
		if (ld) sh.pages[it & 1][threadIdx.x] = pid; // tile it+2's: tile it's were read when it was issued
		__syncthreads(); // this stage and these page IDs are free to reuse
	}
	// The merge: each warp's (max, sum, output) rows over the stages (no
	// copy is in flight: the last groups committed were empty).
	float *ms = (float *)sh.kvs, *ls = ms + DT_WARPS * 16, *os = ls + DT_WARPS * 16;
#pragma unroll
	for (int h = 0; h < 2; h++) {
		int row = lane / 4 + 8 * h;
		float l = sum[h];
		l += __shfl_xor_sync(0xffffffffu, l, 1);
		l += __shfl_xor_sync(0xffffffffu, l, 2);
		if ((lane & 3) == 0) ms[warp * 16 + row] = mx[h], ls[warp * 16 + row] = l;
#pragma unroll
		for (int j = 0; j < DT_OD / 8; j++) {
			float *op = os + (warp * 16 + row) * DT_OD + 8 * j + 2 * (lane & 3);
			op[0] = o[j][2 * h];
			op[1] = o[j][2 * h + 1];
		}
	}
	__syncthreads();
	// Head hh's dimension d: the NS warps of d's half, one per slice. The
	// warp of slice 0 saw position p0, so M is finite; a warp that saw no
	// position has max -inf and weighs zero.
	for (int i = threadIdx.x; i < group * HD; i += DT_THREADS) {
		int hh = i / HD, d = i - hh * HD, w0 = d / DT_OD * NS, dd = d % DT_OD;
		float m = -PREFIXD_INF, l = 0.0f, a = 0.0f;
		for (int w = w0; w < w0 + NS; w++) m = fmaxf(m, ms[w * 16 + hh]);
		for (int w = w0; w < w0 + NS; w++) {
			float c = exp2f(ms[w * 16 + hh] - m);
			l += ls[w * 16 + hh] * c;
			a += os[(w * 16 + hh) * DT_OD + dd] * c;
		}
		int h = g * group + hh;
		if (gridDim.x == 1) {
			out[((long long)r * nHeads + h) * HD + d] = from_f(a / l);
			continue;
		}
		float *pp = part + (((long long)r * nHeads + h) * gridDim.x + s) * (HD + 2);
		if (d == 0) pp[0] = m * 0.6931471805599453f, pp[1] = l; // split_merge's max is in natural-log units
		pp[2 + d] = a;
	}
	if (gridDim.x > 1) split_merge(out, part, count, row_pos, r, g, group, nHeads, HD, split);
}

// attn_decode_tc picks the body for the head size, 64 or 128 (launch
// checks it).
template <int BS>
DEV void attn_decode_tc(elem_t *out, float *part, int *count, const float *q, int ldq, const elem_t *kv, long long blockStride,
			long long layerOff, const int *row_pos, const int *row_bt, const int *bt, int nHeads, int kvHeads,
			int headDim, int split) {
	__shared__ dt_shared sh;
	if (headDim == 64)
		attn_decode_tc_body<BS, 64>(sh, out, part, count, q, ldq, kv, blockStride, layerOff, row_pos, row_bt, bt, nHeads,
					    kvHeads, split);
	else
		attn_decode_tc_body<BS, 128>(sh, out, part, count, q, ldq, kv, blockStride, layerOff, row_pos, row_bt, bt, nHeads,
					     kvHeads, split);
}

// attn_decode_tc8, attn_decode_tc16 and attn_decode_tc32 are
// attn_decode_tc for pages of 8, 16 and 32 slots, with attn_decode's
// parameters. Grid: (splits, KV heads, rows).
KERNEL void __launch_bounds__(128, 5) attn_decode_tc8(ATTN_DECODE_PARAMS) { attn_decode_tc<8>(ATTN_DECODE_ARGS); }
KERNEL void __launch_bounds__(128, 5) attn_decode_tc16(ATTN_DECODE_PARAMS) { attn_decode_tc<16>(ATTN_DECODE_ARGS); }
KERNEL void __launch_bounds__(128, 5) attn_decode_tc32(ATTN_DECODE_PARAMS) { attn_decode_tc<32>(ATTN_DECODE_ARGS); }
