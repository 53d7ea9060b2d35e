//go:build cuda

package gpu

import (
	"testing"

	"github.com/prefixd/prefixd/kernels/cuda/src"
	"github.com/prefixd/prefixd/model"
)

// The GPU target: the same tests as on the emulator. The allocations
// made through the device's Mem are counted (a driver may keep freed
// memory, so the GPU's free memory would not tell a leak from a cache);
// the K/V pool's own are kernels/cuda's, whose tests check them.
func init() {
	// The model and sizes of BenchmarkEndToEnd on the GPU: TinyLlama-1.1B
	// and the workloads.
	gpuE2E = &e2eTarget{
		open: func(b *testing.B) Device {
			g, err := OpenCUDA(0, src.BF16)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { g.Close() }) // after the runner's Backend, which runnerOn closes
			return g
		},
		model: model.Config{Dim: 2048, Hidden: 5632, Layers: 22, Heads: 32, KVHeads: 4, Vocab: 32000, MaxSeqLen: 2048,
			RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1},
		sizes: gpuSizes,
	}
	targets = append(targets, target{name: "cuda", open: func(t testing.TB, dt src.DType) (Device, func() int64) {
		g, err := OpenCUDA(0, dt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		c := newCountedGPU(g)
		return c, func() int64 { return *c.live }
	}})
}
