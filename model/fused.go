package model

import (
	"fmt"

	"github.com/prefixd/prefixd/kernels"
)

// FusedBackend is a Backend with ops that each do in one step what
// Backend does in several, for a device that pays per kernel launch (a
// GPU). On one, Runner stacks the q, k and v projections into one matrix
// and the gate and up projections into another, so that each pair or triple of products is
// one product into a fused buffer; the results are those of the ops they
// replace, up to rounding.
type FusedBackend interface {
	Backend
	// MatMulAdd sets dst += x·Wᵀ: MatMul into a scratch buffer, then Add,
	// as one product accumulating into dst (the residual connection
	// through a GEMM's beta).
	MatMulAdd(dst, x kernels.Buf, w kernels.Weight)
	// RoPEPutKV reads each row of qkv as [q | k | v] (heads query heads,
	// then KVHeads key and value heads): it sets q to the row's queries
	// rotated as RoPE does, and stores its keys, rotated alike, and its
	// values in layer of the K/V pool as PutKV does. With qNorm and kNorm
	// (kernels.NoWeight for none; both or neither) each query and key
	// head is first normalised as HeadNorm does, with eps.
	RoPEPutKV(layer int, q, qkv kernels.Buf, heads int, theta float32, layout kernels.RopeLayout, factors, qNorm, kNorm kernels.Weight, eps float32)
	// SwiGLUFused sets dst = silu(gate)·up, each row of gu being [gate |
	// up], each half dst's width.
	SwiGLUFused(dst, gu kernels.Buf)
}

// stack returns ts one after another as one float32 tensor: matrices
// (as wide as each other) stacked row by row, vectors joined end to end.
// Each is read as float32 (a quantized one dequantized), which is how a
// GPU backend uploads them anyway.
func stack(ts ...kernels.Tensor) (kernels.Tensor, error) {
	var data []float32
	rows, cols := 0, ts[0].Cols
	for _, t := range ts {
		f, err := t.Float32s()
		if err != nil {
			return kernels.Tensor{}, err
		}
		switch {
		case ts[0].Rows == 1 && t.Rows == 1:
			cols = len(data) + len(f)
		case t.Cols != cols:
			return kernels.Tensor{}, fmt.Errorf("model: stacking a %d×%d matrix under %d-wide ones", t.Rows, t.Cols, cols)
		default:
			rows += t.Rows
		}
		data = append(data, f...)
	}
	if ts[0].Rows == 1 {
		rows = 1
	}
	return kernels.FromF32(data, rows, cols), nil
}
