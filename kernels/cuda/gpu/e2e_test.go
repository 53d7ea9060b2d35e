package gpu

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prefixd/prefixd/bench"
	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/kernels/cuda/src"
	"github.com/prefixd/prefixd/model"
)

// e2eSizes scale the end-to-end benchmark: the GPU run (BenchmarkEndToEnd,
// cuda tag) uses the sizes, the emulator test a tiny version of
// the same workloads.
type e2eSizes struct {
	requests         int // of each workload
	prefix, question int // prompt = prefix + question tokens
	output           int // generated per request
	skewPrompt       int // the skew workload's prompt tokens (outputs: bench.SeedLengths)
	maxBatchTokens   int
}

// gpuSizes are the issue's: 64 requests × (1,024 + 32 prompt + 128
// generated), and the seed's skewed lengths.
var gpuSizes = e2eSizes{requests: 64, prefix: 1024, question: 32, output: 128, skewPrompt: 16, maxBatchTokens: 8192}

// e2eWorkloads returns the end-to-end workloads: distinct prompts
// (generated tokens per second), the same requests sharing their prefix
// with the cache on and off, and the skew workload under continuous and
// static batching.
func e2eWorkloads(s e2eSizes) ([]*bench.Workload, error) {
	const bs = 16
	perReq := (s.prefix+s.question+s.output+bs-1)/bs + 1
	shape := bench.EngineShape{NumBlocks: s.requests*perReq + 64, BlockSize: bs, MaxRunning: s.requests,
		MaxBatchTokens: s.maxBatchTokens, PrefillChunk: s.prefix + s.question}
	distinct, err := bench.SharedPrefix(bench.SharedPrefixConfig{Groups: s.requests, PerGroup: 1, System: s.prefix,
		Question: s.question, Output: s.output, Seed: 1})
	if err != nil {
		return nil, err
	}
	shared, err := bench.SharedPrefix(bench.SharedPrefixConfig{Groups: 1, PerGroup: s.requests, System: s.prefix,
		Question: s.question, Output: s.output, Seed: 2})
	if err != nil {
		return nil, err
	}
	skew, err := bench.Skew(bench.SkewConfig{Requests: s.requests, Prompt: s.skewPrompt, Dist: "seed", Seed: 3})
	if err != nil {
		return nil, err
	}
	cont := bench.Mode{Name: "continuous", Cache: true}
	return []*bench.Workload{
		{Name: "distinct", Shape: shape, Requests: distinct, Modes: []bench.Mode{cont}},
		{Name: "shared-prefix", Shape: shape, Requests: shared, Modes: []bench.Mode{
			{Name: "cache-on", Cache: true}, {Name: "cache-off"}}},
		{Name: "skew", Shape: shape, Requests: skew, Modes: []bench.Mode{cont, {Name: "static", Batching: engine.Static, Cache: true}}},
	}, nil
}

// runE2E runs every workload under each of its modes on m.
func runE2E(tb testing.TB, m engine.Model, s e2eSizes, each func(w *bench.Workload, r bench.Result)) {
	ws, err := e2eWorkloads(s)
	if err != nil {
		tb.Fatal(err)
	}
	for _, w := range ws {
		for _, mode := range w.Modes {
			r, err := bench.Run(context.Background(), m, -1, w, mode)
			if err != nil {
				tb.Fatalf("%s/%s: %v", w.Name, mode.Name, err)
			}
			each(w, r)
		}
	}
}

// tinyModel and tinySizes are the end-to-end benchmark at the emulator's
// scale: TestEndToEndBenchLogic, and BenchmarkEndToEnd where no GPU is
// built in.
var (
	tinyModel = model.Config{Dim: 32, Hidden: 48, Layers: 1, Heads: 4, KVHeads: 2, Vocab: 300, MaxSeqLen: 512,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1}
	tinySizes = e2eSizes{requests: 4, prefix: 32, question: 5, output: 6, skewPrompt: 4, maxBatchTokens: 256}
)

// e2eTarget is a device BenchmarkEndToEnd runs on, with the model shape
// and workload sizes it runs there.
type e2eTarget struct {
	open  func(b *testing.B) Device // closed when b ends
	model model.Config
	sizes e2eSizes
}

// gpuE2E (cuda_test.go, the GPU at TinyLlama's shape) and emuE2E
// (emu_test.go, the emulator at tinyModel's) are BenchmarkEndToEnd's
// targets; it runs on the GPU where the binary has one.
var gpuE2E, emuE2E *e2eTarget

