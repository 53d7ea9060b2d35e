package model

import (
	"slices"
	"testing"

	"github.com/prefixd/prefixd/kernels"
)

// TestStack checks what a FusedBackend is given: matrices stacked row by
// row, vectors joined end to end, a quantized matrix dequantized, and a
// matrix of another width refused.
func TestStack(t *testing.T) {
	a, b := kernels.FromF32([]float32{1, 2, 3, 4}, 2, 2), kernels.FromF32([]float32{5, 6}, 1, 2)
	m, err := stack(a, kernels.FromF32([]float32{5, 6, 7, 8, 9, 10}, 3, 2))
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := m.Float32s(); m.Rows != 5 || m.Cols != 2 || !slices.Equal(f, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Errorf("stacked matrices: %d×%d %v", m.Rows, m.Cols, f)
	}
	v, err := stack(b, kernels.FromF32([]float32{7, 8, 9}, 1, 3))
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := v.Float32s(); v.Rows != 1 || v.Cols != 5 || !slices.Equal(f, []float32{5, 6, 7, 8, 9}) {
		t.Errorf("joined vectors: %d×%d %v", v.Rows, v.Cols, f)
	}
	h, err := a.Convert(kernels.F16)
	if err != nil {
		t.Fatal(err)
	}
	if q, err := stack(h, a); err != nil || q.Type != kernels.F32 || q.Rows != 4 {
		t.Errorf("an F16 matrix stacked: %v, %v %d rows", err, q.Type, q.Rows)
	}
	if _, err := stack(a, kernels.FromF32(make([]float32, 3), 1, 3)); err == nil {
		t.Error("a 3-wide matrix stacked under 2-wide ones")
	}
}
