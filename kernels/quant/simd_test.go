package quant

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// dotSIMD is the assembly dot product of one weight row and one
// activation row, and false where there is no kernel.
func dotSIMD(t Type, w []byte, a *actRow) (float32, bool) {
	var out [1]float32
	ok := dotRowsSIMD(t, w, a, out[:])
	return out[0], ok
}

// TestSIMDMatchesGo runs each assembly kernel and the pure-Go one on the
// same rows, random bytes included (any weight bytes are a valid row, so
// every scale and quant pattern turns up), for block counts that exercise
// the unrolled loops' tails. The integer sums are exact in both; only the
// float accumulation order differs.
func TestSIMDMatchesGo(t *testing.T) { forEachLevel(t, testSIMDMatchesGo) }

func testSIMDMatchesGo(t *testing.T) {
	if _, ok := dotSIMD(Q8_0, make([]byte, 34), &actRow{qs: make([]int8, 32), d: make([]float32, 1), s: make([]float32, 1)}); !ok {
		t.Skip("no AVX2 kernels in this build or on this CPU")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, typ := range weightTypes {
		for _, blocks := range []int{1, 2, 3, 5, 16, 17} {
			in := blocks * max(actBlock(typ), 8)
			for trial := range 20 {
				w := trialWeights(t, rng, typ, in, trial)
				x := randRow(rng, in)
				a := testActs(typ, x, in)
				ar := a.row(0, in)
				got, ok := dotSIMD(typ, w, &ar)
				if !ok {
					continue // no assembly kernel for this type
				}
				want := dotGo(typ, w, &ar)
				if tol := 1e-5 * absDot(typ, w, x); math.Abs(float64(got-want)) > tol {
					t.Fatalf("%s, %d values, trial %d: assembly %v, Go %v (tolerance %.3g)", typ, in, trial, got, want, tol)
				}
			}
		}
	}
}

// scrubNonFinite turns the Inf and NaN scales random bytes may hold into
// finite ones, so the sums stay comparable.
func scrubNonFinite(typ Type, w []byte) {
	switch typ {
	case F32, BF16: // the exponent's top bits are in the last byte
		for i := typ.BlockBytes() - 1; i < len(w); i += typ.BlockBytes() {
			if w[i]&0x7f == 0x7f {
				w[i] &^= 0x40
			}
		}
		return
	}
	// The byte offsets of the halves in a block.
	halves := map[Type][]int{F16: {0}, Q8_0: {0}, Q4_0: {0}, Q5_0: {0}, Q4_1: {0, 2}, Q5_1: {0, 2},
		Q4_K: {0, 2}, Q5_K: {0, 2}, Q6_K: {208}}[typ]
	for b := 0; b < len(w); b += typ.BlockBytes() {
		for _, off := range halves {
			if w[b+off+1]&0x7c == 0x7c {
				w[b+off+1] &^= 0x40
			}
		}
	}
}

// absDot is Σ|w·x| over the dequantized row: the scale of float rounding.
func absDot(typ Type, w []byte, x []float32) float64 {
	wf := make([]float32, len(x))
	if err := Dequantize(typ, wf, w); err != nil {
		panic(err)
	}
	var s float64
	for i := range x {
		s += math.Abs(float64(wf[i]) * float64(x[i]))
	}
	return s + 1e-3
}

// TestQ8BlocksMatchesGo: the assembly activation quantizer gives the same
// bytes, scales and sums as the Go one, zero blocks and ties included.
func TestQ8BlocksMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, bsize := range []int{QK, QKK} {
		for _, nb := range []int{1, 2, 7} {
			x := randRow(rng, nb*bsize)
			clear(x[:min(len(x), 32)])            // a zero block (or part of one)
			x[len(x)-1], x[len(x)-2] = 127, -63.5 // d = 1: ties at .5 round to even
			qa, qg := make([]int8, len(x)), make([]int8, len(x))
			da, dg := make([]float32, nb), make([]float32, nb)
			sa, sg := make([]int32, len(x)/16), make([]int32, len(x)/16)
			q8Blocks(x, qa, da, sa, bsize)
			q8BlocksGo(x, qg, dg, sg, bsize)
			if !reflect.DeepEqual(qa, qg) || !reflect.DeepEqual(da, dg) || !reflect.DeepEqual(sa, sg) {
				t.Fatalf("block %d × %d: quantizers differ\nd %v vs %v\nsums %v vs %v", nb, bsize, da, dg, sa, sg)
			}
			for i, q := range qg {
				if want := int8(math.RoundToEven(float64(x[i] / dg[i/bsize]))); dg[i/bsize] != 0 && abs(int(q)-int(want)) > 1 {
					t.Fatalf("value %d: %v quantized to %d, want about %d", i, x[i], q, want)
				}
			}
			if qg[len(x)-2] != -64 {
				t.Errorf("-63.5 with d = 1 quantized to %d, want -64 (ties to even)", qg[len(x)-2])
			}
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// TestDot2MatchesGo checks the two-row kernels against the pure-Go dot
// product of each row.
func TestDot2MatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, typ := range weightTypes {
		for _, blocks := range []int{1, 2, 3, 16} {
			in := blocks * max(actBlock(typ), 8)
			rs, _ := typ.RowSize(in)
			w := make([]byte, rs)
			for i := range w {
				w[i] = byte(rng.Uint32())
			}
			scrubNonFinite(typ, w)
			x := randRow(rng, 2*in)
			a := testActs(typ, x, 2*in)
			a0, a1 := a.row(0, in), a.row(1, in)
			var got [2]float32
			if !dot2SIMD(typ, w, &a, 0, in, got[:], 1) {
				continue
			}
			g0, g1 := got[0], got[1]
			w0, w1 := dotGo(typ, w, &a0), dotGo(typ, w, &a1)
			if math.Abs(float64(g0-w0)) > 1e-5*absDot(typ, w, x[:in]) || math.Abs(float64(g1-w1)) > 1e-5*absDot(typ, w, x[in:]) {
				t.Fatalf("%s, %d values: assembly %v, %v; Go %v, %v", typ, in, g0, g1, w0, w1)
			}
		}
	}
}

// TestDot4MatchesGo checks the four- and eight-row kernels against the
// pure-Go dot product of each row, for block counts with and without a
// single last block, on random weight bytes and quantized rows.
func TestDot4MatchesGo(t *testing.T) { forEachLevel(t, testDot4MatchesGo) }

func testDot4MatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, n := range []int{4, 8} {
		for _, typ := range weightTypes {
			for _, blocks := range []int{1, 2, 3, 4, 5, 8, 16, 17} {
				in := blocks * max(actBlock(typ), 8)
				for trial := range 4 {
					w := trialWeights(t, rng, typ, in, trial)
					x := randRow(rng, n*in)
					a := testActsRows(typ, x, n, in)
					got := make([]float32, n)
					if !dotNSIMD(n, typ, w, &a, 0, in, got, 1) {
						break
					}
					for r, g := range got {
						ar := a.row(r, in)
						if want := dotGo(typ, w, &ar); math.Abs(float64(g-want)) > 1e-5*absDot(typ, w, x[r*in:(r+1)*in]) {
							t.Fatalf("%s ×%d, %d values, trial %d, row %d: assembly %v, Go %v", typ, n, in, trial, r, g, want)
						}
					}
				}
			}
		}
	}
}

// TestDotRowsMatchesGo runs the single-row kernels over several
// consecutive weight rows in one call, as decode does, against the Go dot
// product of each row.
func TestDotRowsMatchesGo(t *testing.T) { forEachLevel(t, testDotRowsMatchesGo) }

func testDotRowsMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	for _, typ := range weightTypes {
		for _, blocks := range []int{1, 2, 3, 4, 5, 7, 9} {
			in := blocks * max(actBlock(typ), 8)
			rs, _ := typ.RowSize(in)
			nr := 1 + blocks*3%8
			w := make([]byte, nr*rs)
			for i := range w {
				w[i] = byte(rng.Uint32())
			}
			scrubNonFinite(typ, w)
			x := randRow(rng, in)
			a := testActs(typ, x, in)
			ar := a.row(0, in)
			got := make([]float32, nr)
			if !dotRowsSIMD(typ, w, &ar, got) {
				continue
			}
			for i := range got {
				row := w[i*rs : (i+1)*rs]
				if want := dotGo(typ, row, &ar); math.Abs(float64(got[i]-want)) > 1e-5*absDot(typ, row, x) {
					t.Fatalf("%s, %d values, row %d of %d: assembly %v, Go %v", typ, in, i, nr, got[i], want)
				}
			}
		}
	}
}

