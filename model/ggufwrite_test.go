package model

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/gguf"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
)

// encodeGGUF returns the GGUF v3 file of meta and tensors, written by
// package gguf's writer.
func encodeGGUF(meta []gguf.KV, tensors []gguf.Tensor) []byte {
	var b bytes.Buffer
	if err := gguf.Write(&b, meta, tensors); err != nil {
		panic(err) // a bytes.Buffer does not fail; a bad metadata value or tensor is the test's bug
	}
	return b.Bytes()
}

// ggufTensors is ggufTensorsOf, failing t on an error.
func ggufTensors(t testing.TB, m *Model, f ggufFile) []gguf.Tensor {
	t.Helper()
	ts, err := ggufTensorsOf(m, f)
	if err != nil {
		t.Fatal(err)
	}
	return ts
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
		x[i] = halfValue(quant.F32ToF16(v))
	}
}

// sameWeights returns an error unless got has want's config and every
// tensor of want, value for value (whatever types they are stored in).
func sameWeights(got, want *Model) error {
	if got.Config != want.Config {
		return fmt.Errorf("config %+v, want %+v", got.Config, want.Config)
	}
	pairs := [][2]kernels.Tensor{{got.Embedding, want.Embedding}, {got.FinalNorm, want.FinalNorm},
		{got.Classifier, want.Classifier}, {got.RopeFactors, want.RopeFactors}}
	for i := range want.Layers {
		g, w := got.Layers[i], want.Layers[i]
		pairs = append(pairs, [][2]kernels.Tensor{{g.AttnNorm, w.AttnNorm}, {g.Wq, w.Wq}, {g.Wk, w.Wk}, {g.Wv, w.Wv},
			{g.Wo, w.Wo}, {g.FFNNorm, w.FFNNorm}, {g.W1, w.W1}, {g.W2, w.W2}, {g.W3, w.W3}, {g.Bq, w.Bq},
			{g.Bk, w.Bk}, {g.Bv, w.Bv}, {g.QNorm, w.QNorm}, {g.KNorm, w.KNorm}}...)
	}
	for i, p := range pairs {
		if p[0].Rows != p[1].Rows || p[0].Cols != p[1].Cols || !slices.Equal(fl(p[0]), fl(p[1])) {
			return fmt.Errorf("tensor %d (in Model order) differs from the one written", i)
		}
	}
	return nil
}

// fl returns t's values as float32 (a view of an F32 tensor's data), nil
// for the zero Tensor: what the references compute with.
func fl(t kernels.Tensor) []float32 {
	if t.Rows == 0 {
		return nil
	}
	f, err := t.Float32s()
	if err != nil {
		panic(err)
	}
	return f
}

// vecT is x as a one-row F32 tensor, the zero Tensor for nil.
func vecT(x []float32) kernels.Tensor {
	if x == nil {
		return kernels.Tensor{}
	}
	return kernels.FromF32(x, 1, len(x))
}

