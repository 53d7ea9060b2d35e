package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
)

// This file writes GGUF files for tests, from the format's specification
// (llama.cpp's docs/gguf.md), independently of the reader: metadata in the
// order given, tensor infos, then the tensors, each at an offset aligned
// to general.alignment (32 by default) from the aligned start of the data.

// GGUF's metadata value types, as the specification numbers them.
const (
	ggufUint8 = iota
	ggufInt8
	ggufUint16
	ggufInt16
	ggufUint32
	ggufInt32
	ggufFloat32
	ggufBool
	ggufString
	ggufArray
	ggufUint64
	ggufInt64
	ggufFloat64
)

// ggufKV is one metadata entry. Its value's Go type picks the GGUF type:
// string, uint32, int32, uint64, float32, float64, bool, or a []string,
// []float32 or []int32 array.
type ggufKV struct {
	key string
	val any
}

// ggufOut is one tensor to write: dims innermost first, as GGUF lists
// them, and data already encoded in typ.
type ggufOut struct {
	name string
	dims []uint64
	typ  kernels.DType
	data []byte
}

// ggufAlign is the alignment the writer uses (GGUF's default).
const ggufAlign = 32

// encodeGGUF returns a GGUF v3 file of meta and tensors.
func encodeGGUF(meta []ggufKV, tensors []ggufOut) []byte {
	le := binary.LittleEndian
	b := ggufHeader(3, uint64(len(tensors)), uint64(len(meta)))
	str := func(b []byte, s string) []byte { return append(le.AppendUint64(b, uint64(len(s))), s...) }
	for _, kv := range meta {
		b = str(b, kv.key)
		switch v := kv.val.(type) {
		case string:
			b = str(le.AppendUint32(b, ggufString), v)
		case uint32:
			b = le.AppendUint32(le.AppendUint32(b, ggufUint32), v)
		case int32:
			b = le.AppendUint32(le.AppendUint32(b, ggufInt32), uint32(v))
		case uint64:
			b = le.AppendUint64(le.AppendUint32(b, ggufUint64), v)
		case float32:
			b = le.AppendUint32(le.AppendUint32(b, ggufFloat32), math.Float32bits(v))
		case float64:
			b = le.AppendUint64(le.AppendUint32(b, ggufFloat64), math.Float64bits(v))
		case bool:
			b = le.AppendUint32(b, ggufBool)
			if v {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		case []string:
			b = le.AppendUint64(le.AppendUint32(le.AppendUint32(b, ggufArray), ggufString), uint64(len(v)))
			for _, s := range v {
				b = str(b, s)
			}
		case []float32:
			b = le.AppendUint64(le.AppendUint32(le.AppendUint32(b, ggufArray), ggufFloat32), uint64(len(v)))
			for _, f := range v {
				b = le.AppendUint32(b, math.Float32bits(f))
			}
		case []int32:
			b = le.AppendUint64(le.AppendUint32(le.AppendUint32(b, ggufArray), ggufInt32), uint64(len(v)))
			for _, n := range v {
				b = le.AppendUint32(b, uint32(n))
			}
		default:
			panic(fmt.Sprintf("encodeGGUF: metadata %q of type %T", kv.key, kv.val))
		}
	}
	pad := func(n int) int { return (n + ggufAlign - 1) / ggufAlign * ggufAlign }
	off := 0
	for _, t := range tensors {
		b = le.AppendUint32(str(b, t.name), uint32(len(t.dims)))
		for _, d := range t.dims {
			b = le.AppendUint64(b, d)
		}
		b = le.AppendUint64(le.AppendUint32(b, uint32(t.typ)), uint64(off))
		off = pad(off + len(t.data))
	}
	for _, t := range tensors {
		b = append(b, make([]byte, pad(len(b))-len(b))...)
		b = append(b, t.data...)
	}
	return b
}

// f32Bytes encodes x as GGUF F32.
func f32Bytes(x []float32) []byte {
	b := make([]byte, 0, 4*len(x))
	for _, v := range x {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// f16Bytes encodes x as GGUF F16, rounding to nearest even.
func f16Bytes(x []float32) []byte {
	b := make([]byte, 0, 2*len(x))
	for _, v := range x {
		b = binary.LittleEndian.AppendUint16(b, floatToHalf(v))
	}
	return b
}

// floatToHalf rounds f to the nearest IEEE binary16, ties to even; values
// past the largest half become infinities. NaN is not handled (tests
// write none).
func floatToHalf(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int(bits>>23&0xff) - 127 + 15
	mant := bits & 0x7fffff
	round := func(m uint32, shift uint) uint32 {
		h, rem, half := m>>shift, m&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || rem == half && h&1 == 1 {
			h++
		}
		return h
	}
	switch {
	case exp >= 31:
		return sign | 0x7c00
	case exp <= 0: // a subnormal half (or zero): units of 2^-24
		if exp < -10 {
			return sign
		}
		return sign | uint16(round(mant|0x800000, uint(14-exp)))
	}
	// A carry out of the mantissa rounds up into the exponent, as it should.
	return sign | uint16(uint32(exp)<<10+round(mant, 13))
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

// randomModel returns a model of config c (its Arch and HeadWidth
// included) with seeded random weights, tied when c.SharedClassifier:
// norm weights and biases far from one and zero, so a tensor the forward
// pass misplaced or ignored would show in its logits.
func randomModel(c Config, seed uint64) *Model {
	r := rand.New(rand.NewPCG(seed, 1))
	floats := func(n int, mean, scale float64) []float32 {
		w := make([]float32, n)
		for i := range w {
			w[i] = float32(mean + r.NormFloat64()*scale)
		}
		return w
	}
	vec := func(n int, mean, scale float64) kernels.Tensor { return vecT(floats(n, mean, scale)) }
	mat := func(rows, cols int) kernels.Tensor {
		return kernels.FromF32(floats(rows*cols, 0, 1/math.Sqrt(float64(cols))), rows, cols)
	}
	d, kv, qd, hd, h := c.Dim, c.KVDim(), c.QDim(), c.HeadDim(), c.Hidden
	m := &Model{Config: c, Embedding: mat(c.Vocab, d), FinalNorm: vec(d, 1, 0.2)}
	m.Classifier = m.Embedding
	if !c.SharedClassifier {
		m.Classifier = mat(c.Vocab, d)
	}
	for range c.Layers {
		l := Layer{
			AttnNorm: vec(d, 1, 0.2), Wq: mat(qd, d), Wk: mat(kv, d), Wv: mat(kv, d), Wo: mat(d, qd),
			FFNNorm: vec(d, 1, 0.2), W1: mat(h, d), W2: mat(d, h), W3: mat(h, d),
		}
		if c.Arch.QKVBias {
			l.Bq, l.Bk, l.Bv = vec(qd, 0, 0.5), vec(kv, 0, 0.5), vec(kv, 0, 0.5)
		}
		if c.Arch.QKNorm {
			l.QNorm, l.KNorm = vec(hd, 1, 0.5), vec(hd, 1, 0.5)
		}
		m.Layers = append(m.Layers, l)
	}
	return m
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

// ggufFile describes how to write a Model as GGUF.
type ggufFile struct {
	arch string // general.architecture
	f16  bool   // matrices as F16 (vectors stay F32, as llama.cpp writes them)
	// types, when set, gives each matrix's type by its GGUF name (vectors
	// stay F32); the values are quantized by kernels/quant's reference
	// quantizers, so the file holds them only approximately.
	types func(name string) kernels.DType
	extra []ggufKV // more metadata, after the model's
	// omitKeys drops metadata the writer would write, to test defaults.
	omitKeys map[string]bool
}

// ggufMetaOf is the metadata llama.cpp's converter writes for m's shape.
func ggufMetaOf(m *Model, f ggufFile) []ggufKV {
	c, a := m.Config, f.arch+"."
	meta := []ggufKV{
		{"general.architecture", f.arch}, {"general.name", "test " + f.arch},
		{a + "context_length", uint32(c.MaxSeqLen)}, {a + "embedding_length", uint32(c.Dim)},
		{a + "block_count", uint32(c.Layers)}, {a + "feed_forward_length", uint32(c.Hidden)},
		{a + "attention.head_count", uint32(c.Heads)}, {a + "attention.head_count_kv", uint32(c.KVHeads)},
		{a + "attention.key_length", uint32(c.HeadDim())}, {a + "attention.value_length", uint32(c.HeadDim())},
		{a + "rope.dimension_count", uint32(c.HeadDim())}, {a + "rope.freq_base", c.RopeTheta},
		{a + "attention.layer_norm_rms_epsilon", c.NormEps},
	}
	for _, kv := range f.extra {
		if i := slices.IndexFunc(meta, func(m ggufKV) bool { return m.key == kv.key }); i >= 0 {
			meta[i] = kv
		} else {
			meta = append(meta, kv)
		}
	}
	var out []ggufKV
	for _, kv := range meta {
		if !f.omitKeys[kv.key] {
			out = append(out, kv)
		}
	}
	return out
}

// ggufTensorsOf lays out m's tensors under llama.cpp's names.
func ggufTensorsOf(m *Model, f ggufFile) []ggufOut {
	c := m.Config
	var out []ggufOut
	add := func(name string, w kernels.Tensor, dims ...int) {
		x := fl(w)
		t := ggufOut{name: name, typ: kernels.F32, data: f32Bytes(x)}
		if f.f16 && len(dims) == 2 {
			t.typ, t.data = kernels.F16, f16Bytes(x)
		}
		if f.types != nil && len(dims) == 2 {
			t.typ, t.data = f.types(name), quantizeRows(f.types(name), x, dims[0])
		}
		for _, d := range dims {
			t.dims = append(t.dims, uint64(d))
		}
		out = append(out, t)
	}
	d, kv, qd, hd, h := c.Dim, c.KVDim(), c.QDim(), c.HeadDim(), c.Hidden
	add("token_embd.weight", m.Embedding, d, c.Vocab)
	add("output_norm.weight", m.FinalNorm, d)
	if !c.SharedClassifier {
		add("output.weight", m.Classifier, d, c.Vocab)
	}
	if m.RopeFactors.Rows != 0 {
		add("rope_freqs.weight", m.RopeFactors, hd/2)
	}
	for i, l := range m.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		add(p+"attn_norm.weight", l.AttnNorm, d)
		add(p+"attn_q.weight", l.Wq, d, qd)
		add(p+"attn_k.weight", l.Wk, d, kv)
		add(p+"attn_v.weight", l.Wv, d, kv)
		add(p+"attn_output.weight", l.Wo, qd, d)
		if c.Arch.QKVBias {
			add(p+"attn_q.bias", l.Bq, qd)
			add(p+"attn_k.bias", l.Bk, kv)
			add(p+"attn_v.bias", l.Bv, kv)
		}
		if c.Arch.QKNorm {
			add(p+"attn_q_norm.weight", l.QNorm, hd)
			add(p+"attn_k_norm.weight", l.KNorm, hd)
		}
		add(p+"ffn_norm.weight", l.FFNNorm, d)
		add(p+"ffn_gate.weight", l.W1, d, h)
		add(p+"ffn_down.weight", l.W2, h, d)
		add(p+"ffn_up.weight", l.W3, d, h)
	}
	return out
}

// quantizeRows returns x, rows of cols values, quantized to typ row by
// row.
func quantizeRows(typ kernels.DType, x []float32, cols int) []byte {
	rowBytes, err := typ.RowSize(cols)
	if err != nil {
		panic(err)
	}
	out := make([]byte, len(x)/cols*rowBytes)
	for r := range len(x) / cols {
		if err := quant.Quantize(typ, out[r*rowBytes:(r+1)*rowBytes], x[r*cols:(r+1)*cols]); err != nil {
			panic(err)
		}
	}
	return out
}

// writeGGUF writes m as f says to a file in a test's temporary folder and
// returns its path. With f.f16 it first rounds m's matrices to halves, so
// the file holds m exactly.
func writeGGUF(t testing.TB, m *Model, f ggufFile) string {
	t.Helper()
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
