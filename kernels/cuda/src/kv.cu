// kv.cu: K/V blocks. The pool is one allocation of elem_t laid out
// [block][layer][K,V][slot][kvHead][headDim], so that one block's bytes
// are contiguous (a host-tier read or write is one copy) and one layer's K
// (or V) of a block is bs*kvDim contiguous elements.
//
// A step's rows are described by device arrays uploaded once per step:
// row_pos[r], the position of row r in its sequence, and row_bt[r], the
// offset in bt (all block tables, one after another) of its sequence's
// table.

// kv_slot returns the offset of position pos's slot in layer layerOff's K.
DEV long long kv_slot(const int *bt, int pos, int bs, int kvDim, long long blockStride, long long layerOff) {
	return (long long)bt[pos / bs] * blockStride + layerOff + (long long)(pos % bs) * kvDim;
}

// kv_append stores each row's K and V, read as floats from k and v (row
// stride ld each: two buffers, or two column ranges of one fused QKV
// product), in its slot: the block of its table that holds row_pos[r]. One
// thread block per row.
KERNEL void __launch_bounds__(256) kv_append(elem_t *kv, long long blockStride, long long layerOff, const float *k_in,
					     const float *v_in, int ld, const int *row_pos, const int *row_bt, const int *bt, int bs, int kvDim) {
	int r = blockIdx.x;
	long long k = kv_slot(bt + row_bt[r], row_pos[r], bs, kvDim, blockStride, layerOff);
	long long v = k + (long long)bs * kvDim;
	const float *ks = k_in + (long long)r * ld, *vs = v_in + (long long)r * ld;
	for (int d = threadIdx.x; d < kvDim; d += blockDim.x) {
		kv[k + d] = from_f(ks[d]);
		kv[v + d] = from_f(vs[d]);
	}
}

// copy_blocks performs copies: copies[3c..3c+2] = (src, dst, slots) takes
// the first slots slots of block src's K and V in every layer to block dst.
// Grid: (copies, 2*layers); no block may be both a source and a destination.
KERNEL void __launch_bounds__(256) copy_blocks(elem_t *kv, const int *copies, int layers, int bs, int kvDim) {
	const int *c = copies + 3 * blockIdx.x;
	long long blockStride = (long long)layers * 2 * bs * kvDim;
	long long off = (long long)blockIdx.y * bs * kvDim;
	const elem_t *src = kv + c[0] * blockStride + off;
	elem_t *dst = kv + c[1] * blockStride + off;
	long long n = (long long)c[2] * kvDim;
	for (long long i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

// rope_cs rotates heads heads of headDim read from src into dst (which
// may be src: each thread reads its pair before writing it) by the
// angles c, [headDim/2][cos, sin]: pair i of a head is (x[i*step],
// x[i*step+mate]). With w (not null) each value is first normalised as
// RMSNorm does, x * scale[head] * w[offset in the head]. The block's
// threads share the pairs.
template <typename T>
DEV void rope_cs(T *dst, const float *src, const float *c, int heads, int headDim, int step, int mate, const float *w,
		 const float *scale) {
	int half = headDim / 2;
	for (int p = threadIdx.x; p < heads * half; p += blockDim.x) {
		int h = p / half, i = p - h * half;
		float co = c[2 * i], si = c[2 * i + 1];
		int j = h * headDim + i * step;
		float x0 = src[j], x1 = src[j + mate];
		if (w) {
			x0 = x0 * scale[h] * w[i * step];
			x1 = x1 * scale[h] * w[i * step + mate];
		}
		store(&dst[j], x0 * co - x1 * si);
		store(&dst[j + mate], x0 * si + x1 * co);
	}
}

// ROPE_NORM_HEADS bounds the query and key heads of a row whose heads
// rope_kv_append normalises: one scale each in shared memory.
#define ROPE_NORM_HEADS 256

// rope_kv_append is RoPE of q and k and kv_append in one launch, one
// thread block per row: it writes row r's nHeads query heads of q (row
// stride ldq) rotated by position row_pos[r] into q_out (rows of
// nHeads*headDim; it may be q when ldq is that), and stores its kvHeads
// key heads of k rotated, and its value heads of v (k and v: row stride
// ldkv), in the row's slot. q, k and v may be the column ranges of one
// fused QKV product. With qn and kn (not null: the per-head q and k
// norms' weights, headDim floats each) every query and key head is first
// normalised as rmsnorm_f32 does a row (a warp a head sums its squares),
// so a model with q/k norms needs no launch of its own for them. The
// angles come from cs, float [positions][headDim/2][cos, sin] computed
// once on the host in double precision (launch.RoPETable), so no thread
// does trigonometry. Pair i of a head is (x[2i], x[2i+1]) for adjacent
// pairs, (x[i], x[i+headDim/2]) for halves.
KERNEL void __launch_bounds__(256) rope_kv_append(float *q_out, const float *q, int ldq, const float *k_in,
						  const float *v_in, int ldkv, const float *cs, elem_t *kv,
						  long long blockStride, long long layerOff, const int *row_pos,
						  const int *row_bt, const int *bt, int bs, int nHeads, int kvHeads,
						  int headDim, int halves, const float *qn, const float *kn, float eps) {
	__shared__ float scale[ROPE_NORM_HEADS]; // the query heads', then the key heads'
	int r = blockIdx.x, pos = row_pos[r], kvDim = kvHeads * headDim;
	int step = halves ? 1 : 2, mate = halves ? headDim / 2 : 1;
	const float *qr = q + (long long)r * ldq, *kr = k_in + (long long)r * ldkv;
	if (qn) {
		int lane = threadIdx.x & 31;
		for (int h = threadIdx.x >> 5; h < nHeads + kvHeads; h += blockDim.x >> 5) {
			const float *x = h < nHeads ? qr + h * headDim : kr + (h - nHeads) * headDim;
			float ss = 0.0f;
			for (int d = lane; d < headDim; d += 32) ss += x[d] * x[d];
			ss = warp_sum(ss);
			if (lane == 0) scale[h] = rsqrtf(ss / (float)headDim + eps);
		}
		__syncthreads();
	}
	const float *c = cs + (long long)pos * headDim;
	rope_cs(q_out + (long long)r * nHeads * headDim, qr, c, nHeads, headDim, step, mate, qn, scale);
	long long ks = kv_slot(bt + row_bt[r], pos, bs, kvDim, blockStride, layerOff);
	rope_cs(kv + ks, kr, c, kvHeads, headDim, step, mate, kn, scale + nHeads);
	const float *vr = v_in + (long long)r * ldkv;
	for (int d = threadIdx.x; d < kvDim; d += blockDim.x) kv[ks + (long long)bs * kvDim + d] = from_f(vr[d]);
}
