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
