package model

import (
	"github.com/prefixd/prefixd/batch"
	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/cpu"
)

// Backend is what the forward pass needs from a compute device: the
// operations of a Llama-family layer over activation buffers the backend
// owns (device memory on a GPU; the model only passes their handles),
// weights uploaded once into the backend's own form, and the paged K/V
// pool. Runner.Forward is written once over it, so kernels/cpu and
// kernels/cuda are siblings. Its types live in the leaf packages batch and
// kernels, so a backend implements it without importing model.
//
// A step is one batch: Begin hands over the rows (tokens, positions, block
// tables, which rows want logits) once, every op then covers all of the
// step's token rows, one row per token in batch order, and Logits ends the
// step. Ops on a GPU may run asynchronously; Logits returns when the
// logits are on the host. An op given handles whose widths do not fit
// panics (a broken caller invariant); a device fault during a step is
// reported by that step's Logits. A Backend is used by one goroutine.
type Backend interface {
	// Upload makes t available to ops as the returned handle, in t's
	// element type; it fails for a type the backend cannot compute on. It
	// never returns kernels.NoWeight.
	Upload(t kernels.Tensor) (kernels.Weight, error)
	// Buffer declares an activation buffer of cols values per token row.
	Buffer(cols int) kernels.Buf
	// NewKV allocates the K/V pool every later step reads and writes,
	// replacing any earlier one. Its Storage is the block pool's, whose
	// CopyBlocks serves copy-on-write.
	NewKV(cfg kernels.KVConfig) (blockstore.Storage, error)
	// Begin starts a step over rows, which fit the model and the K/V
	// pool (Runner validates them). The backend may keep rows until the
	// next Begin.
	Begin(rows []batch.Row)
	// Embed sets each token row of dst to its token's row of table.
	Embed(dst kernels.Buf, table kernels.Weight)
	// RMSNorm sets each row of dst to RMSNorm(row of x, eps)·weight; dst
	// may be x.
	RMSNorm(dst, x kernels.Buf, weight kernels.Weight, eps float32)
	// HeadNorm applies RMSNorm with weight, one head wide, to each of the
	// heads heads of every row of x, in place.
	HeadNorm(x kernels.Buf, heads int, weight kernels.Weight, eps float32)
	// MatMul sets dst = x·Wᵀ, W being out×in, on W's element type.
	MatMul(dst, x kernels.Buf, w kernels.Weight)
	// AddBias adds bias, one row as wide as x, to every row of x.
	AddBias(x kernels.Buf, bias kernels.Weight)
	// RoPE rotates every row of x (heads heads, each x's width/heads
	// wide) in place for its token's position, pairing elements as layout
	// says: pair i turns by pos·theta^(-2i/width)/factors[i] radians,
	// factors being one row of width/2 frequency divisors (Llama 3's rope
	// scaling), or all 1 when factors is kernels.NoWeight.
	RoPE(x kernels.Buf, heads int, theta float32, layout kernels.RopeLayout, factors kernels.Weight)
	// PutKV stores each token row of k and v in layer of the K/V pool,
	// at its position's slot of its row's block table.
	PutKV(layer int, k, v kernels.Buf)
	// Attention sets dst to causal, grouped-query attention of the query
	// rows q (heads heads, each over KV head h/(heads/KVHeads)) scaled by
	// 1/sqrt(head width), over layer's K/V of each row's positions up to
	// its own, read through the row's block table after PutKV.
	Attention(dst, q kernels.Buf, layer, heads int)
	// SwiGLU sets dst = silu(gate)·up element-wise; dst may be gate.
	SwiGLU(dst, gate, up kernels.Buf)
	// Add sets dst += x.
	Add(dst, x kernels.Buf)
	// Narrow keeps, in each of bufs, only the token rows that want logits
	// (the last LogitRows of each row), packed in order, and every later op of the
	// step but Attention (which may not follow) covers just those rows.
	// The other rows' values in any buffer are lost. After the last
	// layer's attention, whose K/V PutKV has stored, the other token rows
	// feed nothing: Runner narrows there, so a prompt's last layer runs
	// its output projection and feed-forward on one row, not every token.
	Narrow(bufs ...kernels.Buf)
	// Logits applies RMSNorm (weight norm) and then the classifier to the
	// token rows that want logits (the last LogitRows of each row; after Narrow, to each
	// token row left) and returns classifier-rows logits for each, in row
	// order, on the host. The slice is the backend's, valid until the
	// next step.
	Logits(x kernels.Buf, norm, classifier kernels.Weight, eps float32) ([]float32, error)
}

var _ Backend = (*cpu.Backend)(nil)

// GroupedBackend is a Backend that multiplies one activation buffer by
// several weights in one op. The CPU backend then quantizes x once for
// all of them and splits their output rows over its workers in one
// parallel loop, which waits once for its slowest worker; Runner groups
// each layer's q, k and v projections, and its gate and up projections,
// so.
type GroupedBackend interface {
	Backend
	// MatMuls sets each dsts[i] = x·ws[i]ᵀ (one buffer per weight), as
	// MatMul on each would.
	MatMuls(dsts []kernels.Buf, x kernels.Buf, ws []kernels.Weight)
}

var _ GroupedBackend = (*cpu.Backend)(nil)
