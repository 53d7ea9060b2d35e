// Package launch says how each CUDA kernel of kernels/cuda/src is
// launched: its grid, block and parameters, checked before the launch. It
// is plain Go over a Device interface, so the same launch code runs on a
// GPU (kernels/cuda) and on the CPU emulator (kernels/cuda/emu), where CI
// checks it.
//
// The calls are shaped for a layer loop: one batch of rows per step;
// activations stay on the device (float32 between kernels, the element
// type where a matrix product reads them); each step's row positions and
// block tables are uploaded once (Step) and serve every layer.
package launch

import (
	"errors"
	"fmt"
	"math"

	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// Ptr is a device address. The zero Ptr is no buffer.
type Ptr uint64

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z int }

// Device launches kernels. Each parameter is one 8-byte slot holding the
// value in its low bytes (see P, I, L and F), which is what
// gorgonia.org/cu's Function.Launch passes to cuLaunchKernel.
type Device interface {
	// Launch runs kernel over grid with block threads per block.
	Launch(kernel string, grid, block Dim3, args ...uint64) error
	// DType is the element type the device's kernels were built for.
	DType() src.DType
}

// P, I, L and F pack a pointer, an int (C int), a long long and a float
// parameter.
func P(p Ptr) uint64     { return uint64(p) }
func I(v int) uint64     { return uint64(uint32(int32(v))) }
func L(v int64) uint64   { return uint64(v) }
func F(v float32) uint64 { return uint64(math.Float32bits(v)) }

// ErrShape means a launch's sizes are out of the kernels' range.
var ErrShape = errors.New("launch: shape out of range")

// rowThreads is the block size of the one-block-per-row kernels.
const rowThreads = 256

// maxRows bounds a step's rows and the rows of a kernel whose grid has
// them in its y or z dimension (swiglu, attention); a kernel with a block
// per row has them in x, up to math.MaxInt32. The device checks every
// launch against its limits too (Limits.Check).
const maxRows = 65535

func positive(name string, vs ...int) error {
	for _, v := range vs {
		if v <= 0 || v > math.MaxInt32 {
			return fmt.Errorf("%w: %s %d", ErrShape, name, v)
		}
	}
	return nil
}

func rowsOK(rows int) error {
	if rows <= 0 || rows > maxRows {
		return fmt.Errorf("%w: %d rows (1..%d)", ErrShape, rows, maxRows)
	}
	return nil
}

func row(rows int) Dim3  { return Dim3{rows, 1, 1} }
func threads(n int) Dim3 { return Dim3{n, 1, 1} }

// reduceThreads is the block of a kernel that reduces a row of n values
// (block_sum): whole warps, up to rowThreads, so that a short row (a
// head's q/k norm) does not leave most of the block idle.
func reduceThreads(n int) Dim3 { return threads(min(rowThreads, (n+31)/32*32)) }

// Embed sets out (float32 [rows][dim]) to the rows of table (element type,
// [vocab][dim]) named by tokens (int32 [rows], each checked by the caller
// to be below vocab).
func Embed(d Device, out, table, tokens Ptr, rows, dim int) error {
	if err := positive("rows and dim", rows, dim); err != nil {
		return err
	}
	return d.Launch("embed", row(rows), threads(rowThreads), P(out), P(table), P(tokens), I(dim))
}

// RMSNorm sets out (element type [rows][dim]) to x (float32 [rows][dim])
// normalised by its root mean square plus eps, times weight (float32
// [dim]).
func RMSNorm(d Device, out, x, weight Ptr, rows, dim int, eps float32) error {
	return rmsnorm(d, "rmsnorm", out, x, weight, rows, dim, eps)
}

// RMSNormF32 is RMSNorm with a float32 out, which may be x: with a row per
// head, the q/k norm (a step of 2,048 tokens of a model with 32 heads has
// 65,536 rows: a block each, in the grid's x dimension).
func RMSNormF32(d Device, out, x, weight Ptr, rows, dim int, eps float32) error {
	return rmsnorm(d, "rmsnorm_f32", out, x, weight, rows, dim, eps)
}

func rmsnorm(d Device, kernel string, out, x, weight Ptr, rows, dim int, eps float32) error {
	if err := positive("rows and dim", rows, dim); err != nil {
		return err
	}
	return d.Launch(kernel, row(rows), reduceThreads(dim), P(out), P(x), P(weight), I(dim), F(eps))
}

