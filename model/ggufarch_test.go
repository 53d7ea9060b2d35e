package model

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/gguf"
	"github.com/prefixd/prefixd/kernels"
)

// archCase is a small model of one GGUF architecture, as a converter
// would write it.
type archCase struct {
	name string
	c    Config
	file ggufFile
	// llama3 gives the model Llama 3.1-style rope_freqs, computed for a
	// short original context so that the test's positions feel them.
	llama3 bool
}

// archCases covers every architecture of ggufArchs, tied and untied
// classifiers, F32 and F16 matrices, grouped-query attention, and a head
// width apart from dim/heads.
func archCases() []archCase {
	base := Config{Dim: 32, Hidden: 48, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 40, MaxSeqLen: 64,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1}
	with := func(edit func(*Config)) Config {
		c := base
		edit(&c)
		return c
	}
	return []archCase{
		{name: "llama2 f32", c: with(func(c *Config) { c.KVHeads = 4 }), file: ggufFile{arch: "llama"}},
		{name: "llama f16 tied", c: with(func(c *Config) { c.SharedClassifier = true }), file: ggufFile{arch: "llama", f16: true}},
		{name: "llama3 rope_freqs", c: with(func(c *Config) { c.RopeTheta = 500000 }), file: ggufFile{arch: "llama", f16: true}, llama3: true},
		{name: "mistral", c: with(func(c *Config) { c.RopeTheta = 1e6 }), file: ggufFile{arch: "mistral"}},
		{name: "qwen2 tied", c: with(func(c *Config) {
			c.Arch = Arch{Rope: kernels.RopeHalves, QKVBias: true} // llama.cpp: NEOX rope, q/k/v biases
			c.RopeTheta, c.NormEps, c.SharedClassifier = 1e6, 1e-6, true
		}), file: ggufFile{arch: "qwen2", f16: true}},
		{name: "qwen3 wide heads", c: with(func(c *Config) {
			c.Arch = Arch{Rope: kernels.RopeHalves, QKNorm: true}
			c.HeadWidth = 16 // q is 4·16 = 64 wide on a 32-wide model, as Qwen3-0.6B's 2048 on 1024
			c.RopeTheta, c.NormEps = 1e6, 1e-6
		}), file: ggufFile{arch: "qwen3"}},
		{name: "qwen3 tied f16", c: with(func(c *Config) {
			c.Arch = Arch{Rope: kernels.RopeHalves, QKNorm: true}
			c.HeadWidth, c.KVHeads, c.SharedClassifier = 4, 1, true // narrower: q 16 wide
		}), file: ggufFile{arch: "qwen3", f16: true}},
	}
}

