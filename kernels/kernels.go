// Package kernels is the vocabulary every compute backend shares
// (kernels/cpu today, kernels/cuda next): weight tensors as loaded, with
// their element type; the opaque handles a backend issues for uploaded
// weights and for the activation buffers it owns; the K/V pool's shape;
// and the RoPE layouts.
//
// The interface over these types, model.Backend, lives in model, beside
// the layer loop that is its only caller. A backend implements it without
// importing model (Go interfaces are satisfied structurally), so model
// imports the backends and no import cycle forms; these shared types sit
// in this leaf package because both sides must name them.
package kernels

import (
	"fmt"
	"unsafe"

	"github.com/prefixd/prefixd/kernels/quant"
)

// DType is a tensor's element type: ggml's type ids (quant.Type), so a
// loader keeps a tensor's type and bytes as the file has them and a
// backend hands them to kernels/quant unchanged. It is one enum with
// quant's, not a second numbering to keep in step.
type DType = quant.Type

// The element types a loader yields, ggml's (see kernels/quant for their
// block layouts).
const (
	F32  = quant.F32
	F16  = quant.F16
	BF16 = quant.BF16
	Q4_0 = quant.Q4_0
	Q4_1 = quant.Q4_1
	Q5_0 = quant.Q5_0
	Q5_1 = quant.Q5_1
	Q8_0 = quant.Q8_0
	Q4_K = quant.Q4_K
	Q5_K = quant.Q5_K
	Q6_K = quant.Q6_K
)

// Tensor is a weight as loaded: Rows×Cols elements of Type, row-major (a
// matrix is stored out×in, as llama2.c and GGUF store it; a vector has
// one row), in Data in Type's layout: each row Type.RowSize(Cols) bytes
// (for F32, host-order float32s; for a quantized type, whole blocks).
// Data may be a view of a mapped file; a backend's Upload reads it and
// may keep referring to it, so it must stay valid and unchanged while the
// backend is in use.
type Tensor struct {
	Type       DType
	Rows, Cols int
	Data       []byte
}

// Check returns an error unless Type is a weight type and Data holds
// exactly Rows rows of Cols values of it.
func (t Tensor) Check() error {
	if !t.Type.Valid() || t.Type == quant.Q8_K {
		return fmt.Errorf("kernels: %v is not a weight type", t.Type)
	}
	if t.Rows < 0 || t.Cols < 0 {
		return fmt.Errorf("kernels: %d×%d tensor", t.Rows, t.Cols)
	}
	row, err := t.Type.RowSize(t.Cols)
	if err != nil {
		return fmt.Errorf("kernels: %w", err)
	}
	if len(t.Data) != row*t.Rows {
		return fmt.Errorf("kernels: %d bytes for a %d×%d %v tensor, want %d", len(t.Data), t.Rows, t.Cols, t.Type, row*t.Rows)
	}
	return nil
}

// Row returns the bytes of row i.
func (t Tensor) Row(i int) []byte {
	n := len(t.Data) / max(t.Rows, 1)
	return t.Data[i*n : (i+1)*n]
}

// Float32s returns the tensor's values as float32, Rows·Cols of them:
// a view of Data for an aligned F32 tensor, else a new slice with every
// row dequantized. It fails where Check does.
func (t Tensor) Float32s() ([]float32, error) {
	if err := t.Check(); err != nil {
		return nil, err
	}
	if t.Type == F32 {
		if f, err := t.F32(); err == nil {
			return f, nil
		}
	}
	out := make([]float32, t.Rows*t.Cols)
	for i := range t.Rows {
		if err := quant.Dequantize(t.Type, out[i*t.Cols:(i+1)*t.Cols], t.Row(i)); err != nil {
			return nil, fmt.Errorf("kernels: %w", err)
		}
	}
	return out, nil
}