// forEachLevel runs f with the AVX-512 single-row kernels off (the AVX2
// ones, or Go where there are none) and, where this CPU and build have
// them, on: the dispatch picks one set, so each is tested by turning the
// other off.
func forEachLevel(t *testing.T, f func(*testing.T)) {
	saved := have512
	defer func() { have512 = saved }()
	have512 = false
	t.Run("avx2", f)
	if !saved {
		t.Log("no AVX-512 kernels in this build or on this CPU")
		return
	}
	have512 = true
	t.Run("avx512", f)
}

// TestDequantizeSIMDMatchesGo: the assembly dequantizers give the Go
// decoder's float32 bits exactly, on random bytes (so every scale, NaN
// and Inf included, and every quant) and on quantized rows, for row
// counts and lengths that leave the F16 and BF16 kernels a tail: the
// AVX2 kernels (F16, BF16 and Q8_0) and the AVX-512 ones.
func TestDequantizeSIMDMatchesGo(t *testing.T) { forEachLevel(t, testDequantizeSIMDMatchesGo) }

func testDequantizeSIMDMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, typ := range weightTypes {
		bs := typ.BlockSize()
		for _, blocks := range []int{1, 2, 3, 5, 8, 9, 17, 33} {
			for _, rows := range []int{1, 3, 5} {
				n := rows * blocks * bs
				if bs == 1 {
					n = rows * (blocks*8 + blocks%3) // not always a multiple of 8 or 16
				}
				size, _ := typ.RowSize(n)
				src := make([]byte, size)
				if rows == 3 {
					if err := Quantize(typ, src, randRow(rng, n)); err != nil {
						t.Fatal(err)
					}
				} else {
					for i := range src {
						src[i] = byte(rng.Uint32())
					}
				}
				got, want := make([]float32, n), make([]float32, n)
				if err := Dequantize(typ, got, src); err != nil {
					t.Fatal(err)
				}
				dequantGo(typ, want, src)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s, %d values: value %d is %#08x, Go gives %#08x", typ, n, i,
							math.Float32bits(got[i]), math.Float32bits(want[i]))
					}
				}
			}
		}
	}
}

// trialWeights returns a weight row of in values of typ for a test's
// trial: random bytes (non-finite scales scrubbed) on even trials, a
// quantized random row on odd ones.
func trialWeights(t *testing.T, rng *rand.Rand, typ Type, in, trial int) []byte {
	rs, _ := typ.RowSize(in)
	w := make([]byte, rs)
	if trial%2 == 0 {
		for i := range w {
			w[i] = byte(rng.Uint32())
		}
		scrubNonFinite(typ, w)
	} else if err := Quantize(typ, w, randRow(rng, in)); err != nil {
		t.Fatal(err)
	}
	return w
}
