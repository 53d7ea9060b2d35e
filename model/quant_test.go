package model

import (
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/kernels"
)

// quantConfig is a small model whose widths are whole K-quant blocks.
var quantConfig = Config{Dim: 256, Hidden: 512, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 64, MaxSeqLen: 64,
	RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1}

// q4KM gives tensors the types a Q4_K_M file mixes: Q4_K for most
// matrices, Q6_K for the classifier and some of attn_v and ffn_down,
// Q5_0/Q5_1/Q8_0 where a width is no whole K block in real models, and
// here Q4_0, Q4_1 and Q5_K too, so every weight type runs in one model.
func q4KM(name string) kernels.DType {
	switch {
	case name == "output.weight":
		return kernels.Q6_K
	case name == "token_embd.weight":
		return kernels.Q4_K
	case strings.HasPrefix(name, "blk.0.attn_v"), strings.HasPrefix(name, "blk.1.ffn_down"):
		return kernels.Q6_K
	case strings.HasPrefix(name, "blk.1.attn_v"):
		return kernels.Q8_0
	case strings.HasSuffix(name, "attn_k.weight"):
		return map[bool]kernels.DType{true: kernels.Q5_0, false: kernels.Q5_1}[strings.HasPrefix(name, "blk.0")]
	case strings.HasPrefix(name, "blk.0.ffn_down"):
		return kernels.Q5_K
	case strings.HasPrefix(name, "blk.1.attn_output"):
		return kernels.Q4_0
	case strings.HasPrefix(name, "blk.1.ffn_up"):
		return kernels.Q4_1
	}
	return kernels.Q4_K
}

// asF32 returns m with every tensor converted to F32: the float32 path
// on exactly the values m's file holds.
func asF32(t *testing.T, m *Model) *Model {
	t.Helper()
	conv := func(x kernels.Tensor) kernels.Tensor {
		if x.Rows == 0 {
			return x
		}
		f, err := x.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		return kernels.FromF32(append([]float32(nil), f...), x.Rows, x.Cols)
	}
	out := *m
	out.closers = nil
	out.Embedding, out.FinalNorm, out.Classifier, out.RopeFactors = conv(m.Embedding), conv(m.FinalNorm), conv(m.Classifier), conv(m.RopeFactors)
	if m.Config.SharedClassifier {
		out.Classifier = out.Embedding
	}
	out.Layers = nil
	for _, l := range m.Layers {
		out.Layers = append(out.Layers, Layer{AttnNorm: conv(l.AttnNorm), Wq: conv(l.Wq), Wk: conv(l.Wk), Wv: conv(l.Wv),
			Wo: conv(l.Wo), FFNNorm: conv(l.FFNNorm), W1: conv(l.W1), W2: conv(l.W2), W3: conv(l.W3),
			Bq: conv(l.Bq), Bk: conv(l.Bk), Bv: conv(l.Bv), QNorm: conv(l.QNorm), KNorm: conv(l.KNorm)})
	}
	return &out
}

// TestQuantizedGGUFMatchesF32 loads GGUF files whose matrices are of each
// weight type, and a Q4_K_M-style mix of them, keeps them in that type
// and checks the logits against the float32 path on the dequantized
// values: they differ only by the activations' 8-bit quantization in the
// integer products (none for F16 and BF16).
func TestQuantizedGGUFMatchesF32(t *testing.T) {
	one := func(typ kernels.DType) func(string) kernels.DType { return func(string) kernels.DType { return typ } }
	for _, tc := range []struct {
		name  string
		arch  string
		types func(string) kernels.DType
		tied  bool
	}{
		{"F16", "llama", one(kernels.F16), false},
		{"BF16", "qwen3", one(kernels.BF16), true},
		{"Q8_0", "llama", one(kernels.Q8_0), false},
		{"Q4_0", "llama", one(kernels.Q4_0), true},
		{"Q5_1", "qwen2", one(kernels.Q5_1), false},
		{"Q4_K", "llama", one(kernels.Q4_K), false},
		{"Q5_K", "qwen2", one(kernels.Q5_K), true},
		{"Q6_K", "llama", one(kernels.Q6_K), false},
		{"Q4_K_M mix", "llama", q4KM, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := quantConfig
			c.Arch, c.SharedClassifier = ggufArchs[tc.arch], tc.tied
			m, err := Load(writeGGUF(t, Random(c, 80), ggufFile{arch: tc.arch, types: tc.types}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			if want := tc.types("blk.1.attn_q.weight"); m.Layers[1].Wq.Type != want {
				t.Fatalf("attn_q loaded as %v, want %v kept", m.Layers[1].Wq.Type, want)
			}
			prompt, more := []int32{3, 14, 15, 9, 26, 5}, []int32{35, 8, 39, 60}
			got, want := decodeLogits(t, m, prompt, more), decodeLogits(t, asF32(t, m), prompt, more)
			tol := 1e-4 // F16, BF16: converted to float32, summed in another order
			if tc.types("") != kernels.F16 && tc.types("") != kernels.BF16 {
				// The activations' 8-bit quantization, through two layers:
				// under 5% of the logits' range (3.7% seen for Q4_K).
				tol = 0.05 * maxAbsSteps(want)
			}
			if d := maxDiffSteps(got, want); d > tol {
				t.Fatalf("logits differ from the float32 path by %g (tolerance %g)", d, tol)
			}
		})
	}
}

// fileBytes is the size of m's weights as held: the file's bytes for a
// mapped model.
func fileBytes(m *Model) int {
	n := 0
	for _, t := range append(m.tensors(), m.RopeFactors) {
		n += len(t.Data)
	}
	return n
}

// maxAbsSteps is the largest magnitude among a run's logits.
func maxAbsSteps(steps [][]float32) float64 {
	m := 0.0
	for _, s := range steps {
		for _, v := range s {
			m = math.Max(m, math.Abs(float64(v)))
		}
	}
	return m
}

// TestQuantizedModelHeapIsTheFile loads Q8_0 and Q4_K models and checks
// that loading and building a Runner leave the weights in the file's
// mapping: the heap grows by well under a quarter of what the weights
// take as float32 (it was 100%, every tensor converted, before).
func TestQuantizedModelHeapIsTheFile(t *testing.T) {
	for _, typ := range []kernels.DType{kernels.Q8_0, kernels.Q4_K} {
		t.Run(typ.String(), func(t *testing.T) {
			c := quantConfig
			c.Dim, c.Hidden, c.Layers, c.Vocab = 512, 1024, 4, 4096
			path := writeGGUF(t, Random(c, 81), ggufFile{arch: "llama", types: func(string) kernels.DType { return typ }})
			f32Bytes := 4 * (2*c.Vocab*c.Dim + c.Layers*(2*c.Dim*c.Dim+2*c.KVDim()*c.Dim+3*c.Dim*c.Hidden))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			m, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, m, 8, 4)
			h.prefill(t, h.pool.NewTable(), []int32{1, 2, 3})
			runtime.GC()
			runtime.ReadMemStats(&after)
			grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			t.Logf("%v: heap grew by %d bytes, the float32 weights take %d, the file's %d", typ, grown, f32Bytes, fileBytes(m))
			if grown > int64(f32Bytes)/4 {
				t.Fatalf("heap grew by %d bytes, over a quarter of the %d bytes of float32 weights", grown, f32Bytes)
			}
			runtime.KeepAlive(h)
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
