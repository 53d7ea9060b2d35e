//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

//go:noescape
func gemm4x6AVX512(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, kmask, cmask, amask uint16)

//go:noescape
func gemm1x16AVX512(a *float32, b *float32, ldb int, k int, c *float32, kmask, amask uint16)

//go:noescape
func gemm1x6AVX512(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, kmask, cmask, amask uint16)

// useAVX512 selects the AVX-512 GEMM kernels. It is true when the CPU has
// AVX-512F (and AVX2 and FMA) and the OS saves the ZMM and opmask
// registers; tests turn it off to check the AVX2 and pure-Go kernels on
// the same machine.
var useAVX512 = haveAVX512()

// haveAVX512 reports whether this build and CPU can run the AVX-512
// kernels.
func haveAVX512() bool { return cpu.X86.HasAVX512F && hasAVX2FMA() }

// gemmBlockBytes is the size of the block of b rows that every 4-row panel
// of a passes over before the next block starts: it stays in L2 while
// the panel stays in L1. (On Zen 5, 128 KiB measured 10% slower at k =
// 768; 512 and 768 KiB no faster.)
const gemmBlockBytes = 256 << 10

// gemmKBlock is the longest stretch of k a tile sums at once. Past it the
// 4-row panel of a (16·k bytes) and the six b rows streaming through L1
// no longer fit there together: on Zen 5, k = 2048 in one block ran at
// 165 GFLOP/s a core against 220 for k = 768, and in three blocks at 195;
// blocks of 1024 gave 185. Each further block of k costs a reduction of
// the accumulators, which is why the blocks are not shorter.
const gemmKBlock = 768

// simdGemm computes gemm's product with the AVX-512 kernels and reports
// whether it did: false when they are off or n < 6 (narrower than one
// tile).
func simdGemm(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k int) bool {
	if !useAVX512 || n < 6 || m <= 0 || k <= 0 {
		return false
	}
	parts := 1
	if m >= 4 { // fewer rows have no a panel to keep in L1
		parts = (k + gemmKBlock - 1) / gemmKBlock
	}
	kc := ((k+parts-1)/parts + 15) &^ 15 // k of every block but the last
	nb := max(6, gemmBlockBytes/(4*kc)/6*6)
	for j0 := 0; j0 < n; j0 += nb {
		j1 := min(j0+nb, n)
		for p0 := 0; p0 < k; p0 += kc {
			gemmBlock(c, ldc, a[p0:], lda, b[p0:], ldb, m, j0, j1, n, min(kc, k-p0), p0 > 0)
		}
	}
	return true
}

// gemmBlock is simdGemm's product over columns [j0, j1) of n and kb
// terms of k, added to c if add is set, else stored: 4×6 tiles, and rows
// short of a 4-row panel one at a time.
func gemmBlock(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, j0, j1, n, kb int, add bool) {
	kmask := uint16(1)<<(kb%16) - 1
	i := 0
	for ; i+4 <= m; i += 4 {
		for j := j0; j < j1; j += 6 {
			// A last tile narrower than six columns moves left onto
			// columns already done and stores only its new ones.
			jj := min(j, n-6)
			cmask := uint16(0x3f<<(j-jj)) & 0x3f
			amask := uint16(0)
			if add {
				amask = cmask
			}
			// Bounds checks the assembly relies on.
			_, _, _ = a[(i+3)*lda+kb-1], b[(jj+5)*ldb+kb-1], c[(i+3)*ldc+jj+5]
			gemm4x6AVX512(&a[i*lda], lda, &b[jj*ldb], ldb, kb, &c[i*ldc+jj], ldc, kmask, cmask, amask)
		}
	}
	for ; i < m; i++ {
		gemmRow(c[i*ldc:], a[i*lda:], b, ldb, j0, j1, n, kb, add)
	}
}

// gemmRow is gemmBlock's product for the single row a (to c) over columns
// [j0, j1): 16 at a time, whose sums reduce together, then 6 at a time.
func gemmRow(c []float32, a []float32, b []float32, ldb int, j0, j1, n, kb int, add bool) {
	kmask := uint16(1)<<(kb%16) - 1
	amask := uint16(0)
	if add {
		amask = 0xffff
	}
	j := j0
	for ; j+16 <= j1; j += 16 {
		_, _, _ = a[kb-1], b[(j+15)*ldb+kb-1], c[j+15] // bounds the assembly relies on
		gemm1x16AVX512(&a[0], &b[j*ldb], ldb, kb, &c[j], kmask, amask)
	}
	for ; j < j1; j += 6 {
		jj := min(j, n-6) // as in gemmBlock
		cmask := uint16(0x3f<<(j-jj)) & 0x3f
		_, _, _ = a[kb-1], b[(jj+5)*ldb+kb-1], c[jj+5]
		gemm1x6AVX512(&a[0], 0, &b[jj*ldb], ldb, kb, &c[jj], 0, kmask, cmask, amask&cmask)
	}
}