// model returns the case's random model; its GGUF file holds it exactly.
func (a archCase) model(t testing.TB, seed uint64) *Model {
	t.Helper()
	m := Random(a.c, seed)
	if a.llama3 {
		f, err := Llama3RopeFactors(float64(a.c.RopeTheta), a.c.HeadDim(),
			RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 64})
		if err != nil {
			t.Fatal(err)
		}
		m.RopeFactors = vecT(f)
	}
	if err := m.check(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGGUFArchitecturesMatchReference writes each architecture's model as
// GGUF, loads it, checks that the loader recovered the config and every
// tensor exactly, and compares the Runner's logits with the float64
// reference over a prefill and greedy decode steps.
func TestGGUFArchitecturesMatchReference(t *testing.T) {
	for i, a := range archCases() {
		t.Run(a.name, func(t *testing.T) {
			src := a.model(t, uint64(10+i))
			m, err := Load(writeGGUF(t, src, a.file))
			if err != nil {
				t.Fatal(err)
			}
			if m.Config != src.Config {
				t.Fatalf("config %+v, want %+v", m.Config, src.Config)
			}
			if m.Name != "test "+a.file.arch || m.Tokenizer != nil {
				t.Fatalf("name %q, tokenizer %v", m.Name, m.Tokenizer)
			}
			if a.c.SharedClassifier && &m.Classifier.Data[0] != &m.Embedding.Data[0] {
				t.Fatal("tied classifier loaded as a copy")
			}
			if err := sameWeights(m, src); err != nil {
				t.Fatal(err)
			}
			ref := newReference(src)
			compareWithReference(t, m, ref, []int32{3, 14, 15, 9, 26, 5, 35, 8, 39, 1})
			if a.llama3 {
				// The factors must matter at these positions, or this test
				// could not tell a loader that dropped them.
				plain := *src
				plain.RopeFactors = kernels.Tensor{}
				checkDiffers(t, m, newReference(&plain), []int32{3, 14, 15, 9, 26, 5, 35, 8, 39, 1})
			}
		})
	}
}

// compareWithReference prefills prompt on a Runner of m and decodes
// greedily, checking the logits against ref at every step.
func compareWithReference(t *testing.T, m *Model, ref *reference, prompt []int32) {
	t.Helper()
	h := newHarness(t, m, 8, 4)
	tb := h.pool.NewTable()
	var want []float64
	for _, tok := range prompt {
		want = ref.step(tok)
	}
	got := h.prefill(t, tb, prompt)
	for step := range 12 {
		if d := maxAbsDiff(got, want); d > 1e-4 {
			t.Fatalf("step %d: logits differ from the reference by %g", step, d)
		}
		tok := argmax32(got)
		want = ref.step(tok)
		got = h.prefill(t, tb, []int32{tok})
	}
}

// checkDiffers fails unless m's logits for prompt differ clearly from
// ref's.
func checkDiffers(t *testing.T, m *Model, ref *reference, prompt []int32) {
	t.Helper()
	var want []float64
	for _, tok := range prompt {
		want = ref.step(tok)
	}
	h := newHarness(t, m, 8, 4)
	if d := maxAbsDiff(h.prefill(t, h.pool.NewTable(), prompt), want); d < 1e-2 {
		t.Fatalf("logits differ from the altered reference by only %g", d)
	}
}

// hfPermute reorders the rows of w (heads heads of hd rows, in Hugging
// Face's rotate-halves order) as llama.cpp's convert_hf_to_gguf.py
// permute does for llama q and k: reshape (heads, 2, hd/2, cols), swap
// axes 1 and 2, so row h·hd+2i+j of the result is row h·hd+j·hd/2+i.
func hfPermute(w []float32, heads, hd int) []float32 {
	cols := len(w) / (heads * hd)
	out := make([]float32, len(w))
	for h := range heads {
		for i := range hd / 2 {
			for j := range 2 {
				copy(out[(h*hd+2*i+j)*cols:][:cols], w[(h*hd+j*hd/2+i)*cols:][:cols])
			}
		}
	}
	return out
}

// TestGGUFLlamaLayoutIsHFPermuted checks llama's adjacent-pair RoPE
// against Hugging Face's: a model in HF's layout (rotate halves), its q
// and k rows permuted as llama.cpp's converter does and written as GGUF
// llama, gives the HF model's logits.
func TestGGUFLlamaLayoutIsHFPermuted(t *testing.T) {
	c := Config{Dim: 32, Hidden: 48, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 40, MaxSeqLen: 64,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1, Arch: Arch{Rope: kernels.RopeHalves}}
	hf := Random(c, 20)
	gg := Random(c, 20)
	gg.Config.Arch = Arch{}
	for i := range gg.Layers {
		gg.Layers[i].Wq = kernels.FromF32(hfPermute(fl(hf.Layers[i].Wq), c.Heads, c.HeadDim()), c.QDim(), c.Dim)
		gg.Layers[i].Wk = kernels.FromF32(hfPermute(fl(hf.Layers[i].Wk), c.KVHeads, c.HeadDim()), c.KVDim(), c.Dim)
	}
	m, err := Load(writeGGUF(t, gg, ggufFile{arch: "llama"}))
	if err != nil {
		t.Fatal(err)
	}
	compareWithReference(t, m, newReference(hf), []int32{7, 1, 30, 22, 4, 17})
}

// TestLlama3RopeFactors checks the llama3 divisors for Llama 3.1's
// parameters (head width 128, theta 500000, factor 8, low_freq_factor 1,
// high_freq_factor 4, original context 8192) against values worked by
// hand: pair i has wavelength 2π·500000^(i/64), below 2048 for i ≤ 28
// (divisor 1), above 8192 for i ≥ 35 (divisor 8); pair 32's 4442.883
// gives smooth = (8192/4442.883-1)/3 and divisor 8/(1+7·smooth) = 2.69453.
func TestLlama3RopeFactors(t *testing.T) {
	f, err := Llama3RopeFactors(500000, 128, RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192})
	if err != nil {
		t.Fatal(err)
	}
	if len(f) != 64 {
		t.Fatalf("%d factors, want 64", len(f))
	}
	for i, v := range f {
		switch {
		case i <= 28 && v != 1, i >= 35 && v != 8, i > 28 && i < 35 && !(v > 1 && v < 8):
			t.Fatalf("factor %d = %v", i, v)
		}
	}
	for i, want := range map[int]float64{29: 1.2074839, 32: 2.6945297, 34: 5.2573266} {
		if math.Abs(float64(f[i])-want) > 1e-6 {
			t.Fatalf("factor %d = %v, want %v", i, f[i], want)
		}
	}
	if !slices.IsSorted(f) {
		t.Fatalf("factors not monotonic: %v", f)
	}
	for _, bad := range []RopeScaling{
		{Factor: 0, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192},
		{Factor: 8, LowFreqFactor: 4, HighFreqFactor: 4, OriginalContext: 8192},
		{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: math.NaN()},
	} {
		if _, err := Llama3RopeFactors(500000, 128, bad); err == nil {
			t.Fatalf("%+v accepted", bad)
		}
	}
}

