package gpu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prefixd/prefixd/batch"
	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/kernels/cuda/internal/kerneltest"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
	"github.com/prefixd/prefixd/kernels/quant"
	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/sample"
)

// target is a device the tests run on: the emulator (emu_test.go, where
// cgo is on) and, under the cuda tag, the GPU (cuda_test.go). open returns
// the device and a count of its live allocations, which must be back where
// it started once a Backend is closed.
type target struct {
	name string
	open func(t testing.TB, dt src.DType) (Device, func() int64)
}

var targets []target

// each runs f on every target for each element type, as subtests.
func each(t *testing.T, dts []src.DType, f func(t *testing.T, dev Device)) {
	if len(targets) == 0 {
		t.Skip("no device: the emulator needs cgo on amd64")
	}
	for _, tg := range targets {
		for _, dt := range dts {
			t.Run(tg.name+"-"+dt.String(), func(t *testing.T) {
				dev, live := tg.open(t, dt)
				before := live()
				t.Cleanup(func() {
					if after := live(); after != before {
						t.Errorf("live device allocations: %d before, %d after Close", before, after)
					}
				})
				f(t, dev)
			})
		}
	}
}

// countedGPU counts the live allocations made through its Mem. Its Do
// allocates nothing (TestStepAllocatesNothing runs on it): the counting
// Mem and the function handed over are made once, f kept for the one Do
// in flight.
type countedGPU struct {
	GPU
	live *int64
	call *countedCall
}

type countedCall struct {
	mu  sync.Mutex
	mem countingMem
	f   func(Mem) error
	run func(Mem) error
}

func newCountedGPU(g GPU) countedGPU {
	c := countedGPU{GPU: g, live: new(int64), call: &countedCall{}}
	k := c.call
	k.mem.live = c.live
	k.run = func(m Mem) error {
		k.mem.Mem = m
		return k.f(&k.mem)
	}
	return c
}

func (c countedGPU) Do(f func(Mem) error) error {
	k := c.call
	k.mu.Lock()
	defer k.mu.Unlock()
	k.f = f
	err := c.GPU.Do(k.run)
	k.f, k.mem.Mem = nil, nil
	return err
}

type countingMem struct {
	Mem
	live *int64
}

var errNotCapturer = errors.New("gpu: the device's Mem does not capture graphs")

// BeginCapture and EndCapture pass the device's graphs through, so that a
// Backend on a countedGPU replays steps from graphs as on the device.
func (m countingMem) BeginCapture() error {
	if c, ok := m.Mem.(Capturer); ok {
		return c.BeginCapture()
	}
	return errNotCapturer
}

func (m countingMem) EndCapture() (launch.Graph, error) {
	if c, ok := m.Mem.(Capturer); ok {
		return c.EndCapture()
	}
	return nil, errNotCapturer
}

func (m countingMem) Alloc(n int) (launch.Ptr, error) {
	p, err := m.Mem.Alloc(n)
	if err == nil {
		*m.live++
	}
	return p, err
}

func (m countingMem) Free(p launch.Ptr) error {
	*m.live--
	return m.Mem.Free(p)
}

// runnerOn returns a Runner for m on a new Backend over dev, closed when
// the test ends.
func runnerOn(t testing.TB, m *model.Model, dev Device) *model.Runner {
	t.Helper()
	r, _ := runnerAndBackend(t, m, dev)
	return r
}

// runnerAndBackend is runnerOn, returning the Backend too.
func runnerAndBackend(t testing.TB, m *model.Model, dev Device) (*model.Runner, *Backend) {
	t.Helper()
	b := NewBackend(dev)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	r, err := model.NewRunnerOn(m, b)
	if err != nil {
		t.Fatal(err)
	}
	return r, b
}

func cpuRunner(t testing.TB, m *model.Model) *model.Runner {
	w := cpu.NewWorkers(2)
	t.Cleanup(w.Close)
	return model.NewRunner(m, w)
}

