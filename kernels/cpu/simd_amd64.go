//go:build !purego

package cpu

import (
	"unsafe"

	"github.com/prefixd/prefixd/internal/cpufeat"
)

//go:noescape
func gemm3x4AVX(a *float32, lda int, b *float32, ldb int, k8 int, c *float32, ldc int, tiles int, keep uint32)

//go:noescape
func gemm1x4AVX(a *float32, b *float32, ldb int, k8 int, c *float32, keep uint32)

//go:noescape
func dotAVX(a, b *float32, k8 int) float32

//go:noescape
func dotsAVX(q *float32, k *float32, ldk, n, k8 int, c *float32)

//go:noescape
func dotsHalfAVX(q *float32, k *uint16, ldk, n, k8 int, c *float32)

//go:noescape
func accumAVX(acc *float32, w *float32, v *float32, ldv int, rows int, d8 int)

// useAVX2 selects the assembly kernels. It is true when cpufeat lets the
// kernels use AVX2, FMA and F16C; tests turn it off to check the pure-Go
// kernels on the same machine.
var useAVX2 = haveAVX2()

// haveAVX2 reports whether this build, the CPU and PREFIXD_CPU allow the
// AVX2 kernels.
func haveAVX2() bool { return cpufeat.Kernels() >= cpufeat.AVX2 }

// simdTile computes the first k&^7 terms of a rows×4 tile (rows is 1 or
// a multiple of 3) as tile describes, added to c if acc, and returns how
// many terms it covered: 0 when the assembly kernels are off or k < 8.
func simdTile(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, rows, k int, acc bool) int {
	if !useAVX2 || k < 8 {
		return 0
	}
	k8 := k &^ 7
	// Bounds checks the assembly relies on.
	_, _, _ = a[(rows-1)*lda+k8-1], b[3*ldb+k8-1], c[(rows-1)*ldc+3]
	var keep uint32 // the mask the kernels keep c's values by: all or none
	if acc {
		keep = ^keep
	}
	if rows%3 == 0 {
		gemm3x4AVX(&a[0], lda, &b[0], ldb, k8, &c[0], ldc, rows/3, keep)
	} else {
		gemm1x4AVX(&a[0], &b[0], ldb, k8, &c[0], keep)
	}
	return k8
}

// simdDot returns the dot product of the first k0 elements of a and b and
// k0, a multiple of 8 (0 when the assembly kernels are off).
func simdDot(a, b []float32) (float32, int) {
	k8 := len(a) &^ 7
	if !useAVX2 || k8 == 0 {
		return 0, 0
	}
	_ = b[k8-1]
	return dotAVX(&a[0], &b[0], k8), k8
}

// simdScores is dotScores in one call per query pair (dotsAVX), with
// dotScores' bits. It reports false, computing nothing, where it has no
// kernel (the assembly kernels off, or hd not a multiple of 8).
func simdScores(c []float32, ldc int, q []float32, hd int, k []float32, ldk, m, n int) bool {
	return fusedScores(c, ldc, q, hd, k, ldk, m, n, dotsAVX)
}

// simdHalfScores is simdScores on K in halves (an F16 cache), each made
// float32 as it loads: the bits dotScores gives on halfRows' copy of K,
// without the copy.
func simdHalfScores(c []float32, ldc int, q []float32, hd int, k []uint16, ldk, m, n int) bool {
	return fusedScores(c, ldc, q, hd, k, ldk, m, n, dotsHalfAVX)
}

// fusedScores runs kern, dotsAVX or dotsHalfAVX, for each of the m query
// pairs, as simdScores describes.
func fusedScores[T float32 | uint16](c []float32, ldc int, q []float32, hd int, k []T, ldk, m, n int,
	kern func(q *float32, k *T, ldk, n, k8 int, c *float32)) bool {
	if !useAVX2 || hd&7 != 0 {
		return false
	}
	if m == 0 || n == 0 {
		return true
	}
	_, _, _ = c[(m-1)*ldc+n-1], q[m*hd-1], k[(n-1)*ldk+hd-1]
	for i := range m {
		kern(&q[i*hd], &k[0], ldk, n, hd, &c[i*ldc])
	}
	return true
}

// simdAccum adds the first d0 columns of accum's sum to acc and returns
// d0, a multiple of 8 (0 when the assembly kernels are off).
func simdAccum(acc, w, v []float32, ldv int) int {
	d8 := len(acc) &^ 7
	if !useAVX2 || d8 == 0 || len(w) == 0 {
		return 0
	}
	_ = v[(len(w)-1)*ldv+d8-1]
	accumAVX(&acc[0], &w[0], &v[0], ldv, len(w), d8)
	return d8
}

