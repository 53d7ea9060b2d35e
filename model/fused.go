package model

import "github.com/prefixd/prefixd/kernels"

// FusedBackend is a Backend with ops that each do in one step what
// Backend does in several, for a device that pays per kernel launch (a
// GPU). Runner uses them where the backend has them; the results are
// those of the ops they replace, up to rounding.
type FusedBackend interface {
	Backend
	// MatMulAdd sets dst += x·Wᵀ: MatMul into a scratch buffer, then Add,
	// as one product accumulating into dst (the residual connection
	// through a GEMM's beta).
	MatMulAdd(dst, x kernels.Buf, w kernels.Weight)
	// RoPEPutKV is RoPE of q (heads heads) and of k (KVHeads heads) as
	// RoPE does them, then PutKV(layer, k, v): q ends rotated; the pool
	// holds the rotated k, which k itself need not.
	RoPEPutKV(layer int, q, k, v kernels.Buf, heads int, theta float32, layout kernels.RopeLayout, factors kernels.Weight)
}
