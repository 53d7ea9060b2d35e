package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMatMulBatchInvariant: a row's output bits do not depend on how many
// activation rows the call has. For every weight type, random weights and
// activations, row counts 1 to 17 (the eight-, four-, two- and one-row
// kernels each taking the remainders) and ragged shapes (weight rows that
// leave the tiles and batches a remainder, one block per row or several),
// each row of an n-row MatMul equals bit for bit that row alone in a
// one-row MatMul: speculative decoding's verify pass and continuous
// batching then give a row the logits it gets on its own.
func TestMatMulBatchInvariant(t *testing.T) { forEachLevel(t, testMatMulBatchInvariant) }

// invariantTypes returns the weight types whose products are
// batch-invariant at the running kernel level: every type in pure Go (one
// dot product per row), Q8_0 and the K-quants with AVX2 and with AVX-512.
// The others' single-, two- and four-row kernels still sum in different
// orders.
func invariantTypes() []Type {
	if !haveSIMD {
		return weightTypes
	}
	return []Type{Q8_0, Q4_K, Q5_K, Q6_K}
}

func testMatMulBatchInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 30))
	for _, typ := range invariantTypes() {
		blk := max(actBlock(typ), 8)
		for _, sh := range []struct{ out, blocks int }{{9, 1}, {37, 3}, {70, 8}} {
			in := sh.blocks * blk
			w := randWeights(t, rng, typ, sh.out, in)
			x := randRow(rng, 17*in)
			single := make([]float32, 17*sh.out)
			m := NewMultiplier(nil)
			for r := range 17 {
				if err := m.MatMul(single[r*sh.out:(r+1)*sh.out], x[r*in:(r+1)*in], w, typ, 1, sh.out, in); err != nil {
					t.Fatal(err)
				}
			}
			dst := make([]float32, 17*sh.out)
			for n := 1; n <= 17; n++ {
				if err := m.MatMul(dst, x, w, typ, n, sh.out, in); err != nil {
					t.Fatal(err)
				}
				diff, first := 0, -1
				for i := range n * sh.out {
					if math.Float32bits(dst[i]) != math.Float32bits(single[i]) {
						if first < 0 {
							first = i
						}
						diff++
					}
				}
				if diff > 0 {
					t.Errorf("%s %d×%d, %d rows: %d of %d outputs differ from one-row calls; first dst[%d][%d] = %v, alone %v",
						typ, sh.out, in, n, diff, n*sh.out, first/sh.out, first%sh.out, dst[first], single[first])
				}
			}
		}
	}
}
