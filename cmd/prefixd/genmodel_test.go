package main

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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

// TestGenModelTokenizerFrom gives a random model Llama 2's tokenizer: the
// file loads with that vocabulary (its size, BOS and EOS, and text that
// round-trips through it), and a --vocab that disagrees is refused.
func TestGenModelTokenizerFrom(t *testing.T) {
	src := sharedModel(t, "llama-2-tiny-random.gguf")
	path := filepath.Join(t.TempDir(), "m.gguf")
	args := []string{"gen-model", "--out", path, "--type", "q8_0", "--dim", "32", "--hidden", "64", "--layers", "1",
		"--heads", "4", "--kv-heads", "2", "--tokenizer-from", src}
	if code, _, stderr := runArgs(args...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	load := func(p string) *model.Model {
		m, err := model.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	m, ref := load(path), load(src)
	if m.Tokenizer == nil || m.Config.Vocab != 32000 || m.Config.BOS != ref.Config.BOS || m.Config.EOS != ref.Config.EOS {
		t.Fatalf("vocab %d, BOS %d, EOS %d, tokenizer %v", m.Config.Vocab, m.Config.BOS, m.Config.EOS, m.Tokenizer != nil)
	}
	const text = "Hello, wörld: {\"a\": 1}"
	ids := m.Tokenizer.Encode(text)
	if !slices.Equal(ids, ref.Tokenizer.Encode(text)) || m.Tokenizer.Decode(ids) != text {
		t.Fatalf("%q encodes to %v and decodes to %q", text, ids, m.Tokenizer.Decode(ids))
	}
	if code, _, stderr := runArgs(append(args, "--vocab", "512")...); code == 0 || !strings.Contains(stderr, "32000 tokens") {
		t.Fatalf("--vocab 512 with a 32000-token tokenizer: exit %d, %s", code, stderr)
	}
}
