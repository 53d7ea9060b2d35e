package kernels

import (
	"slices"
	"testing"
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
