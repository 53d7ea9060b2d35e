//go:build !purego

package cpu

import (
	"unsafe"

	"github.com/prefixd/prefixd/kernels"
)

// halfScores sets c[i*ldc+j] = Σ_p a[i*lda+p]·b[j*ldb+p] for i < m, j < n,
// p < k, b being halves: attention's scores against an F16 cache's K
// vectors, read as they are by the AVX-512 GEMM, which converts each half
// as it loads it and so computes what it does on their float32 values.
// directGemm(kernels.F16, n) must hold.
func halfScores(c []float32, ldc int, a []float32, lda int, b []uint16, ldb, m, n, k int) {
	bb := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), 2*len(b))
	gemmCols(c, ldc, a, lda, gemmB{bb, kernels.F16, ldb}, m, 0, n, n, k)
}

//go:noescape
func maxAVX(s *float32, n8 int, m float32) float32

// simdMax returns the largest of m and the first j0 values of s, j0 a
// multiple of 8 (0 when the assembly kernels are off), NaNs skipped, and
// j0.
func simdMax(s []float32, m float32) (float32, int) {
	n8 := len(s) &^ 7
	if !useAVX2 || n8 == 0 {
		return m, 0
	}
	return maxAVX(&s[0], n8, m), n8
}

//go:noescape
func scaleAddAVX(acc, add *float32, n8 int, c float32)

// simdScaleAdd does scaleAdd's work for the first j0 elements, j0 a
// multiple of 8 (0 when the assembly kernels are off), and returns j0.
func simdScaleAdd(acc, add []float32, c float32) int {
	n8 := len(acc) &^ 7
	if !useAVX2 || n8 == 0 {
		return 0
	}
	_ = add[n8-1]
	scaleAddAVX(&acc[0], &add[0], n8, c)
	return n8
}

//go:noescape
func accumHalfAVX(acc *float32, w *float32, v *uint16, ldv int, rows int, d8 int)

// fusedHalfAccum reports whether accumHalf can add V vectors of hd halves
// straight from an F16 cache: with AVX2 and F16C, hd a multiple of 8.
func fusedHalfAccum(hd int) bool { return useAVX2 && hd%8 == 0 }

// accumHalf is accum over V vectors of halves, ldv apart, each made
// float32 as it is loaded (VCVTPH2PS), so that acc takes the same
// additions, bit for bit, as accum makes on their float32 values.
// fusedHalfAccum(len(acc)) must hold.
func accumHalf(acc, w []float32, v []uint16, ldv int) {
	if len(w) == 0 {
		return
	}
	_ = v[(len(w)-1)*ldv+len(acc)-1]
	accumHalfAVX(&acc[0], &w[0], &v[0], ldv, len(w), len(acc))
}
