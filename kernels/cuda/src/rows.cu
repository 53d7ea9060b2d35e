// rows.cu: the row operations of a Llama block. Rows are tokens of the
// step's batch; a kernel runs one thread block per row unless it says
// otherwise.

// embed sets out[r] = table[tok[r]] for each row: out is float [rows][dim],
// table elem_t [vocab][dim]. Token IDs are checked by the caller.
KERNEL void __launch_bounds__(256) embed(float *out, const elem_t *table, const int *tok, int dim) {
	int r = blockIdx.x;
	const elem_t *row = table + (long long)tok[r] * dim;
	for (int d = threadIdx.x; d < dim; d += blockDim.x) out[(long long)r * dim + d] = to_f(row[d]);
}

// rmsnorm_row sets out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w for row
// r = blockIdx.x: x float [rows][dim], w float [dim]. out may be x: each
// thread writes only the elements it read. Where the row and w allow it
// (dim a multiple of 4, 16-byte aligned) each thread reads four floats a
// load: a decode step's 64 rows of 2,048 are 64 blocks, too few to hide
// the latency of eight dependent 4-byte loads a thread, two of 16 bytes
// issued together are not.
template <typename T> DEV void rmsnorm_row(T *out, const float *x, const float *w, int dim, float eps) {
	__shared__ float sh[32];
	const float *xr = x + (long long)blockIdx.x * dim;
	T *o = out + (long long)blockIdx.x * dim;
	float ss = 0.0f;
	if ((dim & 3) == 0 && (((unsigned long long)xr | (unsigned long long)w) & 15) == 0) {
		const uint4 *x4 = (const uint4 *)xr, *w4 = (const uint4 *)w;
#pragma unroll 4
		for (int c = threadIdx.x; c < dim / 4; c += blockDim.x) {
			uint4 v = x4[c];
			float a = __uint_as_float(v.x), b = __uint_as_float(v.y), e = __uint_as_float(v.z),
			      f = __uint_as_float(v.w);
			ss += a * a + b * b + e * e + f * f;
		}
		ss = block_sum(ss, sh);
		float scale = rsqrtf(ss / (float)dim + eps);
#pragma unroll 4
		for (int c = threadIdx.x; c < dim / 4; c += blockDim.x) {
			uint4 v = x4[c], g = w4[c];
			store(&o[4 * c], __uint_as_float(v.x) * scale * __uint_as_float(g.x));
			store(&o[4 * c + 1], __uint_as_float(v.y) * scale * __uint_as_float(g.y));
			store(&o[4 * c + 2], __uint_as_float(v.z) * scale * __uint_as_float(g.z));
			store(&o[4 * c + 3], __uint_as_float(v.w) * scale * __uint_as_float(g.w));
		}
		return;
	}
	for (int d = threadIdx.x; d < dim; d += blockDim.x) ss += xr[d] * xr[d];
	ss = block_sum(ss, sh);
	float scale = rsqrtf(ss / (float)dim + eps);
	for (int d = threadIdx.x; d < dim; d += blockDim.x) store(&o[d], xr[d] * scale * w[d]);
}

// rmsnorm normalises each row into out, elem_t [rows][dim]: the next
// matrix product's input.
KERNEL void __launch_bounds__(256) rmsnorm(elem_t *out, const float *x, const float *w, int dim, float eps) {
	rmsnorm_row(out, x, w, dim, eps);
}

// rmsnorm_f32 normalises each row into out, float [rows][dim]: the q/k
// norm of each head (a row per head), which RoPE then rotates.
KERNEL void __launch_bounds__(256) rmsnorm_f32(float *out, const float *x, const float *w, int dim, float eps) {
	rmsnorm_row(out, x, w, dim, eps);
}

// rope_sincos gives the rotation of pair i (0-based, of headDim/2) at pos:
// pos * theta^(-2i/headDim) / factors[i] (factors, Llama 3's rope scaling,
// may be null: all 1), in double so that long positions keep their
// precision (float would lose it past a few thousand radians).
DEV void rope_sincos(int pos, int i, int headDim, float theta, const float *factors, float *s, float *c) {
	double freq = pow((double)theta, -2.0 * (double)i / (double)headDim);
	if (factors) freq /= (double)factors[i];
	double a = (double)pos * freq;
	double sd, cd;
	sincos(a, &sd, &cd);
	*s = (float)sd;
	*c = (float)cd;
}

// rope rotates heads heads of headDim in row blockIdx.x of x (row stride
// ld floats) by position pos[blockIdx.x]: pair i is (x[i*step],
// x[i*step+mate]) of each head.
DEV void rope(float *x, int ld, const int *pos, int heads, int headDim, float theta, const float *factors, int step,
	      int mate) {
	int half = headDim / 2;
	float *xr = x + (long long)blockIdx.x * ld;
	for (int p = threadIdx.x; p < heads * half; p += blockDim.x) {
		int h = p / half, i = p % half;
		float s, c;
		rope_sincos(pos[blockIdx.x], i, headDim, theta, factors, &s, &c);
		float *e = xr + h * headDim + i * step;
		float x0 = e[0], x1 = e[mate];
		e[0] = x0 * c - x1 * s;
		e[mate] = x0 * s + x1 * c;
	}
}