//go:noescape
func expSubAVX(s *float32, n8 int, m float32) float32

//go:noescape
func siluMulAVX(out, gate, up *float32, n8 int)

// simdSwiGLU sets SwiGLU's out[j] for the first j0 elements, j0 a
// multiple of 8 (0 when the assembly kernels are off), and returns j0.
func simdSwiGLU(out, gate, up []float32) int {
	n8 := len(gate) &^ 7
	if !useAVX2 || n8 == 0 {
		return 0
	}
	_, _ = out[n8-1], up[n8-1]
	siluMulAVX(&out[0], &gate[0], &up[0], n8)
	return n8
}

//go:noescape
func prefetchBytes(p *byte, stride int, rows int, n int)

// simdExpSub sets s[j] = e**(s[j]-m) for the first j0 elements, j0 a
// multiple of 8 (0 when the assembly kernels are off), and returns their
// sum and j0. It requires s[j] <= m.
func simdExpSub(s []float32, m float32) (float32, int) {
	n8 := len(s) &^ 7
	if !useAVX2 || n8 == 0 {
		return 0, 0
	}
	return expSubAVX(&s[0], n8, m), n8
}

// prefetch asks for rows rows of n floats at p, stride floats apart, to be
// brought into cache ahead of use.
func prefetch(p []float32, stride, rows, n int) {
	if !useAVX2 || rows == 0 || n == 0 {
		return
	}
	_ = p[(rows-1)*stride+n-1]
	prefetchBytes((*byte)(unsafe.Pointer(&p[0])), 4*stride, rows, 4*n)
}

//go:noescape
func gemm6x16AVX(a *float32, lda int, b *float32, kc int, c *float32, ldc int, tiles int, keep uint32)

// panelGemm computes the first n&^15 columns of gemm's product with the
// AVX2 6×16 kernel, when the assembly kernels are on and m is at least
// panelRows, and returns how many columns it covered (0 otherwise). For
// each block of k (kBlocks) it packs sixteen b rows at a time p-major
// (packPanel) and runs every six rows of a over the panel; the last
// m%6 rows go through the kernel on a copy padded to six. Each sum runs
// down p in order, one lane a column: no lanes are reduced.
func panelGemm(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k int) int {
	n16 := n &^ 15
	if !useAVX2 || m < panelRows || n16 == 0 || k == 0 {
		return 0
	}
	_, _, _ = a[(m-1)*lda+k-1], b[(n16-1)*ldb+k-1], c[(m-1)*ldc+n16-1]
	var panel [16 * gemmKBlock]float32
	var ra [6 * gemmKBlock]float32 // the last m%6 rows of a's block, padded
	var rc [6 * 16]float32         // their sums
	m6, rest := m/6*6, m%6
	kc := kBlocks(k, m)
	for p0 := 0; p0 < k; p0 += kc {
		kb := min(kc, k-p0)
		var keep uint32
		if p0 > 0 {
			keep = ^keep
		}
		for i := range rest {
			copy(ra[i*kb:(i+1)*kb], a[(m6+i)*lda+p0:])
		}
		for j := 0; j < n16; j += 16 {
			packPanel(panel[:16*kb], b[j*ldb+p0:], ldb, kb)
			if m6 > 0 {
				gemm6x16AVX(&a[p0], lda, &panel[0], kb, &c[j], ldc, m6/6, keep)
			}
			if rest > 0 {
				for i := range rest {
					copy(rc[i*16:(i+1)*16], c[(m6+i)*ldc+j:(m6+i)*ldc+j+16])
				}
				gemm6x16AVX(&ra[0], kb, &panel[0], kb, &rc[0], 16, 1, keep)
				for i := range rest {
					copy(c[(m6+i)*ldc+j:(m6+i)*ldc+j+16], rc[i*16:(i+1)*16])
				}
			}
		}
	}
	return n16
}

// packPanel sets dst[p*16+j] = b[j*ldb+p] for j < 16, p < kb: sixteen
// rows of b, p-major, as gemm6x16AVX reads them.
func packPanel(dst, b []float32, ldb, kb int) {
	dst = dst[:16*kb]
	k8 := kb &^ 7
	if k8 > 0 {
		_ = b[15*ldb+k8-1]
		packPanelAVX(&dst[0], &b[0], ldb, k8)
	}
	for j := range 16 {
		row := b[j*ldb+k8 : j*ldb+kb]
		for p, v := range row {
			dst[(k8+p)*16+j] = v
		}
	}
}

//go:noescape
func packPanelAVX(dst *float32, b *float32, ldb int, k8 int)
