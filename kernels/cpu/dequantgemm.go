package cpu

import (
	"fmt"
	"math"
	"sync/atomic"

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
// for t: each crossover below was measured with BenchmarkQuantizedMatMul
// and the model files' prompts (the figures are in BENCHMARKS.md, "Where
// the GEMM takes over"). The rule, by case: F16/BF16 without AVX-512 from
// 8 rows; K-quants with four-row integer kernels never; Q8_0 with them
// but without AVX-512 from 64; types dequantized by scalar loops from 64
// rows (Q6_K 128); K-quants and, with AVX-512, Q8_0 never; Q4_0 from 32;
// everything else from 4. Below the crossover a row's products are the
// same bits at every row count (kernels/quant's batch invariance, which
// speculative decoding's verify rows and continuous batching rely on);
// the GEMM sums in another order, so Q8_0 without AVX-512 takes the
// integer kernels up to 64 rows, where the GEMM on AVX2-dequantized rows
// was measured even with them (BENCHMARKS.md), not from 4.
func gemmRows(t kernels.DType) int {
	switch {
	case (t == kernels.F16 || t == kernels.BF16) && !useAVX512 && quant.FastDequantize(t):
		return 8
	case (t == kernels.Q4_K || t == kernels.Q5_K || t == kernels.Q6_K) && quant.QuadRows(t):
		return math.MaxInt
	case t == kernels.Q8_0 && !useAVX512 && quant.QuadRows(t):
		return 64
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
// The parts take the groups one at a time from next, not in fixed shares:
// a prompt's product is bound by the cores' arithmetic, so a core slowed
// by another program (or its own clock) takes fewer groups instead of
// holding the loop up. Each group's columns are the same sums whichever
// part computes them.
type deqGemm struct {
	c, a    []float32
	w       kernels.Tensor
	m       int
	scratch [][]float32  // one deqGroup×w.Cols buffer per part
	next    atomic.Int64 // the next group to take
}

func (t *deqGemm) run(part, _, _ int) {
	n, k := t.w.Rows, t.w.Cols
	buf := t.scratch[part]
	for {
		g := int(t.next.Add(1) - 1)
		if g*deqGroup >= n {
			return
		}
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
	b.deq.next.Store(0)
	if b.w == nil {
		b.deq.run(0, 0, 0)
	} else {
		b.w.For(min(parts, (w.Rows+deqGroup-1)/deqGroup), b.deqRun)
	}
	b.deq.c, b.deq.a, b.deq.w = nil, nil, kernels.Tensor{} // keep no caller's slices alive
}
