//go:build !amd64 || purego

package cpu

import "github.com/prefixd/prefixd/kernels"

// useAVX2 is always false in this build: there are no assembly kernels,
// and the pure-Go kernels do all the work.
var useAVX2 = false

// haveAVX2 reports whether this build and CPU can run the AVX2 kernels.
func haveAVX2() bool { return false }

func simdTile(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, rows, k int, acc bool) int {
	return 0
}

func simdDot(a, b []float32) (float32, int) { return 0, 0 }

func simdScores(c []float32, ldc int, q []float32, hd int, k []float32, ldk, m, n int) bool {
	return false
}

func simdHalfScores(c []float32, ldc int, q []float32, hd int, k []uint16, ldk, m, n int) bool {
	return false
}

func simdAccum(acc, w, v []float32, ldv int) int { return 0 }

func simdExpSub(s []float32, m float32) (float32, int) { return 0, 0 }

func simdSwiGLU(out, gate, up []float32) int { return 0 }

func prefetch(p []float32, stride, rows, n int) {}

// useAVX512 is always false in this build, like useAVX2.
var useAVX512 = false

// haveAVX512 reports whether this build and CPU can run the AVX-512
// kernels.
func haveAVX512() bool { return false }

func simdGemm(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k int) bool {
	return false
}

// directGemm is always false in this build: no kernel reads F16 or BF16.
func directGemm(t kernels.DType, n int) bool { return false }

// directGemmCols is never called in this build, where directGemm is false.
func directGemmCols(c, a []float32, b []byte, t kernels.DType, m, j0, j1, n, k int) {
	panic("cpu: directGemmCols without the AVX-512 kernels")
}

func panelGemm(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k int) int {
	return 0
}
