//go:build cgo && amd64

package gpu

import (
	"context"
	"testing"

	"github.com/prefixd/prefixd/bench"
	"github.com/prefixd/prefixd/kernels/cuda/emu"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
	"github.com/prefixd/prefixd/model"
)

// BenchmarkHostWork runs the end-to-end benchmark's distinct workload at
// the GPU's sizes (64 × (1,056 + 128)) over TinyLlama's layers, heads and
// vocabulary, on the emulator's memory with every kernel launch and
// matrix product skipped: what is left is the host's work of each step
// (the engine, the runner queueing the layer loop, the Backend packing
// and uploading the step), which a GPU cannot hide. Its seconds per step
// against BenchmarkEndToEnd's say how much of a GPU run is host work. The
// model is narrow (the host's work does not depend on the width), and the
// tokens are all 0, every row decoding greedily on the "device". It runs
// twice: launching each kernel (skipped), and with the steps' ops
// replayed from graphs (of skipped launches), which adds the trace each
// step's ops are compared by.
func BenchmarkHostWork(b *testing.B) {
	c := model.Config{Dim: 64, Hidden: 128, Layers: 22, Heads: 32, KVHeads: 4, Vocab: 32000, MaxSeqLen: 2048,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1}
	ws, err := e2eWorkloads(gpuSizes)
	if err != nil {
		b.Fatal(err)
	}
	w := ws[0]
	for _, graphs := range []bool{false, true} {
		name := "launches"
		if graphs {
			name = "graphs"
		}
		b.Run(name, func(b *testing.B) {
			d := emu.New(src.BF16, emu.Forward)
			b.Cleanup(func() { d.Close() })
			r, backend := runnerAndBackend(b, model.Random(c, 1), hostOnly{emuDevice{d}, graphs})
			var res bench.Result
			for range b.N {
				if res, err = bench.Run(context.Background(), r, -1, w, w.Modes[0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.Steps), "steps")
			b.ReportMetric(float64(backend.GraphStats().Replays)/float64(b.N), "graph-steps")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/float64(res.Steps)*1e3, "ms/step")
		})
	}
}

// hostOnly is the emulator with its kernels and matrix products skipped,
// and with graphs set, captured into graphs that do nothing.
type hostOnly struct {
	emuDevice
	graphs bool
}

func (h hostOnly) Do(f func(Mem) error) error {
	return h.emuDevice.Do(func(m Mem) error {
		if h.graphs {
			return f(noKernelGraphs{noKernels{m}})
		}
		return f(noKernels{m})
	})
}

// noKernelGraphs is noKernels capturing graphs of its skipped launches.
type noKernelGraphs struct{ noKernels }

func (noKernelGraphs) BeginCapture() error               { return nil }
func (noKernelGraphs) EndCapture() (launch.Graph, error) { return noGraph{}, nil }

// noGraph is a graph of nothing.
type noGraph struct{}

func (noGraph) Launch() error  { return nil }
func (noGraph) Destroy() error { return nil }

// noKernels is a Mem whose launches and products do nothing and whose
// reads back bring zeros: token 0, or logits of 0.
type noKernels struct{ Mem }

func (noKernels) ReadAsync(b []byte, _ launch.Ptr) error {
	clear(b)
	return nil
}

func (noKernels) Launch(string, launch.Dim3, launch.Dim3, ...uint64) error { return nil }
func (noKernels) MatMulT(launch.Ptr, launch.Ptr, launch.Ptr, int, int, int, float32) error {
	return nil
}
