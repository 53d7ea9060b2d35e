//go:build !purego

package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
)

// directWeights returns n random F16 or BF16 values as bytes and as the
// float32 values kernels/quant's scalar converters give for them. F16
// values range over every finite bit pattern (subnormals included); BF16
// values over subnormals and exponents within 2^±30, so that sums stay
// finite.
func directWeights(r *rand.Rand, t kernels.DType, n int) ([]byte, []float32) {
	h, f := make([]byte, 2*n), make([]float32, n)
	for i := range f {
		var v uint16
		switch {
		case t == kernels.F16:
			v = randF16(r)
			f[i] = quant.F16ToF32(v)
		case r.IntN(16) == 0:
			v = uint16(r.Uint32()) & 0x807f // subnormal or zero
			f[i] = quant.BF16ToF32(v)
		default:
			exp := uint16(127 - 30 + r.IntN(61))
			v = uint16(r.Uint32())&0x807f | exp<<7
			f[i] = quant.BF16ToF32(v)
		}
		binary.LittleEndian.PutUint16(h[2*i:], v)
	}
	return h, f
}

// TestDirectWeightsAreDequantized checks directWeights's float32 values
// against kernels/quant's dequantizer, which deqMatMul runs: the direct
// kernels, equal to the float32 ones on those values, then compute what
// deqMatMul computes.
func TestDirectWeightsAreDequantized(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for _, typ := range directTypes {
		h, want := directWeights(r, typ, 4096)
		got := make([]float32, len(want))
		if err := quant.Dequantize(typ, got, h); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%v: value %d dequantizes to %v, want %v", typ, i, got[i], want[i])
			}
		}
	}
}

// randF16 returns a random finite F16 bit pattern.
func randF16(r *rand.Rand) uint16 {
	v := uint16(r.Uint32())
	for v&0x7c00 == 0x7c00 { // not Inf or NaN
		v = uint16(r.Uint32())
	}
	return v
}

// TestDirectGemmMatchesFloat32Gemm checks that the kernels reading F16
// and BF16 b compute bit for bit what the float32 kernels compute on b's
// values converted by kernels/quant: the conversions are exact and the
// multiply-adds run in the same order. The shapes cover every remainder
// of the 4-row panels (m 1 to 20), tiles that move left (n % 6), masked
// tails of k and a last half group of 16, k in several blocks (k > gemmKBlock), the 1x16 kernel, the prefetching
// loop of the 4×6 kernels, tile by tile and panel by panel, and column
// ranges [j0, j1) as the workers split them, outside which nothing may
// be written.
func TestDirectGemmMatchesFloat32Gemm(t *testing.T) {
	if !directGemm(kernels.F16, 6) {
		t.Skip("this CPU has no AVX-512")
	}
	type shape struct{ m, n, k int }
	var shapes []shape
	for m := 1; m <= 20; m++ {
		for _, n := range []int{6, 7, 11, 17, 40} {
			for _, k := range []int{1, 15, 16, 17, 50, 769, 1553} {
				if k <= 100 || m%3 == 0 || m == 4 { // long k: fewer m, for time
					shapes = append(shapes, shape{m, n, k})
				}
			}
		}
	}
	// b big enough for the 4×6 tiles to prefetch (gemmPrefetchBytes),
	// tile by tile and, with 340 rows (a past gemmTileMajorBytes), panel
	// by panel.
	shapes = append(shapes, shape{4, 100, 800}, shape{13, 100, 800}, shape{340, 100, 800})
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range directTypes {
		for _, s := range shapes {
			m, n, k := s.m, s.n, s.k
			h, f := directWeights(r, typ, n*k)
			a := randVec(r, m*k)
			for _, cols := range [][2]int{{0, n}, {0, n / 2 &^ 3}, {n / 2 &^ 3, n}, {4, n - 1}} {
				j0, j1 := cols[0], cols[1]
				if j0 >= j1 {
					continue
				}
				name := fmt.Sprintf("%v m=%d n=%d k=%d columns [%d,%d)", typ, m, n, k, j0, j1)
				got, want := nanVec(m*n), nanVec(m*n)
				directGemmCols(got, a, h, typ, m, j0, j1, n, k)
				fb := unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
				gemmCols(want, n, a, k, gemmB{fb, kernels.F32, k}, m, j0, j1, n, k)
				for i := range m {
					for j := range n {
						g, w := got[i*n+j], want[i*n+j]
						if math.Float32bits(g) != math.Float32bits(w) {
							t.Fatalf("%s: c[%d][%d] = %v, want %v", name, i, j, g, w)
						}
						if inside := j >= j0 && j < j1; inside == math.IsNaN(float64(g)) {
							t.Fatalf("%s: c[%d][%d] = %v (written: %v)", name, i, j, g, inside)
						}
					}
				}
			}
		}
	}
}

// TestDirectGemmWholeProduct checks matMulDirect, split across workers,
// against gemm on the float32 values: equal bits in the rows of whole
// 4-row panels (the same 4×6 kernel computes each of their columns
// however the columns are split), float32 rounding in the others (a
// split can move a column between the 1x16 and 1x6 kernels, whose sums
// are ordered differently, so the two results err differently).
func TestDirectGemmWholeProduct(t *testing.T) {
	if !directGemm(kernels.F16, 6) {
		t.Skip("this CPU has no AVX-512")
	}
	w := NewWorkers(3)
	defer w.Close()
	r := rand.New(rand.NewPCG(15, 16))
	const m, n, k = 10, 301, 800
	for _, typ := range directTypes {
		h, f := directWeights(r, typ, n*k)
		a := randVec(r, m*k)
		got, want := make([]float32, m*n), make([]float32, m*n)
		matMulDirect(w, got, a, h, typ, m, n, k)
		gemm(want, n, a, k, f, k, m, n, k)
		for i := range m {
			for j := range n {
				g, wv := got[i*n+j], want[i*n+j]
				if i < m&^3 && math.Float32bits(g) != math.Float32bits(wv) {
					t.Fatalf("%v: c[%d][%d] = %v, want %v", typ, i, j, g, wv)
				}
				var mag float64 // float32 sums of k terms err by k·2^-24 of it at most
				for p := range k {
					mag += math.Abs(float64(a[i*k+p]) * float64(f[j*k+p]))
				}
				if d := math.Abs(float64(g - wv)); !(d <= k*0x1p-24*mag) {
					t.Fatalf("%v: c[%d][%d] = %v, want %v", typ, i, j, g, wv)
				}
			}
		}
	}
}

// directTypes are the types of b that the AVX-512 kernels read directly.
var directTypes = []kernels.DType{kernels.F16, kernels.BF16}

func nanVec(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}
