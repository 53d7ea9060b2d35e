package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPackedQ8_0 multiplies packed Q8_0 weights by batches of every size
// the kernels split differently (1, 4 and 8 rows a call, three left over
// taken as four) against the row-major kernels, and checks each row's
// results are the bits it gets alone (batch invariance), with a tail of
// rows past the last group of 16 and a pool that splits the groups.
func TestPackedQ8_0(t *testing.T) {
	if !havePacked() {
		t.Skip("no packed kernels on this CPU or build")
	}
	pool := newTestPool(3)
	defer pool.Close()
	rng := rand.New(rand.NewPCG(11, 11))
	for _, sh := range []struct{ out, in int }{{16, 32}, {37, 96}, {100, 768}, {256, 64}} {
		w := randWeights(t, rng, Q8_0, sh.out, sh.in)
		packed := PackQ8_0(w, sh.out, sh.in)
		if len(packed) != packedLen(sh.out, sh.in) {
			t.Fatalf("%dx%d: %d packed bytes, want %d", sh.out, sh.in, len(packed), packedLen(sh.out, sh.in))
		}
		x := randRow(rng, 17*sh.in)
		for _, rows := range []int{1, 2, 3, 4, 5, 7, 8, 9, 11, 17} {
			for _, par := range []ParallelFor{nil, pool.For} {
				m := NewMultiplier(par)
				got, want := make([]float32, rows*sh.out), make([]float32, rows*sh.out)
				if err := m.MatMuls(x, rows, sh.in, Product{Dst: got, W: w, Type: Q8_0, Out: sh.out, Packed: packed}); err != nil {
					t.Fatal(err)
				}
				if err := m.MatMul(want, x, w, Q8_0, rows, sh.out, sh.in); err != nil {
					t.Fatal(err)
				}
				for r := range rows {
					for o := range sh.out {
						g, e := got[r*sh.out+o], want[r*sh.out+o]
						// Both sum exact int32 block products in float32,
						// in another order: a few ulps of the terms' size.
						if d := math.Abs(float64(g - e)); d > 1e-4*math.Sqrt(float64(sh.in)) {
							t.Fatalf("%dx%d, %d rows: [%d][%d] = %v, row-major %v", sh.out, sh.in, rows, r, o, g, e)
						}
					}
				}
				for r := range rows {
					one := make([]float32, sh.out)
					if err := NewMultiplier(nil).MatMuls(x[r*sh.in:(r+1)*sh.in], 1, sh.in, Product{Dst: one, W: w, Type: Q8_0, Out: sh.out, Packed: packed}); err != nil {
						t.Fatal(err)
					}
					for o := range sh.out {
						if math.Float32bits(one[o]) != math.Float32bits(got[r*sh.out+o]) {
							t.Fatalf("%dx%d: row %d of %d gives %v, alone %v", sh.out, sh.in, r, rows, got[r*sh.out+o], one[o])
						}
					}
				}
			}
		}
	}
}

// TestPackedLengthChecked feeds MatMuls a packed matrix of the wrong size
// and a packed one of another type: an error, not a read out of bounds.
func TestPackedLengthChecked(t *testing.T) {
	if !havePacked() {
		t.Skip("no packed kernels on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(12, 12))
	w := randWeights(t, rng, Q8_0, 32, 64)
	packed := PackQ8_0(w, 32, 64)
	dst, x := make([]float32, 32), randRow(rng, 64)
	m := NewMultiplier(nil)
	if err := m.MatMuls(x, 1, 64, Product{Dst: dst, W: w, Type: Q8_0, Out: 32, Packed: packed[:len(packed)-1]}); err == nil {
		t.Error("a short packed matrix was accepted")
	}
	w4 := randWeights(t, rng, Q4_0, 32, 64)
	if err := m.MatMuls(x, 1, 64, Product{Dst: dst, W: w4, Type: Q4_0, Out: 32, Packed: packed}); err == nil {
		t.Error("a packed Q4_0 matrix was accepted")
	}
}

// TestPackNothing checks PackQ8_0 declines what its kernels cannot take:
// fewer than 16 rows, or rows that are not whole blocks.
func TestPackNothing(t *testing.T) {
	w := make([]byte, 8*34)
	if PackQ8_0(w, 8, 32) != nil {
		t.Error("8 rows packed")
	}
	if PackQ8_0(make([]byte, 16*34), 16, 33) != nil {
		t.Error("rows of 33 values packed")
	}
}
