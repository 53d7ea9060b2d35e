package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prefixd/prefixd/kernels/quant"
)

// TestHalfConversions checks the F16 cache's conversions with every kernel
// set against kernels/quant's scalar ones: halfRows on every half bit
// pattern (rows of odd width, read with a stride, so the vector body and
// the Go tail both run), toHalf on random float32 bit patterns and the
// rounding edges. A NaN must stay a NaN; its payload may differ.
func TestHalfConversions(t *testing.T) {
	const n, lds = 13, 17
	rows := (1<<16 + n - 1) / n
	src := make([]uint16, rows*lds)
	for h := range 1 << 16 {
		src[h/n*lds+h%n] = uint16(h)
	}
	r := rand.New(rand.NewPCG(9, 9))
	floats := []float32{0, float32(math.Copysign(0, -1)), 65504, 65519.996, 65520, -65520, 1.0 / (1 << 24), 1.0 / (1 << 25),
		1.0 / (1 << 25) * 1.0000001, 6.1035156e-05, 6.1e-05, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for range 1 << 16 {
		floats = append(floats, math.Float32frombits(r.Uint32()), float32(r.NormFloat64()))
	}
	same := func(a, b float32) bool {
		return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
	}
	eachKernel(t, func(t testing.TB) {
		dst := make([]float32, rows*n)
		halfRows(dst, src, lds, rows, n)
		for h := range 1 << 16 {
			if got, want := dst[h], quant.F16ToF32(uint16(h)); !same(got, want) {
				t.Fatalf("half %#04x: %v, want %v", h, got, want)
			}
		}
		halves := make([]uint16, len(floats))
		toHalf(halves, floats)
		for i, f := range floats {
			got, want := halves[i], quant.F32ToF16(f)
			if got != want && !(f != f && got&0x7c00 == 0x7c00 && got&0x3ff != 0) {
				t.Fatalf("%v (%#08x): %#04x, want %#04x", f, math.Float32bits(f), got, want)
			}
		}
	})
}

// TestFusedScores checks that the decode path's scores, one kernel call
// per query pair over a run of K (simdScores on float32, simdHalfScores on
// halves each made float32 as it loads), have the bits dotScores gives,
// over halfRows' float32 copy for the halves, for head sizes that run the
// 32-wide body, the 8-wide tail and both, with a row stride and several
// query pairs. Where the CPU or build has no kernel the test checks only
// that they decline.
func TestFusedScores(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	for _, hd := range []int{8, 24, 32, 64, 72, 128, 12} {
		const m, n, ldc = 3, 17, 20
		ldk := hd + 5
		k16, k32 := make([]uint16, n*ldk), make([]float32, n*ldk)
		for i := range k16 {
			k16[i] = quant.F32ToF16(float32(r.NormFloat64()))
			k32[i] = float32(r.NormFloat64())
		}
		q := make([]float32, m*hd)
		for i := range q {
			q[i] = float32(r.NormFloat64())
		}
		kb := make([]float32, n*hd)
		halfRows(kb, k16, ldk, n, hd)
		for _, tc := range []struct {
			name  string
			fused func(c []float32) bool
			k     []float32
			ldk   int
		}{
			{"float32", func(c []float32) bool { return simdScores(c, ldc, q, hd, k32, ldk, m, n) }, k32, ldk},
			{"halves", func(c []float32) bool { return simdHalfScores(c, ldc, q, hd, k16, ldk, m, n) }, kb, hd},
		} {
			got, want := make([]float32, m*ldc), make([]float32, m*ldc)
			if !tc.fused(got) {
				if useAVX2 && hd%8 == 0 {
					t.Fatalf("%s, hd %d: no kernel with AVX2 on", tc.name, hd)
				}
				continue
			}
			dotScores(want, ldc, q, hd, tc.k, tc.ldk, m, n)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s, hd %d: score %d = %g (%#x), dotScores %g (%#x)", tc.name, hd, i,
						got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		}
	}
}