// TestGGUFRopeScalingMetadata reads rope scaling from metadata alone:
// llama3 by its parameters (the divisors Llama3RopeFactors computes),
// linear as one divisor for every pair (times rope_freqs when the file has
// both, as llama.cpp's freq_scale multiplies), none as plain RoPE.
func TestGGUFRopeScalingMetadata(t *testing.T) {
	base := archCases()[0]
	hd := base.c.HeadDim()
	l3, err := Llama3RopeFactors(float64(base.c.RopeTheta), hd, RopeScaling{Factor: 16, LowFreqFactor: 2, HighFreqFactor: 8, OriginalContext: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		extra []gguf.KV
		freqs []float32 // rope_freqs.weight, or nil
		want  []float32
	}{
		{"none", []gguf.KV{{Key: "llama.rope.scaling.type", Value: "none"}}, nil, nil},
		{"llama3", []gguf.KV{{Key: "llama.rope.scaling.type", Value: "llama3"}, {Key: "llama.rope.scaling.factor", Value: float32(16)},
			{Key: "llama.rope.scaling.low_freq_factor", Value: float32(2)}, {Key: "llama.rope.scaling.high_freq_factor", Value: float32(8)},
			{Key: "llama.rope.scaling.original_context_length", Value: uint32(100)}}, nil, l3},
		{"llama3 with rope_freqs", []gguf.KV{{Key: "llama.rope.scaling.type", Value: "llama3"}}, []float32{1, 2, 3, 4}, []float32{1, 2, 3, 4}},
		{"linear", []gguf.KV{{Key: "llama.rope.scaling.type", Value: "linear"}, {Key: "llama.rope.scaling.factor", Value: float32(4)}}, nil, []float32{4, 4, 4, 4}},
		{"linear with rope_freqs", []gguf.KV{{Key: "llama.rope.scaling.type", Value: "linear"}, {Key: "llama.rope.scaling.factor", Value: float32(2)}},
			[]float32{1, 1.5, 3, 8}, []float32{2, 3, 6, 16}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := base.model(t, 30)
			src.RopeFactors = vecT(tc.freqs)
			f := base.file
			f.extra = tc.extra
			m, err := Load(writeGGUF(t, src, f))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(fl(m.RopeFactors), tc.want) || (tc.want == nil) != (m.RopeFactors.Rows == 0) {
				t.Fatalf("rope factors %v, want %v", m.RopeFactors, tc.want)
			}
		})
	}
}

