// Package gguftest writes GGUF files of seeded random tensors in every
// type kernels/quant supports, so tests of the reader and of model loading
// need no downloads.
package gguftest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/prefixd/prefixd/gguf"
	"github.com/prefixd/prefixd/kernels/quant"
)

// Random returns a tensor of type typ and shape (ggml's order, innermost
// first: [in, out] for a weight matrix) whose values, drawn from
// N(0, scale²) by a PRNG seeded with seed, are quantized row by row with
// quant.Quantize. The same arguments give the same bytes. Shape[0] must
// be whole blocks of typ.
func Random(seed uint64, name string, typ quant.Type, scale float64, shape ...int) (gguf.Tensor, error) {
	if len(shape) == 0 || len(shape) > gguf.MaxDims {
		return gguf.Tensor{}, fmt.Errorf("gguftest: tensor %q has %d dimensions", name, len(shape))
	}
	rng := rand.New(rand.NewPCG(seed, 0x6767))
	t := gguf.Tensor{Name: name, Type: typ, Shape: shape}
	rowBytes, err := typ.RowSize(shape[0])
	if err != nil {
		return gguf.Tensor{}, fmt.Errorf("gguftest: tensor %q: %w", name, err)
	}
	rows := t.Rows()
	t.Data = make([]byte, rows*rowBytes)
	row := make([]float32, shape[0])
	for r := range rows {
		for i := range row {
			row[i] = float32(rng.NormFloat64() * scale)
		}
		if err := quant.Quantize(typ, t.Data[r*rowBytes:(r+1)*rowBytes], row); err != nil {
			return gguf.Tensor{}, err
		}
	}
	return t, nil
}

// WriteFile writes meta and tensors as the GGUF file path.
func WriteFile(path string, meta []gguf.KV, tensors []gguf.Tensor) error {
	var buf bytes.Buffer
	if err := gguf.Write(&buf, meta, tensors); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
