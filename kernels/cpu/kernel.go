package cpu

import "math"

// gemm sets c[i*ldc+j] = Σ_p a[i*lda+p]·b[j*ldb+p] for i < m, j < n, p < k
// on the calling goroutine. With AVX-512, simdGemm does it in 4×6 tiles.
// With AVX2 and at least panelRows rows, panelGemm does the columns in
// groups of sixteen in 6×16 tiles, and dotGemm the rest.
func gemm(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k int) {
	if simdGemm(c, ldc, a, lda, b, ldb, m, n, k) {
		return
	}
	if j := panelGemm(c, ldc, a, lda, b, ldb, m, n, k); j < n {
		dotGemm(c[j:], ldc, a, lda, b[j*ldb:], ldb, m, n-j, k)
	}
}

// dotGemm is gemm in tiles of dot products: each group of four b rows
// stays in L1 while the a rows of a block (gemmABlockBytes of them) pass
// over it, three rows at a time, so one load of b feeds three products;
// the block stays in L2 while every group of b passes over it. A k longer
// than gemmKBlock goes in blocks (kBlocks), each tile adding its block's
// sums to the one before, so that the four b rows and three a rows a tile
// reads stay in L1 together.
func dotGemm(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k int) {
	kc := kBlocks(k, m)
	mb := max(3, gemmABlockBytes/(4*kc)/3*3)
	for i0 := 0; i0 < m; i0 += mb {
		i1 := min(i0+mb, m)
		for p0 := 0; p0 < k; p0 += kc {
			kb, acc := min(kc, k-p0), p0 > 0
			j := 0
			for ; j+4 <= n; j += 4 {
				bj := b[j*ldb+p0:]
				i := i0 + (i1-i0)/3*3
				if i > i0 {
					tile(c[i0*ldc+j:], ldc, a[i0*lda+p0:], lda, bj, ldb, i-i0, kb, acc)
				}
				for ; i < i1; i++ {
					tile(c[i*ldc+j:], ldc, a[i*lda+p0:], lda, bj, ldb, 1, kb, acc)
				}
			}
			for ; j < n; j++ {
				bj := b[j*ldb+p0 : j*ldb+p0+kb]
				for i := i0; i < i1; i++ {
					d := Dot(a[i*lda+p0:i*lda+p0+kb], bj)
					if acc {
						d += c[i*ldc+j]
					}
					c[i*ldc+j] = d
				}
			}
		}
	}
}

// panelRows is the least rows of a for which gemm runs the AVX2 kernels'
// 6×16 tiles (panelGemm): below it, packing b's panels costs more than
// the tiles save.
const panelRows = 64

// gemmABlockBytes is the most bytes of a that gemm's tiles take through
// L2 at once.
const gemmABlockBytes = 256 << 10

// gemmKBlock is the longest stretch of k a GEMM tile sums at once. Past
// it the a rows and the b rows a tile reads no longer fit in L1 together.
// On Zen 4: with AVX-512 (4×6 tiles), k = 2048 in one block ran at 165
// GFLOP/s a core against 220 for k = 768, and in three blocks at 195;
// blocks of 1024 gave 185. Each further block of k costs a reduction of
// the accumulators, which is why the blocks are not shorter.
const gemmKBlock = 768

// kBlocks returns the length of the blocks a GEMM of m rows splits k into:
// k itself for up to gemmKBlock terms or fewer than three rows (which
// have no tile of a to keep in L1), else k in equal parts of at most
// gemmKBlock, rounded up to whole groups of 32 (the kernels' loops).
func kBlocks(k, m int) int {
	if m < 3 || k <= gemmKBlock {
		return k
	}
	parts := (k + gemmKBlock - 1) / gemmKBlock
	return ((k+parts-1)/parts + 31) &^ 31
}

// tile sets c[i*ldc+j] = Σ_p a[i*lda+p]·b[j*ldb+p] for i < rows, j < 4,
// p < k (rows is 1 or a multiple of 3), or adds the sums to c if acc:
// the SIMD kernel covers what it can and plain Go the rest of k.
func tile(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, rows, k int, acc bool) {
	k0 := simdTile(c, ldc, a, lda, b, ldb, rows, k, acc)
	if k0 == k {
		return
	}
	b0, b1, b2, b3 := b[k0:k], b[ldb+k0:ldb+k], b[2*ldb+k0:2*ldb+k], b[3*ldb+k0:3*ldb+k]
	for i := range rows {
		ai := a[i*lda+k0 : i*lda+k]
		var s0, s1, s2, s3 float32
		if k0 > 0 || acc {
			s0, s1, s2, s3 = c[i*ldc], c[i*ldc+1], c[i*ldc+2], c[i*ldc+3]
		}
		b0, b1, b2, b3 = b0[:len(ai)], b1[:len(ai)], b2[:len(ai)], b3[:len(ai)]
		for p, av := range ai {
			s0 += av * b0[p]
			s1 += av * b1[p]
			s2 += av * b2[p]
			s3 += av * b3[p]
		}
		c[i*ldc], c[i*ldc+1], c[i*ldc+2], c[i*ldc+3] = s0, s1, s2, s3
	}
}

// Dot returns the dot product of a and b[:len(a)].
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	s0, k0 := simdDot(a, b)
	var s1, s2, s3 float32
	i := k0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// accum adds Σ_j w[j]·v[j*ldv+d] to acc[d] for every d < len(acc) and
// j < len(w): one attention row's weighted sum of a block of V vectors.
func accum(acc, w, v []float32, ldv int) {
	d0 := simdAccum(acc, w, v, ldv)
	if d0 == len(acc) {
		return
	}
	for j, wj := range w {
		vj := v[j*ldv+d0 : j*ldv+len(acc)]
		for d, x := range vj {
			acc[d0+d] += wj * x
		}
	}
}

// expSub sets s[j] = e**(s[j]-m) and returns their sum: the softmax
// weights of scores s whose maximum is m. It requires s[j] <= m.
func expSub(s []float32, m float32) float32 {
	sum, j0 := simdExpSub(s, m)
	for j := j0; j < len(s); j++ {
		e := expf(s[j] - m)
		s[j] = e
		sum += e
	}
	return sum
}

// expf returns e**x in float32, within 2 ulp of the correctly rounded
// result, several times faster than math.Exp. It reduces x to r in
// [-ln2/2, ln2/2] with x = n·ln2 + r and evaluates a degree-6 polynomial
// for e**r (the Cephes expf coefficients); arguments whose result would be
// subnormal or overflow take math.Exp.
func expf(x float32) float32 {
	if !(x >= -87 && x <= 88) { // also NaN
		return float32(math.Exp(float64(x)))
	}
	const (
		log2e = 1.44269504088896341
		ln2Hi = 0.693359375
		ln2Lo = -2.12194440e-4
	)
	n := float32(math.Floor(float64(x*log2e) + 0.5))
	r := x - n*ln2Hi - n*ln2Lo
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	p = p*r*r + r + 1
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}