// sameSteps runs each step on the device's runner and on the CPU runner and
// requires logits within relative error tol of the CPU's.
func sameSteps(t testing.TB, gpuR, cpuR *model.Runner, steps [][]batch.Row, tol float64) {
	t.Helper()
	for s, rows := range steps {
		want, err := cpuR.Forward(rows)
		if err != nil {
			t.Fatal(err)
		}
		got, err := gpuR.Forward(rows)
		if err != nil {
			t.Fatal(err)
		}
		if e := kerneltest.RelErr(got, want); e > tol {
			t.Fatalf("step %d: logits relative error %.3g over %.0e", s, e, tol)
		}
	}
}

// withMatrices returns a copy of m whose weight matrices are f of m's (the
// tied classifier staying tied); its other tensors are m's.
func withMatrices(t testing.TB, m *model.Model, f func(kernels.Tensor) (kernels.Tensor, error)) *model.Model {
	t.Helper()
	out := *m
	conv := func(w *kernels.Tensor) {
		var err error
		if *w, err = f(*w); err != nil {
			t.Fatal(err)
		}
	}
	conv(&out.Embedding)
	out.Classifier = out.Embedding
	if !m.Config.SharedClassifier {
		out.Classifier = m.Classifier
		conv(&out.Classifier)
	}
	out.Layers = slices.Clone(m.Layers)
	for i := range out.Layers {
		l := &out.Layers[i]
		for _, w := range []*kernels.Tensor{&l.Wq, &l.Wk, &l.Wv, &l.Wo, &l.W1, &l.W2, &l.W3} {
			conv(w)
		}
	}
	return &out
}

// roundMatrices returns m with every matrix's values rounded to dt, as
// Upload does, as F32 tensors, so that the CPU reference computes with the
// weights the device holds.
func roundMatrices(t testing.TB, m *model.Model, dt src.DType) *model.Model {
	return withMatrices(t, m, func(w kernels.Tensor) (kernels.Tensor, error) {
		x, err := w.Float32s()
		if err != nil {
			return w, err
		}
		x = slices.Clone(x)
		for i, v := range x {
			x[i] = launch.Round(dt, v)
		}
		return kernels.FromF32(x, w.Rows, w.Cols), nil
	})
}

// quantized returns m's matrices in type typ.
func quantized(t testing.TB, m *model.Model, typ kernels.DType) *model.Model {
	return withMatrices(t, m, func(w kernels.Tensor) (kernels.Tensor, error) { return w.Convert(typ) })
}

// TestUploadFileTypes runs models whose matrices are held in a file's
// types (F16, BF16, and quantized ones, which Upload dequantizes) on the
// device and compares their logits with the CPU runner's on the same
// values dequantized and rounded to the device's type as F32 tensors.
func TestUploadFileTypes(t *testing.T) {
	c := model.Config{Dim: 32, Hidden: 64, Layers: 1, Heads: 4, KVHeads: 2, Vocab: 40, MaxSeqLen: 64,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1}
	each(t, src.DTypes, func(t *testing.T, dev Device) {
		for i, typ := range []kernels.DType{kernels.F16, kernels.BF16, kernels.Q8_0, kernels.Q4_1} {
			t.Run(typ.String(), func(t *testing.T) {
				m := quantized(t, model.Random(c, uint64(30+i)), typ)
				if m.Layers[0].Wq.Type != typ {
					t.Fatalf("Wq is %v, want %v", m.Layers[0].Wq.Type, typ)
				}
				gpuR, cpuR := runnerOn(t, m, dev), cpuRunner(t, roundMatrices(t, m, dev.DType()))
				table := []blockstore.BlockID{0, 1, 2}
				for _, r := range []*model.Runner{gpuR, cpuR} {
					if _, err := r.NewKV(len(table), 8); err != nil {
						t.Fatal(err)
					}
				}
				steps := [][]batch.Row{{{Tokens: tokens(1, 12, c.Vocab), Blocks: table, Logits: true}},
					{{Tokens: tokens(2, 1, c.Vocab), Start: 12, Blocks: table, Logits: true}}}
				sameSteps(t, gpuR, cpuR, steps, kerneltest.Tolerance[dev.DType()])
			})
		}
	})
}

