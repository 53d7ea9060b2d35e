package kernels

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/kernels/quant"
)

func TestTensorF32(t *testing.T) {
	x := []float32{1, -2, 3.5, 4, 5, 6}
	got, err := FromF32(x, 2, 3).F32()
	if err != nil || !slices.Equal(got, x) || &got[0] != &x[0] {
		t.Fatalf("F32 of FromF32 = %v, %v; want a view of %v", got, err, x)
	}
	if got, err := FromF32(nil, 0, 4).F32(); err != nil || got != nil {
		t.Fatalf("empty tensor: %v, %v", got, err)
	}
	buf := make([]byte, 4*7)
	for _, tc := range []struct {
		name string
		t    Tensor
	}{
		{"other type", Tensor{Type: DType(1), Rows: 1, Cols: 2, Data: buf[:4]}},
		{"too few bytes", Tensor{Type: F32, Rows: 2, Cols: 3, Data: buf[:20]}},
		{"negative shape", Tensor{Type: F32, Rows: -1, Cols: -1, Data: buf[:4]}},
		{"misaligned", Tensor{Type: F32, Rows: 1, Cols: 6, Data: buf[1:25]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.t.F32(); err == nil {
				t.Fatal("F32 succeeded")
			}
		})
	}
}

// TestTensorConvert converts an F32 tensor to F16 (checked against known
// bit patterns, ties to even), to Q8_0 and back (within Q8_0's step), and
// refuses a type whose blocks do not divide the row.
func TestTensorConvert(t *testing.T) {
	x := []float32{1, -2, 65504, 1 + 0x1p-11, 1 + 3*0x1p-11, 0x1p-24}
	src := FromF32(x, 2, 3)
	if same, err := src.Convert(F32); err != nil || &same.Data[0] != &src.Data[0] {
		t.Fatalf("Convert to its own type: %v, a copy", err)
	}
	h, err := src.Convert(F16)
	if err != nil || h.Type != F16 || h.Rows != 2 || h.Cols != 3 || len(h.Data) != 12 {
		t.Fatalf("Convert(F16) = %+v, %v", h, err)
	}
	for i, want := range []uint16{0x3C00, 0xC000, 0x7BFF, 0x3C00, 0x3C02, 0x0001} {
		if got := binary.LittleEndian.Uint16(h.Data[2*i:]); got != want {
			t.Errorf("%v as F16: %#04x, want %#04x", x[i], got, want)
		}
	}
	row := make([]float32, 64)
	for i := range row {
		row[i] = float32(i%17) - 8
	}
	q, err := FromF32(row, 2, 32).Convert(quant.Q8_0)
	if err != nil {
		t.Fatal(err)
	}
	back, err := q.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range back { // a Q8_0 step is the block's largest magnitude / 127
		if d := v - row[i]; d > 8.0/127 || d < -8.0/127 {
			t.Fatalf("value %d: %v after Q8_0, was %v", i, v, row[i])
		}
	}
	if _, err := src.Convert(quant.Q8_0); err == nil {
		t.Error("rows of 3 converted to Q8_0's 32-value blocks")
	}
}
