// sample.cu: sampling on the device, one thread block per row: what
// sample.Sampler does to a row of logits, given the uniform draw u the
// host's Sampler made from its seeded PRNG, so that only the token (4
// bytes) comes back.
//
// In sample.Sampler's order: logit biases, then the repetition penalty
// (divide a positive logit, multiply a negative one, for a token in the
// prompt or the output) and the frequency and presence penalties, in
// float32 with the same roundings (no fused multiply-add, exact
// division); a row that is then not finite gives -1 (sample.ErrNonFinite).
// Temperature 0 is the argmax. Else each token's numerator
// exp((l - max)/T) is computed in float64 and rounded to float32, as the
// CPU does; min-p drops those under minP; top-k keeps the k largest
// (lower ID first on ties) and top-p the smallest most-likely-first
// prefix whose mass reaches topP of the total, both found by a binary
// search over the numerators' bits (block-wide counts and float64 sums)
// instead of a selection or a sort. The draw takes the first token whose
// cumulative mass exceeds u·total: in token order when neither top-k
// (keeping fewer than the Sampler's candidates: every token, or those
// min-p keeps) nor top-p applies, else most likely first (lower ID first
// on ties), the Sampler's order.
//
// Sums run in another order than the CPU's sequential float64 ones, so a
// u within float64 rounding (about 1e-13 relative) of a boundary between
// two tokens may pick the neighbour; and on a GPU, fast math flushes a
// numerator below float32's normal range (1e-38) to zero, which can move
// no draw.

#define SAMPLE_THREADS 256
// SAMPLE_PARAMS is the int32 words of a row's parameters: logits row,
// temperature, top-k, top-p, min-p, frequency, presence and repetition
// penalties, first entry, entries, u as float64 (two words).
#define SAMPLE_PARAMS 12

// sample_key is a numerator's bits: non-negative floats order as their
// bits do.
DEV unsigned sample_key(float p) { return __float_as_uint(p); }

// sample_count returns how many of p[0..n) are positive with a key of at
// least k, and their float64 sum in *sum.
DEV float sample_count(const float *p, int n, unsigned k, double *sum, float *shf, double *shd) {
	float c = 0.0f;
	double s = 0.0;
	for (int i = threadIdx.x; i < n; i += SAMPLE_THREADS)
		if (sample_key(p[i]) >= k && p[i] > 0.0f) c += 1.0f, s += p[i];
	*sum = block_sum(s, shd);
	return block_sum(c, shf);
}

// sample_tied returns how many tokens below index lim have numerator v.
DEV float sample_tied(const float *p, int lim, float v, float *shf) {
	float c = 0.0f;
	for (int i = threadIdx.x; i < lim; i += SAMPLE_THREADS)
		if (p[i] == v) c += 1.0f;
	return block_sum(c, shf);
}

// sample_cut returns, most likely first (lower ID first on ties), the
// position in p of the token where the running mass first reaches want
// (or exceeds it, if strict), or where the running count reaches want
// (if count); -1 if none does. Its numerator goes to *v, and the tokens
// before it are those with a larger numerator and the tied ones of lower
// index.
DEV int sample_cut(const float *p, int n, double want, bool strict, bool count, float *v, float *shf, double *shd) {
	// The largest key whose tokens at or above it reach want.
	unsigned k = 0;
	double s;
	for (int bit = 30; bit >= 0; bit--) {
		unsigned c = k | 1u << bit;
		float cnt = sample_count(p, n, c, &s, shf, shd);
		double got = count ? (double)cnt : s;
		if (strict ? got > want : got >= want) k = c;
	}
	float at = __uint_as_float(k);
	if (at == 0.0f) return -1; // want is beyond the whole mass
	*v = at;
	// Tokens above the key, then the tied ones in index order.
	float above = sample_count(p, n, k + 1, &s, shf, shd);
	double base = count ? (double)above : s, step = count ? 1.0 : (double)at;
	int lo = 0, hi = n; // the smallest index bound that takes enough tied tokens
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		double got = base + step * (double)sample_tied(p, mid + 1, at, shf);
		if (strict ? got > want : got >= want) hi = mid;
		else lo = mid + 1;
	}
	return lo;
}