var forwardModels = []struct {
	name    string
	cfg     model.Config
	factors bool
	prefill bool // head size 64: the first step's attention runs attn_prefill64 on 16-bit devices
}{
	{name: "GQA", cfg: model.Config{Dim: 48, Hidden: 80, Layers: 2, Heads: 6, KVHeads: 2, Vocab: 50}},
	{name: "odd halves bias", cfg: model.Config{Dim: 36, Hidden: 70, Layers: 2, Heads: 3, KVHeads: 1, Vocab: 37,
		Arch: model.Arch{Rope: kernels.RopeHalves, QKVBias: true}}},
	{name: "qk norm head 14 factors", factors: true, cfg: model.Config{Dim: 40, Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2,
		Vocab: 45, HeadWidth: 14, SharedClassifier: true, Arch: model.Arch{QKNorm: true}}},
	{name: "everything MHA", factors: true, cfg: model.Config{Dim: 32, Hidden: 50, Layers: 3, Heads: 2, KVHeads: 2,
		Vocab: 60, HeadWidth: 20, Arch: model.Arch{Rope: kernels.RopeHalves, QKVBias: true, QKNorm: true}}},
	{name: "GQA head 64 tensor-core prefill", prefill: true, cfg: model.Config{Dim: 64, Hidden: 48, Layers: 1, Heads: 4,
		KVHeads: 1, Vocab: 40, HeadWidth: 64}},
}

// forwardModel is forwardModels[i] with random weights (seed i+1) and, if
// it has them, RoPE frequency factors.
func forwardModel(i int) *model.Model {
	fm := forwardModels[i]
	c := fm.cfg
	c.MaxSeqLen, c.RopeTheta, c.NormEps, c.BOS, c.EOS = 256, 10000, 1e-5, -1, -1
	m := model.Random(c, uint64(i+1))
	if fm.factors {
		f := make([]float32, c.HeadDim()/2)
		for j := range f {
			f[j] = 1 + 3*float32(j)/float32(len(f))
		}
		m.RopeFactors = kernels.FromF32(f, 1, len(f))
	}
	return m
}

// launchLog is a Device that counts the kernels launched through it
// (matrix products as "MatMulT"), its allocations (as "Alloc") and the
// bytes its asynchronous reads copy back (as "bytes back").
type launchLog struct {
	Device
	kernels map[string]int
}

func (l launchLog) Do(f func(Mem) error) error {
	return l.Device.Do(func(m Mem) error { return f(loggingMem{m, l.kernels}) })
}

type loggingMem struct {
	Mem
	kernels map[string]int
}

func (m loggingMem) Alloc(n int) (launch.Ptr, error) {
	m.kernels["Alloc"]++
	return m.Mem.Alloc(n)
}

func (m loggingMem) MatMulT(y, a, w launch.Ptr, rows, n, k int, beta float32) error {
	m.kernels["MatMulT"]++
	return m.Mem.MatMulT(y, a, w, rows, n, k, beta)
}

func (m loggingMem) ReadAsync(b []byte, p launch.Ptr) error {
	m.kernels["bytes back"] += len(b)
	return m.Mem.ReadAsync(b, p)
}

func (m loggingMem) Launch(kernel string, grid, block launch.Dim3, args ...uint64) error {
	m.kernels[kernel]++
	return m.Mem.Launch(kernel, grid, block, args...)
}

// seqTables gives each of n sequences blocks enough blocks of bs for
// positions up to length, over a shuffled pool; sequence 2 starts with
// sequence 0's first two blocks (a cached prefix).
func seqTables(n, blocks, bs int) [][]blockstore.BlockID {
	ids := make([]blockstore.BlockID, 0, n*blocks)
	for i := range n * blocks {
		ids = append(ids, blockstore.BlockID((i*7)%(n*blocks)))
	}
	tables := make([][]blockstore.BlockID, n)
	for i := range tables {
		tables[i] = ids[i*blocks : (i+1)*blocks]
	}
	tables[2] = append(slices.Clone(tables[0][:2]), tables[2][2:]...)
	return tables
}

