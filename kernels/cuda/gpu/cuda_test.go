//go:build cuda

package gpu

import (
	"context"
	"testing"

	"github.com/prefixd/prefixd/bench"
	"github.com/prefixd/prefixd/kernels/cuda/src"
	"github.com/prefixd/prefixd/model"
)

// The GPU target: the same tests as on the emulator. The allocations
// made through the device's Mem are counted (a driver may keep freed
// memory, so the GPU's free memory would not tell a leak from a cache);
// the K/V pool's own are kernels/cuda's, whose tests check them.
func init() {
	targets = append(targets, target{name: "cuda", open: func(t testing.TB, dt src.DType) (Device, func() int64) {
		g, err := OpenCUDA(0, dt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		c := countedGPU{GPU: g, live: new(int64)}
		return c, func() int64 { return *c.live }
	}})
}

// BenchmarkEndToEnd runs the engine on GPU 0 with a random-weight model
// of TinyLlama-1.1B's shape in bf16: 64 requests × (1,056 prompt + 128
// generated) with distinct prompts, the same sharing a 1,024-token prefix
// with the prefix cache on and off, and the seed's skewed lengths under
// continuous and static batching. Each workload and mode reports
// generated tokens per second (gen-tok/s) and its cache hit rate; run it
// once (-test.benchtime 1x): each run is a whole workload.
func BenchmarkEndToEnd(b *testing.B) {
	c := model.Config{Dim: 2048, Hidden: 5632, Layers: 22, Heads: 32, KVHeads: 4, Vocab: 32000, MaxSeqLen: 2048,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1}
	m := model.Random(c, 1)
	g, err := OpenCUDA(0, src.BF16)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() }) // after the runner's Backend, which runnerOn closes
	r := runnerOn(b, m, g)
	ws, err := e2eWorkloads(gpuSizes)
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range ws {
		for _, mode := range w.Modes {
			b.Run(w.Name+"/"+mode.Name, func(b *testing.B) {
				var res bench.Result
				for range b.N {
					if res, err = bench.Run(context.Background(), r, -1, w, mode); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(res.TokensPerSec, "gen-tok/s")
				b.ReportMetric(res.HitRate, "hit-rate")
			})
		}
	}
}