// rope_gguf rotates in the adjacent-pair layout of llama2.c and GGUF: pair
// i is (x[2i], x[2i+1]). With q and k side by side in a fused QKV row, one
// launch over nHeads+kvHeads heads rotates both.
KERNEL void __launch_bounds__(256) rope_gguf(float *x, int ld, const int *pos, int heads, int headDim, float theta,
					     const float *factors) {
	rope(x, ld, pos, heads, headDim, theta, factors, 2, 1);
}

// rope_halves rotates in the Hugging Face layout (rotate_half): pair i is
// (x[i], x[i+headDim/2]).
KERNEL void __launch_bounds__(256) rope_halves(float *x, int ld, const int *pos, int heads, int headDim, float theta,
					       const float *factors) {
	rope(x, ld, pos, heads, headDim, theta, factors, 1, headDim / 2);
}

// swiglu sets out[r][i] = silu(gate[r][i]) * up[r][i] for i < hidden:
// gate and up are float with row stride ld (they may be the two halves of
// one fused matrix product), out is elem_t [rows][hidden]. Grid: (x blocks
// covering hidden, rows).
KERNEL void __launch_bounds__(256) swiglu(elem_t *out, const float *gate, const float *up, int ld, int hidden) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= hidden) return;
	long long r = blockIdx.y;
	float g = gate[r * ld + i];
	out[r * hidden + i] = from_f(g / (1.0f + expf(-g)) * up[r * ld + i]);
}

// add sets x[i] += y[i] for i < n (the residual connection). Grid-stride.
KERNEL void __launch_bounds__(256) add(float *x, const float *y, long long n) {
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		x[i] += y[i];
}

// add_bias sets x[r] += bias for each row: x float [rows][dim], bias
// float [dim] (the q/k/v biases of Qwen2).
KERNEL void __launch_bounds__(256) add_bias(float *x, const float *bias, int dim) {
	float *xr = x + (long long)blockIdx.x * dim;
	for (int d = threadIdx.x; d < dim; d += blockDim.x) xr[d] += bias[d];
}

// gather_rows sets out[r] = x[idx[r]]: the rows whose logits are wanted.
KERNEL void __launch_bounds__(256) gather_rows(float *out, const float *x, const int *idx, int dim) {
	const float *src = x + (long long)idx[blockIdx.x] * dim;
	float *dst = out + (long long)blockIdx.x * dim;
	for (int d = threadIdx.x; d < dim; d += blockDim.x) dst[d] = src[d];
}

// argmax_better says whether (v, i) beats (bv, bi): larger, or equal and
// earlier. NaN never wins, as in sample.Argmax.
DEV bool argmax_better(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }

// block_argmax returns, to every thread, the index of the largest of
// xr[0..n), the lowest on ties, 0 if every value is NaN (sample.Argmax's
// rule), through sv and si (32 each of shared memory).
DEV int block_argmax(const float *xr, int n, float *sv, int *si) {
	float bv = -PREFIXD_INF;
	int bi = 0x7fffffff;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		if (argmax_better(xr[i], i, bv, bi)) bv = xr[i], bi = i;
	for (int o = 16; o > 0; o >>= 1) {
		float v = __shfl_xor_sync(0xffffffffu, bv, o);
		int i = __shfl_xor_sync(0xffffffffu, bi, o);
		if (argmax_better(v, i, bv, bi)) bv = v, bi = i;
	}
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	if (lane == 0) sv[w] = bv, si[w] = bi;
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int k = 1; k < (int)(blockDim.x >> 5); k++)
			if (argmax_better(sv[k], si[k], bv, bi)) bv = sv[k], bi = si[k];
		si[0] = bi == 0x7fffffff ? 0 : bi;
	}
	__syncthreads();
	bi = si[0];
	__syncthreads(); // nobody overwrites si before every thread has read it
	return bi;
}

// block_finite says, to every thread, whether xr[0..n) holds neither NaN
// nor an infinity, through sh (32 floats of shared memory).
DEV bool block_finite(const float *xr, int n, float *sh) {
	float bad = 0.0f;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		if ((__float_as_uint(xr[i]) & 0x7f800000u) == 0x7f800000u) bad = 1.0f;
	return block_sum(bad, sh) == 0.0f;
}

// argmax sets out[r] to the index of row r's largest value of n, the
// lowest on ties (sample.Argmax's rule), or -1 if the row holds NaN or an
// infinity (sample.CheckFinite's): the engine fails such a row as the CPU
// path does.
KERNEL void __launch_bounds__(256) argmax(int *out, const float *x, int n) {
	__shared__ float sv[32];
	__shared__ int si[32];
	const float *xr = x + (long long)blockIdx.x * n;
	if (!block_finite(xr, n, sv)) {
		if (threadIdx.x == 0) out[blockIdx.x] = -1;
		return;
	}
	int best = block_argmax(xr, n, sv, si);
	if (threadIdx.x == 0) out[blockIdx.x] = best;
}
