package model

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// encodeGGUF returns the GGUF v3 file of meta and tensors.
func encodeGGUF(meta []ggufKV, tensors []ggufOut) []byte {
	var b bytes.Buffer
	if err := writeGGUFTo(&b, meta, tensors); err != nil {
		panic(err) // a bytes.Buffer does not fail; a bad metadata type is the test's bug
	}
	return b.Bytes()
}

// halfValue is the exact value of binary16 h, from the definition.
func halfValue(h uint16) float32 {
	exp, frac := int(h>>10&0x1f), float64(h&0x3ff)
	v := math.Ldexp(frac, -24) // subnormal
	if exp != 0 {
		v = math.Ldexp(1024+frac, exp-25)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return float32(v)
}

// roundToHalf replaces every value of x by the half nearest it, so that a
// model written as F16 loads back exactly.
func roundToHalf(x []float32) {
	for i, v := range x {
		x[i] = halfValue(floatToHalf(v))
	}
}

// matrices returns every weight matrix of m (the classifier once, even
// when tied): the tensors a converter stores as F16.
func (m *Model) matrices() [][]float32 {
	out := [][]float32{m.Embedding}
	if !m.Config.SharedClassifier {
		out = append(out, m.Classifier)
	}
	for _, l := range m.Layers {
		out = append(out, l.Wq, l.Wk, l.Wv, l.Wo, l.W1, l.W2, l.W3)
	}
	return out
}

// writeGGUF writes m as f says to a file in a test's temporary folder and
// returns its path. With f.f16 it first rounds m's matrices to halves, so
// the file holds m exactly.
func writeGGUF(t testing.TB, m *Model, f ggufFile) string {
	t.Helper()
	if f.name == "" {
		f.name = "test " + f.arch
	}
	if f.f16 {
		for _, x := range m.matrices() {
			roundToHalf(x)
		}
	}
	path := filepath.Join(t.TempDir(), f.arch+".gguf")
	if err := os.WriteFile(path, encodeGGUF(ggufMetaOf(m, f), ggufTensorsOf(m, f)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWriteGGUF writes random Llama models with the exported writer, in
// F32 and F16, and loads them back: the same config and name, and the same
// tensors (F16 ones rounded to halves, by the definition of binary16).
func TestWriteGGUF(t *testing.T) {
	c := Config{Dim: 24, Hidden: 40, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 30, MaxSeqLen: 64,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1}
	for _, f16 := range []bool{false, true} {
		src := Random(c, 3)
		src.Name = "random"
		path := filepath.Join(t.TempDir(), "m.gguf")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteGGUF(f, src, f16); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		m, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if f16 {
			for _, x := range src.matrices() {
				roundToHalf(x)
			}
		}
		got := *m
		got.Tokenizer = nil
		if !reflect.DeepEqual(&got, src) {
			t.Errorf("f16 %v: the model loaded back differs from the one written", f16)
		}
	}
	qwen := Random(Config{Dim: 24, Hidden: 40, Layers: 1, Heads: 4, KVHeads: 2, Vocab: 30, MaxSeqLen: 64,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1, Arch: Arch{QKNorm: true}}, 4)
	if err := WriteGGUF(io.Discard, qwen, false); err == nil {
		t.Error("a q/k-norm model written as llama")
	}
}
