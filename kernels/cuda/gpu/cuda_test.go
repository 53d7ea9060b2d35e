//go:build cuda

package gpu

import (
	"errors"
	"testing"

	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// The GPU target: the same tests as on the emulator. Memory in use
// (total - free) must be back where it was before the Backend once it is
// closed.
func init() {
	targets = append(targets, target{name: "cuda", open: func(t testing.TB, dt src.DType) (Device, func() int64) {
		g, err := OpenCUDA(0, dt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		// cuBLAS allocates its workspace on the first product and keeps
		// it: make that happen before memory in use is measured.
		err = g.Do(func(m Mem) error {
			p, err := m.Alloc(16)
			if err != nil {
				return err
			}
			return errors.Join(m.MatMulT(p, p+8, p+12, 1, 1, 1, 0), m.Free(p))
		})
		if err != nil {
			t.Fatal(err)
		}
		return g, func() int64 {
			free, total, err := g.MemInfo()
			if err != nil {
				t.Error(err)
			}
			return total - free
		}
	}})
}