// RoPELayout says which elements of a head RoPE rotates together.
type RoPELayout int

const (
	// Adjacent pairs (x[2i], x[2i+1]): llama2.c and GGUF llama.
	Adjacent RoPELayout = iota
	// Halves pairs x[i] with x[i+headDim/2]: Hugging Face's rotate_half.
	Halves
)

// RoPE rotates heads heads of headDim floats at the start of each row of
// x (float32, row stride ld floats) by the row's position, pos (int32
// [rows]), with base theta, pair i's frequency divided by factors[i]
// (float32 [headDim/2], Llama 3's rope scaling) unless factors is 0. A
// fused QKV row rotates its q and k heads in one call: heads = nHeads +
// kvHeads.
func RoPE(d Device, layout RoPELayout, x Ptr, ld int, pos Ptr, rows, heads, headDim int, theta float32, factors Ptr) error {
	if err := errors.Join(positive("rows", rows), positive("heads", heads), positive("head dim", headDim)); err != nil {
		return err
	}
	if headDim%2 != 0 || heads*headDim > ld {
		return fmt.Errorf("%w: %d heads of %d in rows of %d (head dim must be even)", ErrShape, heads, headDim, ld)
	}
	k := "rope_gguf"
	if layout == Halves {
		k = "rope_halves"
	}
	return d.Launch(k, row(rows), threads(rowThreads), P(x), I(ld), P(pos), I(heads), I(headDim), F(theta), P(factors))
}

// SwiGLU sets out (element type [rows][hidden]) to silu(gate)·up, gate and
// up being float32 with row stride ld (the halves of one fused product
// have ld = 2·hidden).
func SwiGLU(d Device, out, gate, up Ptr, ld, rows, hidden int) error {
	if err := errors.Join(rowsOK(rows), positive("hidden", hidden)); err != nil {
		return err
	}
	if hidden > ld {
		return fmt.Errorf("%w: hidden %d over row stride %d", ErrShape, hidden, ld)
	}
	return d.Launch("swiglu", Dim3{(hidden + rowThreads - 1) / rowThreads, rows, 1}, threads(rowThreads),
		P(out), P(gate), P(up), I(ld), I(hidden))
}

// Add sets x += y over n float32s: the residual connection.
func Add(d Device, x, y Ptr, n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: add of %d floats", ErrShape, n)
	}
	// Enough blocks to fill a GPU; the kernel strides over the rest.
	blocks := min((n+rowThreads-1)/rowThreads, 4096)
	return d.Launch("add", threads(blocks), threads(rowThreads), P(x), P(y), L(int64(n)))
}

// AddBias adds bias (float32 [dim]) to every row of x (float32
// [rows][dim]).
func AddBias(d Device, x, bias Ptr, rows, dim int) error {
	if err := positive("rows and dim", rows, dim); err != nil {
		return err
	}
	return d.Launch("add_bias", row(rows), threads(rowThreads), P(x), P(bias), I(dim))
}

// GatherRows sets out (float32 [rows][dim]) to the rows of x named by idx
// (int32 [rows]): the rows whose logits the step needs.
func GatherRows(d Device, out, x, idx Ptr, rows, dim int) error {
	if err := positive("rows and dim", rows, dim); err != nil {
		return err
	}
	return d.Launch("gather_rows", row(rows), threads(rowThreads), P(out), P(x), P(idx), I(dim))
}

// Argmax sets out (int32 [rows]) to the index of each row's largest value
// of x (float32 [rows][n]), the lowest on ties as sample.Argmax, or -1 if
// the row holds NaN or an infinity.
func Argmax(d Device, out, x Ptr, rows, n int) error {
	if err := positive("rows and n", rows, n); err != nil {
		return err
	}
	return d.Launch("argmax", row(rows), threads(rowThreads), P(out), P(x), I(n))
}

// Graph is a recorded sequence of launches and matrix products (a CUDA
// graph captured from a stream): Launch runs it again with the
// parameters it was recorded with, reading and writing what the
// recorded addresses hold by then, so a caller may replay it only for
// work that would launch exactly the same. On a GPU both methods run on
// the device's thread, as the launches they stand for.
type Graph interface {
	// Launch queues the recorded work, in order, after the work queued
	// before it.
	Launch() error
	// Destroy releases the graph; it must not be launched again.
	Destroy() error
}
