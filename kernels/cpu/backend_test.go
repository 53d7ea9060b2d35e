package cpu

import (
	"errors"
	"testing"

	"github.com/prefixd/prefixd/kernels"
)

func TestBackendUploadRejectsWhatItCannotCompute(t *testing.T) {
	b := NewBackend(nil)
	for _, tc := range []struct {
		name string
		t    kernels.Tensor
	}{
		{"quantized type", kernels.Tensor{Type: kernels.DType(8), Rows: 1, Cols: 32, Data: make([]byte, 34)}},
		{"short data", kernels.Tensor{Type: kernels.F32, Rows: 2, Cols: 3, Data: make([]byte, 20)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.Upload(tc.t); err == nil {
				t.Fatal("Upload succeeded")
			}
		})
	}
	w, err := b.Upload(kernels.FromF32([]float32{1, 2, 3, 4, 5, 6}, 2, 3))
	if err != nil || w != 0 {
		t.Fatalf("Upload of an F32 tensor = %v, %v; want handle 0", w, err)
	}
	if _, err := b.NewKV(kernels.KVConfig{}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("NewKV of a zero config: %v, want ErrBadConfig", err)
	}
}
