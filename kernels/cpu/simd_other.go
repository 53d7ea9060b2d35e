//go:build !amd64 || purego

package cpu

// useAVX2 is always false in this build: there are no assembly kernels,
// and the pure-Go kernels do all the work.
var useAVX2 = false

// haveAVX2 reports whether this build and CPU can run the AVX2 kernels.
func haveAVX2() bool { return false }

func simdTile(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, rows, k int) int {
	return 0
}

func simdDot(a, b []float32) (float32, int) { return 0, 0 }

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
