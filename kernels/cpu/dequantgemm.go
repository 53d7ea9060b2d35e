package cpu

import (
	"fmt"
	"math"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
)

// gemmRows is the least activation rows for which a product on weights
// of type t (not F32) runs this package's GEMM: on the weights as they
// are where its kernels convert t as they load it (directGemm: F16,
// BF16 and Q8_0 with AVX-512, Q8_0 below deqGemmRows), else on float32
// groups of their rows dequantized for it. Below it, kernels/quant's
// integer products stream the quantized bytes (with AVX-512, four
// activation rows per weight row). The crossover depends on how fast t converts or
// dequantizes (quant.FastDequantize) and on kernels/quant's kernel for t.
// Measured on a 2-core Zen 5, 2 workers, GFLOP/s of the GEMM path against
// kernels/quant's:
//   - F16 and BF16, read directly: 4 rows. With the weights streaming
//     from memory (BenchmarkDecodeGemm, 85M weights, medians of 3): at 4
//     rows 131-133 vs 69-72, at 3 rows 56-59 vs 82-88, at 2 43-44 vs
//     72-77, at 1 20-22 vs 45-46 (the one-row tiles do not prefetch);
//     in L3 (BenchmarkQuantizedMatMul, 2048×768) the GEMM wins from 2
//     rows (F16 168 vs 100, BF16 179 vs 100), and at 16 runs 390 vs 113
//     (dequantizing first: 268).
//   - the other types as measured with BenchmarkQuantizedMatMul under a
//     load of 2, two runs. Q4_1, Q5_0, Q5_1 with AVX-512 dequantizers,
//     whose several-row products pair rows: 4 rows (Q5_0 78 vs 47; at 3
//     rows the GEMM loses, 41-46 vs 39-72; at 16 it is 1.6-2.9x
//     kernels/quant);
//   - Q8_0, read directly (up to deqGemmRows), whose AVX-512 VNNI
//     kernels take four rows per weight row: 8 rows. With the weights
//     streaming from memory (BenchmarkDecodeGemm, medians of 5): at 4
//     rows 195 vs 207, at 6 177 vs 164, at 8 216 vs 191 (dequantizing
//     first: 118), at 16 256 (191); in L3 (BenchmarkQuantizedMatMul,
//     medians of 5) at 6 141 vs 176, at 8 195 vs 212, at 16 274 vs 230:
//     8 rows for decode batches, whose weights stream from memory.
//   - Q4_0, whose VNNI kernels are Q8_0's too: 8 rows (at 6: 146-160 vs
//     166-198; at 8: 237-239 vs 214-223; at 12: 275-281 vs 183-245);
//   - the K-quants with AVX-512: never. Their four-row VNNI kernels,
//     which take a run of 32 weight rows per call in assembly, beat
//     dequantizing for the GEMM at every row count measured (one
//     worker's CPU time, 2048×768, GFLOP/s: Q4_K 210 vs 143 at 16 rows,
//     207 vs 173 at 32; Q5_K and Q6_K alike), up to a 512-token prompt:
//     the Q4_K_M file's Prefill512 1645-1714 -> 1873 tok/s and
//     DecodeBatch32 846-922 -> 1126-1182 (2 workers, 3 interleaved
//     rounds);
//   - without AVX-512, dequantized by scalar loops at about 1 Gvalue/s:
//     64 rows (Q4_K 91 vs 87 at 64, 122 vs 86 at 128), Q6_K 128 (64
//     rows 46 vs 86, 128 about even, 256 96 vs 76).
func gemmRows(t kernels.DType) int {
	switch {
	case !quant.FastDequantize(t) && t == kernels.Q6_K:
		return 128
	case !quant.FastDequantize(t):
		return 64
	case t == kernels.Q4_K || t == kernels.Q5_K || t == kernels.Q6_K:
		return math.MaxInt
	case t == kernels.Q8_0 || t == kernels.Q4_0:
		return 8
	}
	return 4
}

// deqGemmRows is the least activation rows from which a product on
// weights of type t that directGemm reads runs on float32 groups of
// their rows dequantized first after all: Q8_0's load (a multiply by the
// block's scale per value, on the pipes of the multiply-adds) slows every
// 4-row panel of a tile, where dequantizing slows a group of rows once
// for all of them. Measured on a 2-core Zen 5, 2 workers, GFLOP/s of the
// direct GEMM against the dequantizing one, medians of 5: with the
// weights streaming from memory (BenchmarkDecodeGemm, as in a decode
// batch or a prefill chunk of a model larger than the caches) at 16 rows
// 256 vs 191, 24 rows 263 vs 226, 32 rows 275 vs 260, 48 rows 284 vs 283,
// 64 rows 283 vs 316; in L3 (BenchmarkQuantizedMatMul) the crossover is
// lower: 16 rows 274 vs 267, 32 rows 247 vs 315. F16 and BF16 convert
// in one instruction and stay direct.
func deqGemmRows(t kernels.DType) int {
	if t == kernels.Q8_0 {
		return 48
	}
	return math.MaxInt
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
			if err := quant.Dequantize(t.w.Type, buf[(j-j0)*k:(j-j0+1)*k], t.w.Row(j)); err != nil {
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
