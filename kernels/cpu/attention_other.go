//go:build !amd64 || purego

package cpu

// halfScores is never called in this build, where directGemm is false.
func halfScores(c []float32, ldc int, a []float32, lda int, b []uint16, ldb, m, n, k int) {
	panic("cpu: halfScores without the AVX-512 kernels")
}

func simdMax(s []float32, m float32) (float32, int) { return m, 0 }

func simdScaleAdd(acc, add []float32, c float32) int { return 0 }

// fusedHalfAccum is always false in this build: V of an F16 cache is
// converted into scratch, then accum adds it.
func fusedHalfAccum(hd int) bool { return false }

// accumHalf is never called in this build, where fusedHalfAccum is false.
func accumHalf(acc, w []float32, v []uint16, ldv int) {
	panic("cpu: accumHalf without the assembly kernels")
}
