package model

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/kernels"
)

// TestCheckTensors plants one bad value in layer 0's w2 (row 3) of a
// model in each weight type (quantConfig: rows of whole blocks of every
// quantized type), as NaN or infinity in a value (F32, F16,
// BF16) or in a quantized block's scale (d, and dmin where the format has
// one): the check names the tensor and the first bad index, and passes
// the clean model.
func TestCheckTensors(t *testing.T) {
	const row = 3
	f16NaN, f16Inf := uint16(0x7E00), uint16(0x7C00)
	for _, c := range []struct {
		typ  kernels.DType
		off  int // byte offset in the row: the value or the scale spoilt
		bits uint16
		col  int // the first column that reads as not finite (NaN where its quant is 0)
	}{
		{kernels.F16, 2 * 7, f16NaN, 7},
		{kernels.F16, 2 * 9, f16Inf, 9},
		{kernels.BF16, 2 * 11, 0x7FC0, 11},
		{kernels.Q8_0, 34 * 2, f16Inf, 64},   // block 2's d
		{kernels.Q4_0, 18 * 1, f16NaN, 32},   // block 1's d
		{kernels.Q4_1, 20*3 + 2, f16NaN, 96}, // block 3's m
		{kernels.Q5_0, 22 * 5, f16NaN, 160},  // block 5's d
		{kernels.Q5_1, 24 * 0, f16Inf, 0},    // block 0's d
		{kernels.Q4_K, 2, f16NaN, 0},         // dmin
		{kernels.Q5_K, 0, f16NaN, 0},         // d
		{kernels.Q6_K, 208, f16Inf, 0},       // d, at the block's end
	} {
		t.Run(fmt.Sprintf("%v at %d", c.typ, c.off), func(t *testing.T) {
			m := Random(quantConfig, 7)
			w2, err := m.Layers[0].W2.Convert(c.typ)
			if err != nil {
				t.Fatal(err)
			}
			m.Layers[0].W2 = w2
			if err := m.CheckTensors(context.Background()); err != nil {
				t.Fatalf("clean model: %v", err)
			}
			bad := w2
			bad.Data = append([]byte(nil), w2.Data...)
			binary.LittleEndian.PutUint16(bad.Row(row)[c.off:], c.bits)
			m.Layers[0].W2 = bad
			err = m.CheckTensors(context.Background())
			want := fmt.Sprintf(`tensor "layer 0 w2": value %d (row %d, column %d`, row*w2.Cols+c.col, row, c.col)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("CheckTensors = %v, want an error with %q", err, want)
			}
		})
	}
	t.Run("F32", func(t *testing.T) {
		m := Random(quantConfig, 8)
		f, _ := m.Layers[0].W2.F32()
		f[row*quantConfig.Hidden+5] = float32(math.Inf(-1))
		err := m.CheckTensors(context.Background())
		if want := fmt.Sprintf(`tensor "layer 0 w2": value %d (row 3, column 5) is -Inf`, row*quantConfig.Hidden+5); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("CheckTensors = %v, want %q", err, want)
		}
	})
}

// TestCheckTensorsGGUF writes a GGUF file whose ffn_down holds a NaN: it
// loads (nothing else looks at the values), and CheckTensors names the
// tensor by its GGUF name and the value's index.
func TestCheckTensorsGGUF(t *testing.T) {
	c := Config{Dim: 16, Hidden: 32, Layers: 2, Heads: 2, KVHeads: 1, Vocab: 40, MaxSeqLen: 64,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1, SharedClassifier: true}
	m := Random(c, 9)
	f, _ := m.Layers[1].W2.F32()
	f[2*c.Hidden+5] = float32(math.NaN())
	got, err := Load(writeGGUF(t, m, ggufFile{arch: "llama"}))
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	err = got.CheckTensors(context.Background())
	if want := fmt.Sprintf(`tensor "blk.1.ffn_down.weight": value %d (row 2, column 5) is NaN`, 2*c.Hidden+5); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("CheckTensors = %v, want %q", err, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := got.CheckTensors(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("CheckTensors after cancel = %v", err)
	}
}
