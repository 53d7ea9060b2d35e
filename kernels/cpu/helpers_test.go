package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// eachKernel runs f once with the pure-Go kernels, once with the AVX2
// assembly and once with the AVX-512 GEMM over it, so every path faces the
// same checks; a path the CPU lacks is skipped (a *testing.T subtest says
// so).
func eachKernel(t testing.TB, f func(t testing.TB)) {
	saved2, saved512 := useAVX2, useAVX512
	defer func() { useAVX2, useAVX512 = saved2, saved512 }()
	for _, mode := range []struct {
		name         string
		avx2, avx512 bool
		have         bool
	}{
		{"go", false, false, true},
		{"avx2", true, false, haveAVX2()},
		{"avx512", true, true, haveAVX512()},
	} {
		useAVX2, useAVX512 = mode.avx2, mode.avx512
		st, ok := t.(*testing.T)
		switch {
		case ok:
			st.Run(mode.name, func(t *testing.T) {
				if !mode.have {
					t.Skipf("this build or CPU has no %s kernels", mode.name)
				}
				f(t)
			})
		case mode.have:
			f(t)
		}
	}
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// checkClose fails if got and want differ anywhere by more than tol.
func checkClose(t testing.TB, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: length %d, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= tol) {
			t.Fatalf("%s: [%d] = %v, want %v (diff %g > %g)", what, i, got[i], want[i], d, tol)
		}
	}
}

// naiveMatMul is c = a·bᵀ in float64, the reference for MatMul.
func naiveMatMul(a, b []float32, m, n, k int) []float32 {
	c := make([]float32, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				s += float64(a[i*k+p]) * float64(b[j*k+p])
			}
			c[i*n+j] = float32(s)
		}
	}
	return c
}

// matMulTol bounds float32 rounding for a sum of k products of standard
// normals: error grows at worst like k·eps·Σ|a·b|, in practice far less.
func matMulTol(k int) float64 { return 1e-6*float64(k) + 1e-5 }
