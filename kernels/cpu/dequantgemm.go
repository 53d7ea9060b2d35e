package cpu

import (
	"fmt"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
)

// gemmRows is the least activation rows for which a product on weights
// of type t (not F32) dequantizes them into float32, a group of rows at a
// time, and runs this package's GEMM: its register tiles reuse each
// weight row across four activation rows, which kernels/quant's
// row-at-a-time products (built for decode) do not, and the
// dequantization is paid once for all the rows. Below it, the integer
// products of kernels/quant stream the quantized bytes. The crossover
// depends on how fast t dequantizes. Measured with
// BenchmarkQuantizedMatMul (2048×768, 2 workers on a loaded 2-core Zen 5;
// GFLOP/s of the GEMM path against kernels/quant's):
//   - F16, BF16, Q8_0 with the AVX-512 converters: 4 rows (F16 72 vs 57,
//     Q8_0 62-76 vs 59-67; 3 rows about even; 16 rows 143 vs 57 and 156
//     vs 76);
//   - Q4_K and Q6_K with their AVX-512 converters, slower than the
//     others': 8 rows (Q4_K: 4 rows 61 vs 71, 8 95 vs 82, 16 137 vs 64;
//     Q6_K: 4 rows about even, 8 123 vs 101, 16 187 vs 132);
//   - Q6_K without it, its scalar dequantization the slowest: 128 rows
//     (64 rows 46 vs 86, 128 about even, 256 96 vs 76);
//   - the others, and all types without AVX-512, dequantized by scalar
//     loops at about 1 Gvalue/s: 64 rows (Q4_K so: 91 vs 87 at 64, 122
//     vs 86 at 128).
func gemmRows(t kernels.DType) int {
	switch {
	case !simdDequantType(t) && t == kernels.Q6_K:
		return 128
	case !simdDequantType(t):
		return 64
	case t == kernels.Q4_K || t == kernels.Q6_K:
		return 8
	}
	return 4
}

// deqGroup is how many weight rows a worker dequantizes at a time: 96
// rows of a 768-wide matrix are 288 KiB of float32, in L2 for the GEMM
// that reads them at once, and a multiple of its tiles' six columns.
// Groups of 48 measured up to 20% slower, 12 or 24 slower still.
const deqGroup = 96

// deqGemm is one product on dequantized weight groups; run is a part.
type deqGemm struct {
	c, a    []float32
	w       kernels.Tensor
	m       int
	scratch [][]float32 // one deqGroup×w.Cols buffer per part
}

func (t *deqGemm) run(part, lo, hi int) {
	n, k := t.w.Rows, t.w.Cols
	buf := t.scratch[part]
	for g := lo; g < hi; g++ {
		j0, j1 := g*deqGroup, min((g+1)*deqGroup, n)
		for j := j0; j < j1; j++ {
			if err := dequantRow(t.w.Type, buf[(j-j0)*k:(j-j0+1)*k], t.w.Row(j)); err != nil {
				panic(fmt.Sprintf("cpu: dequantize: %v", err)) // Upload checked the shape
			}
		}
		gemm(t.c[j0:], n, t.a, k, buf, k, t.m, j1-j0, k)
	}
}

// deqMatMul sets c[m×n] = a[m×k]·Wᵀ for a weight w of n rows of k values
// of a type other than F32, through float32 groups of its rows.
func (b *Backend) deqMatMul(c, a []float32, w kernels.Tensor, m int) {
	parts := 1
	if b.w != nil {
		parts = b.w.N()
	}
	for len(b.deq.scratch) < parts {
		b.deq.scratch = append(b.deq.scratch, nil)
	}
	for i := range parts {
		b.deq.scratch[i] = grow(b.deq.scratch[i], deqGroup*w.Cols)
	}
	b.deq.c, b.deq.a, b.deq.w, b.deq.m = c, a, w, m
	groups := (w.Rows + deqGroup - 1) / deqGroup
	if b.w == nil {
		b.deq.run(0, 0, groups)
	} else {
		b.w.For(groups, b.deqRun)
	}
	b.deq.c, b.deq.a, b.deq.w = nil, nil, kernels.Tensor{} // keep no caller's slices alive
}

// dequantRow sets dst to the values of the weight row src of type t:
// through the AVX-512 converters for F16, BF16, Q8_0, Q4_K and Q6_K where
// the CPU has them (30 to 40 Gvalues/s a Zen 5 core, 13 for Q4_K and 20
// for Q6_K, against about 1 for quant.Dequantize's scalar loops, and
// equal to its results), else through quant.Dequantize.
func dequantRow(t kernels.DType, dst []float32, src []byte) error {
	if simdDequant(t, dst, src) {
		return nil
	}
	return quant.Dequantize(t, dst, src)
}