// TestGGUFArchitectureErrors: what the loader cannot run is refused with
// an error that says what and why.
func TestGGUFArchitectureErrors(t *testing.T) {
	llama, qwen2, qwen3 := archCases()[0], archCases()[4], archCases()[5]
	drop := func(name string) func([]gguf.Tensor) []gguf.Tensor {
		return func(ts []gguf.Tensor) []gguf.Tensor {
			return slices.DeleteFunc(ts, func(t gguf.Tensor) bool { return t.Name == name })
		}
	}
	for _, tc := range []struct {
		name    string
		a       archCase
		arch    string // general.architecture written, if not the case's
		extra   []gguf.KV
		omit    []string
		tensors func([]gguf.Tensor) []gguf.Tensor
		want    string
	}{
		{name: "unknown architecture", a: llama, arch: "gemma2", want: `architecture "gemma2" is not supported (supported: llama, mistral, qwen2, qwen3)`},
		{name: "no architecture", a: llama, omit: []string{"general.architecture"}, want: `architecture "" is not supported`},
		{name: "missing embedding length", a: qwen3, omit: []string{"qwen3.embedding_length"}, want: `"qwen3.embedding_length" missing`},
		{name: "keys of another architecture", a: llama, arch: "qwen2", want: `"qwen2.embedding_length" missing`},
		{name: "value width apart", a: qwen3, extra: []gguf.KV{{Key: "qwen3.attention.value_length", Value: uint32(8)}}, want: "value head width 8"},
		{name: "zero head width", a: qwen3, extra: []gguf.KV{{Key: "qwen3.attention.key_length", Value: uint32(0)}}, want: `"qwen3.attention.key_length" is 0`},
		{name: "dim not a multiple of heads", a: llama, omit: []string{"llama.attention.key_length"},
			extra: []gguf.KV{{Key: "llama.attention.head_count", Value: uint32(3)}, {Key: "llama.attention.head_count_kv", Value: uint32(3)}}, want: "not a multiple of 3 heads"},
		{name: "partial rotary", a: llama, extra: []gguf.KV{{Key: "llama.rope.dimension_count", Value: uint32(4)}}, want: "rope.dimension_count 4"},
		{name: "more blocks than tensors", a: llama, extra: []gguf.KV{{Key: "llama.block_count", Value: uint32(1 << 30)}}, want: "block_count 1073741824, but the file has"},
		{name: "head count not a size", a: llama, extra: []gguf.KV{{Key: "llama.attention.head_count", Value: "four"}}, want: "not a size"},
		{name: "theta not a number", a: llama, extra: []gguf.KV{{Key: "llama.rope.freq_base", Value: "big"}}, want: "not a number"},
		{name: "yarn", a: qwen2, extra: []gguf.KV{{Key: "qwen2.rope.scaling.type", Value: "yarn"}}, want: `rope scaling "yarn" is not supported`},
		{name: "linear factor zero", a: llama, extra: []gguf.KV{{Key: "llama.rope.scaling.type", Value: "linear"}, {Key: "llama.rope.scaling.factor", Value: float32(0)}}, want: "not positive"},
		{name: "qwen2 without a bias", a: qwen2, tensors: drop("blk.1.attn_k.bias"), want: `"blk.1.attn_k.bias" missing`},
		{name: "qwen3 without a q norm", a: qwen3, tensors: drop("blk.0.attn_q_norm.weight"), want: `"blk.0.attn_q_norm.weight" missing`},
		{name: "qwen3 read with dim/heads", a: qwen3, omit: []string{"qwen3.attention.key_length", "qwen3.attention.value_length", "qwen3.rope.dimension_count"},
			want: `"blk.0.attn_q.weight" has shape [32 64], want [32 32]`},
		{name: "rope_freqs of the wrong width", a: llama, tensors: func(ts []gguf.Tensor) []gguf.Tensor {
			return append(ts, gguf.Tensor{Name: "rope_freqs.weight", Shape: []int{3}, Type: kernels.F32, Data: kernels.FromF32([]float32{1, 2, 3}, 1, 3).Data})
		}, want: `"rope_freqs.weight" has shape [3], want [4]`},
		{name: "rope_freqs not positive", a: llama, tensors: func(ts []gguf.Tensor) []gguf.Tensor {
			return append(ts, gguf.Tensor{Name: "rope_freqs.weight", Shape: []int{4}, Type: kernels.F32, Data: kernels.FromF32([]float32{1, 0, 3, 4}, 1, 4).Data})
		}, want: "rope factor 1 is 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.a.model(t, 40)
			f := tc.a.file
			// Extra entries replace the writer's own of the same key.
			f.extra, f.omitKeys = tc.extra, map[string]bool{}
			for _, k := range tc.omit {
				f.omitKeys[k] = true
			}
			meta := ggufMetaOf(src, f)
			if tc.arch != "" {
				meta[0].Value = tc.arch
			}
			tensors := ggufTensors(t, src, f)
			if tc.tensors != nil {
				tensors = tc.tensors(tensors)
			}
			_, err := parseGGUF(encodeGGUF(meta, tensors))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseGGUF = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// archSeeds returns a GGUF file of each architecture case, and two of
// quantized weights, for the fuzzer's corpus, shrunk to one layer of width
// 16 or 32 (a few KiB) so that mutations fall on metadata and tensor infos
// as often as on weights.
func archSeeds(t testing.TB) [][]byte {
	var out [][]byte
	for i, a := range archCases() {
		a.c.Dim, a.c.Hidden, a.c.Layers, a.c.Vocab = 16, 16, 1, 8
		m := a.model(t, uint64(50+i))
		out = append(out, encodeGGUF(ggufMetaOf(m, a.file), ggufTensors(t, m, a.file)))
	}
	// Quantized matrices of 32-value blocks, small enough at this width.
	a := archCases()[0]
	a.c.Dim, a.c.Hidden, a.c.Layers, a.c.Vocab = 32, 32, 1, 8
	m := a.model(t, 59)
	for _, typ := range []kernels.DType{kernels.Q8_0, kernels.Q4_1} {
		a.file.types = func(string) kernels.DType { return typ }
		out = append(out, encodeGGUF(ggufMetaOf(m, a.file), ggufTensors(t, m, a.file)))
	}
	return out
}