func tokens(seed, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32((seed*31 + i*17 + i*i) % vocab)
	}
	return out
}

// TestForwardMatchesCPU runs the same steps on the device's runner and on
// the CPU runner, over the same block tables, and compares every step's
// logits: a prefill of three sequences (one past 128 positions, so its
// decodes split over the sequence), a prefill over a cached prefix mixed
// with decodes and a row that wants no logits, then decode batches. The
// model of head size 64 runs its first step's attention on the tensor
// cores (attn_prefill64) in bf16 and f16, which it checks was launched.
func TestForwardMatchesCPU(t *testing.T) {
	each(t, src.DTypes, func(t *testing.T, plain Device) {
		for i, fm := range forwardModels {
			t.Run(fm.name, func(t *testing.T) {
				m := forwardModel(i)
				c := m.Config
				dev := launchLog{plain, map[string]int{}}
				m = roundMatrices(t, m, dev.DType())
				const bs, blocks = 8, 24
				gpuR, cpuR := runnerOn(t, m, dev), cpuRunner(t, m)
				for _, r := range []*model.Runner{gpuR, cpuR} {
					if _, err := r.NewKV(4*blocks, bs); err != nil {
						t.Fatal(err)
					}
				}
				tb := seqTables(4, blocks, bs)
				steps := [][]batch.Row{
					{{Tokens: tokens(1, 21, c.Vocab), Blocks: tb[0], Logits: true},
						{Tokens: tokens(2, 13, c.Vocab), Blocks: tb[1], Logits: true},
						{Tokens: tokens(3, 140, c.Vocab), Blocks: tb[3], Logits: true}},
					{{Tokens: tokens(4, 1, c.Vocab), Start: 21, Blocks: tb[0], Logits: true},
						{Tokens: tokens(5, 9, c.Vocab), Start: 16, Blocks: tb[2], Logits: true},
						{Tokens: tokens(6, 2, c.Vocab), Start: 13, Blocks: tb[1]}},
				}
				for k := range 6 {
					steps = append(steps, []batch.Row{
						{Tokens: tokens(7+k, 1, c.Vocab), Start: 22 + k, Blocks: tb[0], Logits: true},
						{Tokens: tokens(8+k, 1, c.Vocab), Start: 15 + k, Blocks: tb[1], Logits: true},
						{Tokens: tokens(9+k, 1, c.Vocab), Start: 25 + k, Blocks: tb[2], Logits: k%2 == 0},
						{Tokens: tokens(10+k, 1, c.Vocab), Start: 140 + k, Blocks: tb[3], Logits: true}})
				}
				// Speculative decoding's verify rows: logits at their last
				// Drafts+1 positions, beside a chunk that wants none.
				steps = append(steps, []batch.Row{
					{Tokens: tokens(40, 5, c.Vocab), Start: 28, Blocks: tb[0], Logits: true, Drafts: 4},
					{Tokens: tokens(41, 3, c.Vocab), Start: 21, Blocks: tb[1]},
					{Tokens: tokens(42, 3, c.Vocab), Start: 31, Blocks: tb[2], Logits: true, Drafts: 2},
					{Tokens: tokens(43, 1, c.Vocab), Start: 146, Blocks: tb[3], Logits: true}})
				sameSteps(t, gpuR, cpuR, steps, kerneltest.Tolerance[dev.DType()])
				if n := dev.kernels["attn_prefill64"]; fm.prefill && dev.DType() != src.F32 && n != c.Layers {
					t.Errorf("attn_prefill64 launched %d times, want %d (the first step's layers)", n, c.Layers)
				}
			})
		}
	})
}

// sharedModel returns ../shared/models/name from the repository root, or
// from $PREFIXD_TEST_MODELS (gpu-check packs the model there), skipping
// the test when it is missing.
func sharedModel(t testing.TB, name string) string {
	t.Helper()
	if dir := os.Getenv("PREFIXD_TEST_MODELS"); dir != "" {
		return filepath.Join(dir, name)
	}
	p := filepath.Join("..", "..", "..", "..", "shared", "models", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("test model %s not available: %v", name, err)
	}
	return p
}

