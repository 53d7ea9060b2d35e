package cpu

import (
	"fmt"
	"math"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
)

// gemmRows is the least activation rows for which a product on weights
// of type t (not F32) runs this package's GEMM: on the weights as they
// are where its kernels convert t as they load it (directGemm: F16 and
// BF16 with AVX-512), else on float32 groups of their rows dequantized
// for it. Below it, kernels/quant's integer products stream the
// quantized bytes (with AVX-512, eight or four activation rows per
// weight block unpacked). The crossover depends on how fast t converts
// or dequantizes (quant.FastDequantize) and on kernels/quant's kernel
// for t. Measured on a 2-core Zen 5, 2 workers, GFLOP/s of the GEMM path
// against kernels/quant's (BenchmarkQuantizedMatMul, 2048×768, unless
// named), and the 110M model files' tok/s (3 interleaved rounds):
//   - F16 and BF16, read directly: 4 rows. With the weights streaming
//     from memory (BenchmarkDecodeGemm, 85M weights, medians of 3): at 4
//     rows 131-133 vs 69-72, at 3 rows 56-59 vs 82-88, at 2 43-44 vs
//     72-77, at 1 20-22 vs 45-46 (the one-row tiles do not prefetch);
//     in L3 the GEMM wins from 2 rows (F16 168 vs 100, BF16 179 vs 100),
//     and at 16 runs 390 vs 113 (dequantizing first: 268).
//   - Q4_1, Q5_0 and Q5_1, which have AVX-512 dequantizers and no
//     several-row integer kernels: 4 rows (Q5_0 at 8 rows 204 vs 79, at
//     16 290 vs 81).
//   - the K-quants with AVX-512: never, their eight-row VNNI kernels
//     winning at every row count measured, 16 to 512 (Q4_K 431 vs 279 at
//     16 rows, 519 vs 394 at 128, 511 vs 382 at 256; Q6_K alike); the
//     Q4_K_M file's Prefill512 went from 1645-1714 to 1873 tok/s with
//     the four-row ones.
//   - Q8_0 with AVX-512: never. In L3 the GEMM is even at 128 rows and
//     ahead at 256 (404 vs 359), but on the model, whose weights stream
//     from memory, the integer kernels are as fast at 16 rows
//     (DecodeBatch16 900-990 vs 890-929 tok/s), faster at 32 (1107-1129
//     vs 918-942) and on a prompt (Prefill512 1761-1769 vs 1603-1714).
//   - Q4_0 with AVX-512: 32 rows (at 16, 303 vs 278; at 32, 310 vs 339;
//     at 128, 330 vs 392).
//   - F16 and BF16 without AVX-512, converted by kernels/quant's AVX2
//     (F16C) dequantizers: 8 rows, between the AVX-512 path's 4 and the
//     scalar dequantizers' 64. With PREFIXD_CPU=avx2 under a load average
//     of 22 on the 2 cores, the best of 4 runs spread too wide to place
//     it closer: at 4 rows F16 35 vs 51, BF16 4.6 vs 5.2; at 8 F16 50 vs
//     34, BF16 19 vs 10; at 16 F16 19 vs 49, BF16 64 vs 55.
//   - the K-quants without AVX-512, through kernels/quant's AVX2
//     four-row kernels (quant.QuadRows): never. Against the GEMM on rows
//     dequantized by scalar loops (about 1 Gvalue/s), PREFIXD_CPU=avx2,
//     load average 3.5 (2 runs): Q4_K 191-238 vs 46-51 at 16 rows,
//     236-241 vs 119 at 64, 236-242 vs 162-174 at 256; Q5_K 215-220 vs
//     37, 218-223 vs 67-68, 177-180 vs 155-157; Q6_K 103-126 vs 13-22,
//     231-232 vs 68-70, 232-237 vs 132-140.
//   - the other types without AVX-512 (and the K-quants without the
//     four-row kernels), dequantized by scalar loops at about 1
//     Gvalue/s: 64 rows (Q4_K, before its four-row kernels, 91 vs 87 at
//     64, 122 vs 86 at 128), Q6_K 128 (64 rows 46 vs 86, 128 about even,
//     256 96 vs 76).
//   - Q8_0 without AVX-512: 64 rows. Its AVX2 four-row kernels won at 64
//     rows against the GEMM on rows dequantized in Go (143-148 vs
//     130-131) but lost from 128 (load 2.9, 3 runs: 54-59 vs 70-75 at
//     128, 68-70 vs 78-83 at 256, 69-71 vs 92-98 at 512): its products
//     take as many multiplies per value as the GEMM's FMAs. Dequantized by
//     AVX2 (30-50 times the Go loop), the GEMM is even with them at 32
//     and 64 rows (load 10.6, 3 runs: 31-36 vs 31-33, 28-30 vs 28-30)
//     and ahead from 128 (16-34 vs 20-23; at 512 30-38 vs 23-24).
func gemmRows(t kernels.DType) int {
	switch {
	case (t == kernels.F16 || t == kernels.BF16) && !useAVX512 && quant.FastDequantize(t):
		return 8
	case (t == kernels.Q4_K || t == kernels.Q5_K || t == kernels.Q6_K) && quant.QuadRows(t):
		return math.MaxInt
	case !quant.FastDequantize(t) && t == kernels.Q6_K:
		return 128
	case !quant.FastDequantize(t):
		return 64
	case t == kernels.Q4_K || t == kernels.Q5_K || t == kernels.Q6_K || t == kernels.Q8_0 && useAVX512:
		return math.MaxInt
	case t == kernels.Q4_0:
		return 32
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