// BenchmarkEndToEnd runs the engine on a random-weight model, in bf16,
// through every workload of e2eWorkloads: on GPU 0 at TinyLlama-1.1B's
// shape with the sizes (64 requests × (1,056 prompt + 128
// generated)), else on the emulator at a tiny shape, which is how
// scripts/gpu-check.sh's emulated run rehearses the GPU's. Each workload
// and mode reports generated tokens per second (gen-tok/s), its cache
// hit rate, its steps and how many of them ran from a CUDA graph
// (graph-steps); the first workload runs once more with graphs off. Run
// it once (-test.benchtime 1x): each run is a whole workload.
func BenchmarkEndToEnd(b *testing.B) {
	tg := gpuE2E
	if tg == nil {
		tg = emuE2E
	}
	if tg == nil {
		b.Skip("no device: the emulator needs cgo on amd64")
	}
	m := model.Random(tg.model, 1)
	clock := &stepClock{Device: tg.open(b)}
	r, backend := runnerAndBackend(b, m, clock)
	ws, err := e2eWorkloads(tg.sizes)
	if err != nil {
		b.Fatal(err)
	}
	// A warm-up run: the first steps grow the device's buffers and load
	// cuBLAS's kernels, which no serving step after them pays.
	if _, err := bench.Run(context.Background(), r, -1, ws[0], ws[0].Modes[0]); err != nil {
		b.Fatal(err)
	}
	run := func(name string, w *bench.Workload, mode bench.Mode) {
		b.Run(name, func(b *testing.B) {
			var res bench.Result
			busy, replays := clock.busy.Load(), backend.GraphStats().Replays
			for range b.N {
				if res, err = bench.Run(context.Background(), r, -1, w, mode); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(res.TokensPerSec, "gen-tok/s")
			b.ReportMetric(res.HitRate, "hit-rate")
			b.ReportMetric(float64(res.Steps), "steps")
			b.ReportMetric(float64(backend.GraphStats().Replays-replays)/float64(b.N), "graph-steps")
			b.ReportMetric(time.Duration(clock.busy.Load()-busy).Seconds()/float64(b.N), "device-s")
		})
	}
	for _, w := range ws {
		for _, mode := range w.Modes {
			run(w.Name+"/"+mode.Name, w, mode)
		}
	}
	// The first workload again with every kernel launched one by one:
	// what the graphs save.
	backend.UseGraphs(false)
	run(ws[0].Name+"/"+ws[0].Modes[0].Name+"-no-graphs", ws[0], ws[0].Modes[0])
	backend.UseGraphs(true)
	if err := backend.GraphStats().Err; err != nil {
		b.Error(err)
	}
}

// stepClock is a Device that adds up the time its Do calls take: the
// steps' launches and the waits for the GPU. BenchmarkEndToEnd reports it
// per run as device-s; the rest of a run's seconds is the engine's work
// on the host between steps.
type stepClock struct {
	Device
	busy atomic.Int64 // nanoseconds
}

func (c *stepClock) Do(f func(Mem) error) error {
	start := time.Now()
	err := c.Device.Do(f)
	c.busy.Add(int64(time.Since(start)))
	return err
}

// TestEndToEndBenchLogic runs the end-to-end benchmark's workloads, tiny,
// on the emulator: every request finishes with its tokens, nothing leaks,
// and the shared prefix is served from the cache only when it is on.
func TestEndToEndBenchLogic(t *testing.T) {
	m := model.Random(tinyModel, 9)
	each(t, []src.DType{src.BF16}, func(t *testing.T, dev Device) {
		runE2E(t, runnerOn(t, m, dev), tinySizes, func(w *bench.Workload, r bench.Result) {
			want := 0
			for _, q := range w.Requests {
				want += q.MaxTokens
			}
			if r.Failed != 0 || r.LeakedBlocks != 0 || r.GeneratedTokens != want {
				t.Errorf("%s/%s: %d failed, %d blocks leaked, %d tokens generated, want %d", w.Name, r.Mode, r.Failed,
					r.LeakedBlocks, r.GeneratedTokens, want)
			}
			if shared := w.Name == "shared-prefix" && r.Mode == "cache-on"; shared != (r.HitRate > 0) {
				t.Errorf("%s/%s: hit rate %.2f", w.Name, r.Mode, r.HitRate)
			}
		})
	})
}
