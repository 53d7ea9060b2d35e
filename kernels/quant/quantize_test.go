package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randRow returns n seeded values, normally distributed with a few
// outliers, as model weights are.
func randRow(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		if rng.IntN(64) == 0 {
			x[i] *= 4
		}
	}
	return x
}

// TestQuantizeRoundTrip quantizes random rows and checks the decoded values
// are near the originals: the error of each value is bounded by the step
// of its block (its d times its sub-block scale), which the test derives
// from the row's range, not from the code.
func TestQuantizeRoundTrip(t *testing.T) {
	// Worst error relative to the largest magnitude in a block of the
	// format's size: half a step of the coarsest grid each format allows
	// (the K-quants' 6-bit scales add their own rounding).
	rel := map[Type]float64{F32: 0, F16: 1.0 / 2048, BF16: 1.0 / 256, Q8_0: 0.5/127 + 1e-3,
		Q4_0: 0.5/8 + 1e-3, Q5_0: 0.5/16 + 1e-3, Q4_1: 1.0/15 + 1e-3, Q5_1: 1.0/31 + 1e-3,
		Q4_K: 2.5 / 15, Q5_K: 2.5 / 31, Q6_K: 2.0 / 32, Q8_K: 0.5/127 + 1e-3}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range allTypes {
		n := 4 * QKK
		x := randRow(rng, n)
		size, _ := typ.RowSize(n)
		buf := make([]byte, size)
		if err := Quantize(typ, buf, x); err != nil {
			t.Fatal(err)
		}
		y := make([]float32, n)
		if err := Dequantize(typ, y, buf); err != nil {
			t.Fatal(err)
		}
		bs := max(typ.BlockSize(), QK)
		var sq float64
		for b := 0; b < n; b += bs {
			_, amax := absMax(x[b : b+bs])
			for i := b; i < b+bs; i++ {
				e := math.Abs(float64(x[i] - y[i]))
				sq += e * e
				if limit := rel[typ]*2*float64(amax) + 1e-6; typ.BlockSize() > 1 && e > limit {
					t.Fatalf("%s value %d: %v decoded as %v (error %.4f over %.4f)", typ, i, x[i], y[i], e, limit)
				} else if typ.BlockSize() == 1 && e > rel[typ]*math.Abs(float64(x[i])) {
					t.Fatalf("%s value %d: %v decoded as %v", typ, i, x[i], y[i])
				}
			}
		}
		t.Logf("%s: RMS error %.4f", typ, math.Sqrt(sq/float64(n)))
	}
}

// TestQuantizeExact: values on a format's grid survive unchanged.
func TestQuantizeExact(t *testing.T) {
	x := make([]float32, QK)
	// Q4_0: max magnitude −4 at i = 0 gives d = 0.5, so multiples of 0.5
	// in [−4, 3.5] are exact.
	for i := range x {
		x[i] = float32(i%16-8) * 0.5
	}
	buf := make([]byte, 18)
	y := make([]float32, QK)
	if err := Quantize(Q4_0, buf, x); err != nil {
		t.Fatal(err)
	}
	if err := Dequantize(Q4_0, y, buf); err != nil {
		t.Fatal(err)
	}
	for i := range x {
		if x[i] != y[i] {
			t.Fatalf("Q4_0 value %d: %v decoded as %v", i, x[i], y[i])
		}
	}
}