// Greedy tokens TestStories260KGreedy generates: 256 on a GPU, fewer on
// the emulator, which runs every thread of every kernel on one CPU core
// (past 128, so that decode attention splits over the sequence there too).
const (
	gpuGreedyTokens = 256
	emuGreedyTokens = 160
)

// TestStories260KGreedy decodes greedily from a one-token prompt on the
// device's runner and on the CPU runner in f32 and requires the same
// tokens.
func TestStories260KGreedy(t *testing.T) {
	m, err := model.Load(sharedModel(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	each(t, []src.DType{src.F32}, func(t *testing.T, dev Device) {
		n := emuGreedyTokens
		if _, ok := dev.(GPU); ok {
			n = gpuGreedyTokens
		}
		var outs [2][]int32
		for i, r := range []*model.Runner{runnerOn(t, m, dev), cpuRunner(t, m)} {
			bs := 16
			if _, err := r.NewKV((n+bs)/bs+1, bs); err != nil {
				t.Fatal(err)
			}
			table := make([]blockstore.BlockID, (n+bs)/bs+1)
			for j := range table {
				table[j] = blockstore.BlockID(j)
			}
			tok := m.Config.BOS
			for pos := range n {
				logits, err := r.Forward([]batch.Row{{Tokens: []int32{tok}, Start: pos, Blocks: table, Logits: true}})
				if err != nil {
					t.Fatal(err)
				}
				tok = int32(argmax(logits))
				outs[i] = append(outs[i], tok)
			}
		}
		if !slices.Equal(outs[0], outs[1]) {
			t.Fatalf("greedy tokens differ:\ndevice %v\ncpu    %v", outs[0], outs[1])
		}
		t.Logf("%d greedy tokens identical", n)
	})
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// engineModel is a small random model for the engine runs.
func engineModel() *model.Model {
	return model.Random(model.Config{Dim: 32, Hidden: 48, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 64, MaxSeqLen: 256,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1}, 7)
}

// engineRun runs reqs on an engine over r with cfg's options and returns
// each request's tokens.
func engineRun(t *testing.T, r engine.Model, opt func(*engine.Config), reqs []engine.Request) ([][]int32, engine.Stats) {
	t.Helper()
	cfg := engine.Config{Model: r, EOS: -1, NumBlocks: 64, BlockSize: 4, MaxRunning: 8, MaxBatchTokens: 96, PrefillChunk: 32}
	opt(&cfg)
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var streams []*engine.Stream
	for _, req := range reqs {
		s, err := e.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	out := make([][]int32, len(reqs))
	for i, s := range streams {
		res := s.Result()
		if res.Err != nil {
			t.Fatalf("request %d: %v", i, res.Err)
		}
		out[i] = res.Tokens
	}
	st := e.Stats()
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out, st
}

// TestEngineEndToEnd runs the engine on the device's runner: greedy
// requests sharing a prefix give the CPU runner's tokens with the prefix
// cache on and off, static and continuous batching, and under preemption
// in a small pool; beam search gives the CPU runner's beams; seeded
// requests that sample (their draws made on the device by sample_rows)
// give the CPU runner's tokens, drawn by the engine's Samplers from its
// logits.
func TestEngineEndToEnd(t *testing.T) {
	m := engineModel()
	shared := tokens(1, 24, m.Config.Vocab)
	var greedy []engine.Request
	for i := range 6 {
		p := append(slices.Clone(shared), tokens(10+i, 3+5*i, m.Config.Vocab)...)
		greedy = append(greedy, engine.Request{Prompt: p, MaxTokens: 6 + 3*i, IgnoreEOS: true})
	}
	beams := []engine.Request{{Prompt: shared[:9], MaxTokens: 8, IgnoreEOS: true, Beam: engine.Beam{Width: 3}}}
	// Requests that sample, drawn on the device.
	var sampled []engine.Request
	for i, sp := range []engine.Sampling{
		{Temperature: 0.8, Seed: 1},
		{Temperature: 1.1, TopP: 0.9, MinP: 0.02, Seed: 2},
		{Temperature: 1, TopK: 8, TopP: 0.95, Seed: 3, FrequencyPenalty: 0.5, PresencePenalty: 0.3,
			RepetitionPenalty: 1.2, LogitBias: map[int32]float32{5: 2, 9: -3}},
		{Temperature: 0.9, TopK: 10, Seed: 4},
		{RepetitionPenalty: 1.3, Seed: 5},
	} {
		p := append(slices.Clone(shared), tokens(20+i, 4+3*i, m.Config.Vocab)...)
		sampled = append(sampled, engine.Request{Prompt: p, MaxTokens: 12, IgnoreEOS: true, Sampling: sp})
	}
	want, _ := engineRun(t, cpuRunner(t, m), func(*engine.Config) {}, greedy)
	wantBeams, _ := engineRun(t, cpuRunner(t, m), func(*engine.Config) {}, beams)
	wantSampled, _ := engineRun(t, cpuRunner(t, m), func(*engine.Config) {}, sampled)
	each(t, []src.DType{src.F32}, func(t *testing.T, dev Device) {
		for _, v := range []struct {
			name string
			opt  func(*engine.Config)
		}{
			{"cache continuous", func(*engine.Config) {}},
			{"no cache", func(c *engine.Config) { c.DisablePrefixCache = true }},
			{"static", func(c *engine.Config) { c.Batching = engine.Static }},
			{"preemption", func(c *engine.Config) { c.NumBlocks = 24; c.MaxRunning = 6 }},
		} {
			t.Run(v.name, func(t *testing.T) {
				got, st := engineRun(t, runnerOn(t, m, dev), v.opt, greedy)
				for i := range got {
					if !slices.Equal(got[i], want[i]) {
						t.Errorf("request %d: %v, CPU runner %v", i, got[i], want[i])
					}
				}
				if v.name == "preemption" && st.Preemptions == 0 {
					t.Error("no preemption in a 24-block pool")
				}
				if v.name == "cache continuous" && st.CacheHitDevice == 0 {
					t.Error("no prefix cache hit")
				}
			})
		}
		t.Run("beams", func(t *testing.T) {
			got, _ := engineRun(t, runnerOn(t, m, dev), func(*engine.Config) {}, beams)
			if !slices.Equal(got[0], wantBeams[0]) {
				t.Errorf("beam search: %v, CPU runner %v", got[0], wantBeams[0])
			}
		})
		t.Run("sampled", func(t *testing.T) {
			log := launchLog{dev, map[string]int{}}
			got, _ := engineRun(t, runnerOn(t, m, log), func(*engine.Config) {}, sampled)
			for i := range got {
				if !slices.Equal(got[i], wantSampled[i]) {
					t.Errorf("sampled request %d: %v, CPU runner %v", i, got[i], wantSampled[i])
				}
			}
			if log.kernels["sample_rows"] == 0 {
				t.Error("no draw was made on the device")
			}
		})
	})
}

// TestBackendRefuses checks what the Backend refuses: tensors it cannot
// compute on (an error), ops on handles that do not fit or on a buffer in
// the form its last writer did not write (panics: broken caller
// invariants), and a step whose rows the pool cannot hold (Logits' error).
func TestBackendRefuses(t *testing.T) {
	each(t, []src.DType{src.BF16}, func(t *testing.T, dev Device) {
		b := NewBackend(dev)
		defer b.Close()
		if _, err := b.Upload(kernels.Tensor{Type: kernels.F16, Rows: 2, Cols: 2, Data: make([]byte, 6)}); err == nil {
			t.Error("an F16 tensor short of its size uploaded")
		}
		if _, err := b.Upload(kernels.Tensor{Type: quant.Q8_K, Rows: 1, Cols: 256, Data: make([]byte, 292)}); err == nil {
			t.Error("a Q8_K (activation) tensor uploaded")
		}
		if _, err := b.Upload(kernels.FromF32(nil, 0, 4)); err == nil {
			t.Error("an empty tensor uploaded")
		}
		w, err := b.Upload(kernels.FromF32(make([]float32, 12), 3, 4))
		if err != nil {
			t.Fatal(err)
		}
		norm, err := b.Upload(kernels.FromF32([]float32{1, 1, 1, 1}, 1, 4))
		if err != nil {
			t.Fatal(err)
		}
		x, y, z := b.Buffer(4), b.Buffer(3), b.Buffer(5)
		kv := kernels.KVConfig{Layers: 1, KVHeads: 1, HeadDim: 4, BlockSize: 4, NumBlocks: 2, Type: kernels.F16}
		if _, err := b.NewKV(kv); err == nil || !strings.Contains(err.Error(), "for the CPU backend") {
			t.Errorf("an F16 K/V config: error %v, want one saying it is for the CPU backend", err)
		}
		kv.Type = kernels.F32
		if _, err := b.NewKV(kv); err != nil {
			t.Fatal(err)
		}
		b.Begin([]batch.Row{{Tokens: []int32{1, 2}, Blocks: []blockstore.BlockID{0}}})
		b.Embed(x, w) // x is float32 now
		for name, op := range map[string]func(){
			"widths":      func() { b.MatMul(z, x, w) },
			"float32 in":  func() { b.MatMul(y, x, w) },
			"matrix norm": func() { b.RMSNorm(x, x, w, 1e-5) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: no panic", name)
					}
				}()
				op()
			}()
		}
		// Positions past the block table: the step fails, in Logits.
		b.Begin([]batch.Row{{Tokens: make([]int32, 6), Blocks: []blockstore.BlockID{0}, Logits: true}})
		if _, err := b.Logits(x, norm, w, 1e-5); err == nil {
			t.Error("a step past its block table ran")
		}
	})
}

// TestProfileStep checks that once ProfileStep has run the largest steps
// (40 tokens over 3 sequences), steps within them allocate no device
// memory, where the same steps without the profile do: a prefill, and
// decodes one of which is past 128 positions, so that attention splits
// (the emulator claims two multiprocessors).
func TestProfileStep(t *testing.T) {
	each(t, []src.DType{src.BF16}, func(t *testing.T, plain Device) {
		c := tinyModel
		m := model.Random(c, 4)
		steps := [][]batch.Row{{}, {}}
		tb := seqTables(3, 24, 8)
		for i := range 3 {
			start := 13 + i/2 + 140*(i/2) // the third at 154
			steps[0] = append(steps[0], batch.Row{Tokens: tokens(i, 13+i/2, c.Vocab), Start: start - 13 - i/2, Blocks: tb[i], Logits: true})
			steps[1] = append(steps[1], batch.Row{Tokens: tokens(i+5, 1, c.Vocab), Start: start, Blocks: tb[i], Logits: true})
		}
		for _, profile := range []bool{true, false} {
			dev := launchLog{plain, map[string]int{}}
			r := runnerOn(t, m, dev)
			if profile {
				if err := ProfileStep(r, 40, 3, 8); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := r.NewKV(3*24, 8); err != nil {
				t.Fatal(err)
			}
			before := dev.kernels["Alloc"]
			for _, st := range steps {
				if _, err := r.Forward(st); err != nil {
					t.Fatal(err)
				}
			}
			// The decode again, its rows drawn on the device with as
			// many penalty entries as a draw can have (the vocabulary,
			// shorter than the context).
			var entries []sample.Entry
			for tok := range int32(c.Vocab) {
				entries = append(entries, sample.Entry{Token: tok, Count: 1})
			}
			draw := &sample.Draw{Temperature: 0.7, U: 0.3, Entries: entries}
			if _, _, err := r.ForwardSample(steps[1], make([]bool, 3), []*sample.Draw{draw, draw, draw}); err != nil {
				t.Fatal(err)
			}
			if grew := dev.kernels["Alloc"] - before; profile != (grew == 0) {
				t.Errorf("profiled %v: the steps allocated %d times", profile, grew)
			}
		}
		if err := ProfileStep(runnerOn(t, m, plain), 0, 3, 8); err == nil {
			t.Error("a profile step of no tokens ran")
		}
	})
}