// Convert returns t's values in type typ: t itself when it has that type,
// else a new tensor of its values converted row by row (F16 and BF16
// rounded to nearest even, quantized types by kernels/quant's reference
// quantizers, so they hold the values only approximately). It fails where
// Check does, and for a typ whose blocks do not divide Cols.
func (t Tensor) Convert(typ DType) (Tensor, error) {
	if t.Type == typ {
		return t, t.Check()
	}
	x, err := t.Float32s()
	if err != nil {
		return Tensor{}, err
	}
	rowBytes, err := typ.RowSize(t.Cols)
	if err != nil {
		return Tensor{}, fmt.Errorf("kernels: %w", err)
	}
	out := Tensor{Type: typ, Rows: t.Rows, Cols: t.Cols, Data: make([]byte, t.Rows*rowBytes)}
	for r := range t.Rows {
		if err := quant.Quantize(typ, out.Row(r), x[r*t.Cols:(r+1)*t.Cols]); err != nil {
			return Tensor{}, fmt.Errorf("kernels: %w", err)
		}
	}
	return out, nil
}

// FromF32 returns x, rows×cols floats, as an F32 Tensor viewing the same
// memory (no copy). It panics if len(x) != rows·cols.
func FromF32(x []float32, rows, cols int) Tensor {
	if len(x) != rows*cols {
		panic(fmt.Sprintf("kernels: %d floats for a %d×%d tensor", len(x), rows, cols))
	}
	var data []byte
	if len(x) > 0 {
		data = unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
	}
	return Tensor{Type: F32, Rows: rows, Cols: cols, Data: data}
}

// F32 returns the elements of an F32 tensor as floats viewing Data (no
// copy), or an error if the tensor is of another type, its Data does not
// hold Rows·Cols floats, or Data is not 4-byte aligned.
func (t Tensor) F32() ([]float32, error) {
	n := t.Rows * t.Cols
	switch {
	case t.Type != F32:
		return nil, fmt.Errorf("kernels: %v tensor read as F32", t.Type)
	case t.Rows < 0 || t.Cols < 0 || len(t.Data) != 4*n:
		return nil, fmt.Errorf("kernels: %d bytes for a %d×%d F32 tensor", len(t.Data), t.Rows, t.Cols)
	case n == 0:
		return nil, nil
	case uintptr(unsafe.Pointer(&t.Data[0]))%4 != 0:
		return nil, fmt.Errorf("kernels: F32 tensor data is not 4-byte aligned")
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&t.Data[0])), n), nil
}

// Weight is a backend's handle to a tensor it uploaded: an index into the
// backend's own table, meaningless to any other backend. A plain integer,
// so passing one allocates nothing and the model never sees device memory.
// The zero Weight, NoWeight, names no tensor: backends never issue it, so
// an op's optional weight (RoPE's frequency factors) is absent when zero.
type Weight int32

// NoWeight is the zero Weight: no tensor.
const NoWeight Weight = 0

// Buf is a backend's handle to an activation buffer it owns: one row of
// its declared width per token of the current step. On a GPU it is device
// memory, so only the backend reads or writes its contents.
type Buf int32

// RopeLayout says which elements of a head RoPE rotates together.
type RopeLayout uint8

// RoPE layouts. Both turn pair i of a head of width d by
// pos·theta^(-2i/d)/f[i] radians, f being the model's per-pair frequency
// factors (Llama 3's rope scaling) or 1 without them; they differ in which
// elements form pair i.
const (
	// RopeAdjacent pairs (x[2i], x[2i+1]): llama2.c and GGUF's llama.
	RopeAdjacent RopeLayout = iota
	// RopeHalves pairs (x[i], x[i+d/2]) ("rotate half"): Hugging Face
	// checkpoints, GPT-NeoX, Qwen.
	RopeHalves
)

// KVConfig sizes a paged K/V pool. Every size must be positive.
type KVConfig struct {
	Layers    int // transformer layers
	KVHeads   int // K/V heads per layer
	HeadDim   int // values per head
	BlockSize int // token slots per block
	NumBlocks int // physical blocks
	// Type is the element type the CPU cache stores K and V in: F32 (the
	// zero value, so a config that leaves it out keeps float32) or F16,
	// half the bytes (values rounded to nearest even, computed with in
	// float32). The GPU backend keeps its pool in its device element
	// type and accepts only the zero value.
	Type DType
}