// matrices returns every weight matrix of m (the classifier once, even
// when tied): the tensors a converter stores as F16.
func (m *Model) matrices() [][]float32 {
	out := [][]float32{fl(m.Embedding)}
	if !m.Config.SharedClassifier {
		out = append(out, fl(m.Classifier))
	}
	for _, l := range m.Layers {
		for _, t := range []kernels.Tensor{l.Wq, l.Wk, l.Wv, l.Wo, l.W1, l.W2, l.W3} {
			out = append(out, fl(t))
		}
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
	if err := os.WriteFile(path, encodeGGUF(ggufMetaOf(m, f), ggufTensors(t, m, f)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWriteGGUF writes random Llama models with the exported writer, in
// F32, F16 and Q8_0, and loads them back: the same config and name, and
// the same tensors (F16 ones rounded to halves, by the definition of
// binary16; Q8_0 ones within a quantization step, Q8_0 in the file).
func TestWriteGGUF(t *testing.T) {
	c := Config{Dim: 32, Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 30, MaxSeqLen: 64,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1}
	for _, typ := range []kernels.DType{kernels.F32, kernels.F16, kernels.Q8_0} {
		src := Random(c, 3)
		src.Name = "random"
		path := filepath.Join(t.TempDir(), "m.gguf")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteGGUF(f, src, typ); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		m, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if m.Name != src.Name || m.Tokenizer != nil {
			t.Errorf("%v: name %q and tokenizer %v, want %q and none", typ, m.Name, m.Tokenizer, src.Name)
		}
		if m.Layers[1].W2.Type != typ || m.Embedding.Type != typ || m.FinalNorm.Type != kernels.F32 {
			t.Errorf("%v: matrices of %v and %v, a norm of %v", typ, m.Layers[1].W2.Type, m.Embedding.Type, m.FinalNorm.Type)
		}
		switch typ {
		case kernels.F16:
			for _, x := range src.matrices() {
				roundToHalf(x)
			}
		case kernels.Q8_0:
			// Every random weight is within 6/sqrt(fan-in) of zero, so a
			// Q8_0 step (a block's largest magnitude / 127) is below 6/127.
			for i, x := range src.matrices() {
				got := m.matrices()[i]
				for j := range x {
					if math.Abs(float64(got[j]-x[j])) > 6/127.0/math.Sqrt(float64(c.Dim)) {
						t.Fatalf("Q8_0: matrix %d value %d is %v, was %v", i, j, got[j], x[j])
					}
				}
			}
		}
		if typ != kernels.Q8_0 {
			if err := sameWeights(m, src); err != nil {
				t.Errorf("%v: %v", typ, err)
			}
		}
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	}
	qwen := Random(Config{Dim: 32, Hidden: 64, Layers: 1, Heads: 4, KVHeads: 2, Vocab: 30, MaxSeqLen: 64,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1, Arch: Arch{QKNorm: true}}, 4)
	if err := WriteGGUF(io.Discard, qwen, kernels.F32); err == nil {
		t.Error("a q/k-norm model written as llama")
	}
	if err := WriteGGUF(io.Discard, Random(c, 5), kernels.Q4_K); err == nil {
		t.Error("rows of 32 written as Q4_K's 256-value blocks")
	}
}

// TestWriteGGUFHalfBits pins the F16 encoding WriteGGUF writes to known
// bit patterns, so the F16 models above are what they claim to be.
func TestWriteGGUFHalfBits(t *testing.T) {
	cases := []struct {
		f float32
		h uint16
	}{
		{1, 0x3C00}, {-2, 0xC000}, {65504, 0x7BFF}, {0x1p-24, 0x0001}, {0x1p-14, 0x0400},
		{1 + 0x1p-11, 0x3C00},   // a tie rounds to the even mantissa
		{1 + 3*0x1p-11, 0x3C02}, // and up from an odd one
		{0x1p-26, 0}, {65520, 0x7C00}, {0, 0},
	}
	c := Config{Dim: 4, Hidden: 8, Layers: 1, Heads: 1, KVHeads: 1, Vocab: 3, MaxSeqLen: 8,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1, SharedClassifier: true}
	m := Random(c, 5)
	emb := fl(m.Embedding) // 12 values: the cases first
	for i, tc := range cases {
		emb[i] = tc.f
	}
	var b bytes.Buffer
	if err := WriteGGUF(&b, m, kernels.F16); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	got, ok := f.Tensor("token_embd.weight")
	if !ok || got.Type != kernels.F16 {
		t.Fatalf("token_embd.weight: %v of type %v, want F16", ok, got.Type)
	}
	for i, tc := range cases {
		if h := binary.LittleEndian.Uint16(got.Data[2*i:]); h != tc.h {
			t.Errorf("%v written as %#04x, want %#04x", tc.f, h, tc.h)
		}
		if tc.h != 0x7C00 && halfValue(tc.h) != quant.F16ToF32(tc.h) {
			t.Errorf("half %#04x: %v by definition, %v by the loader", tc.h, halfValue(tc.h), quant.F16ToF32(tc.h))
		}
	}
}
