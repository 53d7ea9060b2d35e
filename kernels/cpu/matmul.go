package cpu

import (
	"fmt"

	"github.com/prefixd/prefixd/kernels"
)

// MatMul sets c[m×n] = a[m×k] · bᵀ, where b is [n×k] row-major: weights
// stored output-major (out×in), as llama2.c and GGUF store them. It covers
// prefill (m = tokens) and batched decode (m = rows; m = 1 is a
// matrix-vector product). b needs no packing: the kernel reads four of its
// rows at a time in place. The output columns are split across the
// workers in groups of four; a small product (under 64K multiply-adds)
// runs on the calling goroutine. MatMul allocates nothing; it panics if a,
// b or c is shorter than the shape says.
func MatMul(w *Workers, c, a, b []float32, m, n, k int) {
	if m <= 0 || n <= 0 {
		return
	}
	if len(c) < m*n || len(a) < m*k || len(b) < n*k {
		panic(fmt.Sprintf("cpu: MatMul %d×%d×%d with len(c)=%d len(a)=%d len(b)=%d", m, n, k, len(c), len(a), len(b)))
	}
	w.matMul(matmulTask{c: c, a: a, b: b, m: m, n: n, k: k})
}

// matMulDirect is MatMul for b of F16 or BF16 values, the bytes h
// of type t, which the AVX-512 kernels convert as they load them: no
// float32 copy of b is made. It requires directGemm(t, n).
func matMulDirect(w *Workers, c, a []float32, h []byte, t kernels.DType, m, n, k int) {
	w.matMul(matmulTask{c: c, a: a, h: h, t: t, m: m, n: n, k: k})
}

// matMul runs t over the pool in groups of four columns, or on the
// calling goroutine if it is small.
func (w *Workers) matMul(t matmulTask) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mm = t
	if t.m*t.n*t.k < minParallelFMAs {
		w.mm.run(0, 0, (t.n+3)/4)
	} else {
		w.forLocked((t.n+3)/4, &w.mm)
	}
	w.mm = matmulTask{} // do not keep the caller's slices alive
}

// minParallelFMAs is the smallest MatMul worth splitting across the pool:
// handing a part to another worker costs about half a microsecond, the time
// of some 25,000 multiply-adds on one core.
const minParallelFMAs = 1 << 16

// matmulTask is one MatMul or matMulDirect call; a part computes
// four-column groups [lo, hi).
type matmulTask struct {
	c, a, b []float32
	h       []byte        // matMulDirect's b, whose values are of type t
	t       kernels.DType // (then b is nil)
	m, n, k int
}

func (t *matmulTask) run(_, lo, hi int) {
	j0, j1 := 4*lo, min(4*hi, t.n)
	if t.h != nil {
		directGemmCols(t.c, t.a, t.h, t.t, t.m, j0, j1, t.n, t.k)
		return
	}
	gemm(t.c[j0:], t.n, t.a, t.k, t.b[j0*t.k:], t.k, t.m, j1-j0, t.k)
}
