package main

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/internal/vocabtest"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/model"
)

// TestGenModel writes a tiny random model in F32, F16 and Q8_0, loads it
// back, and generates from it: the F32 file holds model.Random's weights
// for the seed exactly, the others hold matrices of their type, and greedy
// generation from each file runs.
func TestGenModel(t *testing.T) {
	c := model.Config{Dim: 32, Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 40, MaxSeqLen: 2048,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1}
	for typ, want := range map[string]kernels.DType{"f32": kernels.F32, "f16": kernels.F16, "q8_0": kernels.Q8_0} {
		path := filepath.Join(t.TempDir(), "m.gguf")
		code, _, stderr := runArgs("gen-model", "--out", path, "--type", typ, "--seed", "5", "--dim", "32", "--hidden", "64",
			"--layers", "2", "--heads", "4", "--kv-heads", "2", "--vocab", "40")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", typ, code, stderr)
		}
		m, err := model.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if m.Config != c {
			t.Fatalf("%s: config %+v, want %+v", typ, m.Config, c)
		}
		if got := m.Layers[1].W1.Type; got != want {
			t.Errorf("%s: matrices of %v", typ, got)
		}
		if typ == "f32" {
			if got, want := weights(m), weights(model.Random(c, 5)); !slices.EqualFunc(got, want, sameTensor) {
				t.Error("f32: the file's weights are not model.Random's for the seed")
			}
		}
		code, stdout, stderr := runArgs("generate", "--model", path, "--prompt-ids", "1 2 3", "--ids", "--max-tokens", "8")
		if code != 0 || len(parseOut(t, stdout)) != 8 {
			t.Fatalf("%s: generate: exit %d, %q %s", typ, code, stdout, stderr)
		}
	}
}

// weights lists m's tensors in a fixed order.
func weights(m *model.Model) []kernels.Tensor {
	out := []kernels.Tensor{m.Embedding, m.FinalNorm, m.Classifier, m.RopeFactors}
	for _, l := range m.Layers {
		out = append(out, l.AttnNorm, l.Wq, l.Wk, l.Wv, l.Wo, l.Bq, l.Bk, l.Bv, l.QNorm, l.KNorm, l.FFNNorm, l.W1, l.W2, l.W3)
	}
	return out
}

// sameTensor reports whether a and b hold the same values in the same
// type and shape.
func sameTensor(a, b kernels.Tensor) bool {
	return a.Type == b.Type && a.Rows == b.Rows && a.Cols == b.Cols && bytes.Equal(a.Data, b.Data)
}

// TestGenModelPreset checks the TinyLlama preset's shape by its published
// parameter count, 1,100,048,384, and refuses bad flags.
func TestGenModelPreset(t *testing.T) {
	if n := parameters(presets["tinyllama-1.1b"]); n != 1_100_048_384 {
		t.Errorf("tinyllama-1.1b: %d parameters", n)
	}
	for _, args := range [][]string{
		{"--dim", "8"},
		{"--out", "x.gguf", "--preset", "llama-70b"},
		{"--out", "x.gguf", "--type", "q4"},
		{"--out", "x.gguf", "--type", "q4_k", "--dim", "32", "--heads", "4", "--kv-heads", "2"}, // rows of 32, blocks of 256
		{"--out", "x.gguf", "--heads", "5"},
	} {
		code, _, stderr := runArgs(append([]string{"gen-model"}, args...)...)
		if code != 2 || !strings.Contains(stderr, "gen-model") {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
}

// TestGenModelTokenizer: --tokenizer gives the model a real vocabulary
// (GPT-2's, from llama.cpp's vocabulary file) and --chatml its markers and
// template, so the file serves chat; a --vocab below the tokenizer's size
// and --chatml alone are refused.
func TestGenModelTokenizer(t *testing.T) {
	vocab := vocabtest.Path(t, "vocab/ggml-vocab-gpt-2.gguf")
	path := filepath.Join(t.TempDir(), "chat.gguf")
	code, _, stderr := runArgs("gen-model", "--out", path, "--tokenizer", vocab, "--chatml", "--dim", "16", "--hidden", "32",
		"--layers", "1", "--heads", "2", "--kv-heads", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	m, err := model.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	const gpt2 = 50257 // GPT-2's published vocabulary size
	if m.Config.Vocab != gpt2+2 || m.Tokenizer.VocabSize() != gpt2+2 {
		t.Fatalf("model %d logits, tokenizer %d tokens; want %d", m.Config.Vocab, m.Tokenizer.VocabSize(), gpt2+2)
	}
	if got := m.Tokenizer.Encode("Hello world"); !slices.Equal(got, []int32{15496, 995}) {
		t.Fatalf("Encode(Hello world) = %v, want GPT-2's 15496 995", got)
	}
	ct, ok := m.Tokenizer.(interface{ ChatTemplate() string })
	if !ok || ct.ChatTemplate() != model.ChatMLTemplate {
		t.Fatalf("chat template missing (%T)", m.Tokenizer)
	}
	for _, args := range [][]string{
		{"--tokenizer", vocab, "--vocab", "100"},
		{"--chatml"},
	} {
		args = append([]string{"gen-model", "--out", filepath.Join(t.TempDir(), "x.gguf")}, args...)
		if code, _, stderr := runArgs(args...); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", args[3:], code, stderr)
		}
	}
}