KERNEL void __launch_bounds__(256) sample_rows(int *out, float *logits, int vocab, const int *params, const int *entries) {
	__shared__ float shf[32];
	__shared__ double shd[32];
	__shared__ int shi[32];
	__shared__ int pick;
	const int *pr = params + SAMPLE_PARAMS * blockIdx.x;
	float *x = logits + (long long)pr[0] * vocab;
	float temp = __int_as_float(pr[1]), topP = __int_as_float(pr[3]), minP = __int_as_float(pr[4]);
	float freq = __int_as_float(pr[5]), pres = __int_as_float(pr[6]), rep = __int_as_float(pr[7]);
	int topK = pr[2];
	double u = __longlong_as_double((long long)((unsigned long long)(unsigned)pr[10] | (unsigned long long)(unsigned)pr[11] << 32));

	// Biases and penalties: one entry per token, so no two threads write
	// the same logit.
	const int *e = entries + 4 * pr[8];
	for (int j = threadIdx.x; j < pr[9]; j += SAMPLE_THREADS) {
		int tok = e[4 * j], cnt = e[4 * j + 2];
		if (tok < 0 || tok >= vocab) continue;
		float l = __fadd_rn(x[tok], __int_as_float(e[4 * j + 1]));
		if (rep != 0.0f && rep != 1.0f && (cnt > 0 || e[4 * j + 3]))
			l = l > 0.0f ? __fdiv_rn(l, rep) : __fmul_rn(l, rep);
		if (cnt > 0) l = __fsub_rn(l, __fadd_rn(__fmul_rn(freq, (float)cnt), pres));
		x[tok] = l;
	}
	__syncthreads();
	if (!block_finite(x, vocab, shf)) {
		if (threadIdx.x == 0) out[blockIdx.x] = -1;
		return;
	}
	int best = block_argmax(x, vocab, shf, shi);
	if (temp == 0.0f) {
		if (threadIdx.x == 0) out[blockIdx.x] = best;
		return;
	}
	// Numerators, in place (0: filtered out), and min-p.
	double hi = x[best], inv = 1.0 / (double)temp;
	__syncthreads(); // every thread has read x[best]
	for (int i = threadIdx.x; i < vocab; i += SAMPLE_THREADS) {
		float p = (float)exp(((double)x[i] - hi) * inv);
		x[i] = minP > 0.0f && p < minP ? 0.0f : p;
	}
	__syncthreads();
	double total;
	float kept = sample_count(x, vocab, 0, &total, shf, shd), v;
	// The Sampler walks most likely first when top-k keeps fewer than its
	// candidates (every token, or min-p's) or top-p applies.
	bool sorted = (topK > 0 && (float)topK < (minP > 0.0f ? kept : (float)vocab)) || (topP > 0.0f && topP < 1.0f);
	if (topK > 0 && (float)topK < kept) {
		int at = sample_cut(x, vocab, (double)topK, false, true, &v, shf, shd);
		for (int i = threadIdx.x; i < vocab; i += SAMPLE_THREADS)
			if (x[i] < v || (x[i] == v && i > at)) x[i] = 0.0f;
		__syncthreads();
		sample_count(x, vocab, 0, &total, shf, shd);
	}
	if (topP > 0.0f && topP < 1.0f) {
		int at = sample_cut(x, vocab, (double)topP * total, false, false, &v, shf, shd);
		if (at >= 0) {
			for (int i = threadIdx.x; i < vocab; i += SAMPLE_THREADS)
				if (x[i] < v || (x[i] == v && i > at)) x[i] = 0.0f;
			__syncthreads();
			sample_count(x, vocab, 0, &total, shf, shd);
		}
	}
	double target = u * total;
	if (sorted) {
		int at = sample_cut(x, vocab, target, true, false, &v, shf, shd);
		if (at < 0) {
			// Rounding left target at the total: the token where the
			// running mass reaches the whole, the walk's last.
			double all;
			sample_count(x, vocab, 1, &all, shf, shd);
			at = sample_cut(x, vocab, all, false, false, &v, shf, shd);
		}
		if (threadIdx.x == 0) out[blockIdx.x] = at;
		return;
	}
	// Token order: each thread sums a contiguous run of the row, a scan of
	// the runs finds the one where the mass passes target, and its thread
	// walks it as the CPU does (subtracting from the draw).
	int per = (vocab + SAMPLE_THREADS - 1) / SAMPLE_THREADS, i0 = threadIdx.x * per, i1 = min(vocab, i0 + per);
	double run = 0.0;
	for (int i = i0; i < i1; i++) run += x[i];
	__shared__ double runs[SAMPLE_THREADS];
	runs[threadIdx.x] = run;
	if (threadIdx.x == 0) pick = -1;
	__syncthreads();
	if (threadIdx.x == 0) {
		double left = target;
		int last = -1;
		for (int t = 0; t < SAMPLE_THREADS && pick < 0; t++) {
			int a = t * per, b = min(vocab, a + per);
			if (left - runs[t] >= 0.0) {
				left -= runs[t];
				for (int i = a; i < b; i++)
					if (x[i] > 0.0f) last = i;
				continue;
			}
			for (int i = a; i < b && pick < 0; i++) {
				left -= x[i];
				if (x[i] > 0.0f) last = i;
				if (left < 0.0) pick = i;
			}
		}
		out[blockIdx.x] = pick >= 0 ? pick : last;
	}
}
