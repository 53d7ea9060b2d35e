package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// This file writes GGUF files (prefixd gen-model, and the tests), from the
// format's specification (llama.cpp's docs/gguf.md), independently of the
// reader: metadata in the order given, tensor infos, then the tensors, each
// at an offset aligned to general.alignment (32 by default) from the
// aligned start of the data.

// WriteGGUF writes m to w as a GGUF v3 file of architecture "llama", in
// llama.cpp's tensor names and layout: matrices as F16 when f16 (rounded
// to nearest even) or F32, vectors as F32. m's tokenizer is not written,
// so the file has none. It refuses a model whose Arch options a "llama"
// file cannot carry.
func WriteGGUF(w io.Writer, m *Model, f16 bool) error {
	if err := m.check(); err != nil {
		return err
	}
	if m.Config.Arch != (Arch{}) {
		return errors.New("model: WriteGGUF writes Llama models: no q/k/v bias, q/k norm or half-rotation RoPE")
	}
	f := ggufFile{arch: "llama", name: m.Name, f16: f16}
	return writeGGUFTo(w, ggufMetaOf(m, f), ggufTensorsOf(m, f))
}

// ggufKV is one metadata entry. Its value's Go type picks the GGUF type:
// string, uint32, int32, uint64, float32, float64, bool, or a []string,
// []float32 or []int32 array.
type ggufKV struct {
	key string
	val any
}

// ggufOut is one tensor to write: dims innermost first, as GGUF lists
// them, and data already encoded in typ, or f, floats that the writer
// encodes in typ (F32 or F16) as it writes them.
type ggufOut struct {
	name string
	dims []uint64
	typ  uint32
	data []byte
	f    []float32
}

// size is the tensor's bytes in the file.
func (t ggufOut) size() int {
	switch {
	case t.f == nil:
		return len(t.data)
	case t.typ == ggmlF16:
		return 2 * len(t.f)
	}
	return 4 * len(t.f)
}

// encoded returns the tensor's bytes.
func (t ggufOut) encoded() []byte {
	switch {
	case t.f == nil:
		return t.data
	case t.typ == ggmlF16:
		return f16Bytes(t.f)
	}
	return f32Bytes(t.f)
}

// ggufAlign is the alignment the writer uses (GGUF's default).
const ggufAlign = 32

// writeGGUFTo writes a GGUF v3 file of meta and tensors to w: the header,
// metadata and tensor infos, then each tensor's data (encoded as it is
// written, so a large model is never held twice).
func writeGGUFTo(w io.Writer, meta []ggufKV, tensors []ggufOut) error {
	le := binary.LittleEndian
	b := le.AppendUint64(le.AppendUint64(le.AppendUint32([]byte("GGUF"), 3), uint64(len(tensors))), uint64(len(meta)))
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
			return fmt.Errorf("model: GGUF metadata %q of type %T", kv.key, kv.val)
		}
	}
	pad := func(n int) int { return (n + ggufAlign - 1) / ggufAlign * ggufAlign }
	off := 0
	for _, t := range tensors {
		b = le.AppendUint32(str(b, t.name), uint32(len(t.dims)))
		for _, d := range t.dims {
			b = le.AppendUint64(b, d)
		}
		b = le.AppendUint64(le.AppendUint32(b, t.typ), uint64(off))
		off = pad(off + t.size())
	}
	n := len(b)
	if _, err := w.Write(b); err != nil {
		return err
	}
	for _, t := range tensors {
		data := t.encoded()
		b = append(make([]byte, 0, pad(n)-n+len(data)), make([]byte, pad(n)-n)...)
		if _, err := w.Write(append(b, data...)); err != nil {
			return err
		}
		n = pad(n) + len(data)
	}
	return nil
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

// ggufFile describes how to write a Model as GGUF.
type ggufFile struct {
	arch  string   // general.architecture
	name  string   // general.name
	f16   bool     // matrices as F16 (vectors stay F32, as llama.cpp writes them)
	extra []ggufKV // more metadata, after the model's
	// omitKeys drops metadata the writer would write, to test defaults.
	omitKeys map[string]bool
}

// ggufMetaOf is the metadata llama.cpp's converter writes for m's shape.
func ggufMetaOf(m *Model, f ggufFile) []ggufKV {
	c, a := m.Config, f.arch+"."
	meta := []ggufKV{
		{"general.architecture", f.arch}, {"general.name", f.name},
		{a + "context_length", uint32(c.MaxSeqLen)}, {a + "embedding_length", uint32(c.Dim)},
		{a + "block_count", uint32(c.Layers)}, {a + "feed_forward_length", uint32(c.Hidden)},
		{a + "attention.head_count", uint32(c.Heads)}, {a + "attention.head_count_kv", uint32(c.KVHeads)},
		{a + "attention.key_length", uint32(c.HeadDim())}, {a + "attention.value_length", uint32(c.HeadDim())},
		{a + "rope.dimension_count", uint32(c.HeadDim())}, {a + "rope.freq_base", c.RopeTheta},
		{a + "attention.layer_norm_rms_epsilon", c.NormEps},
	}
	var out []ggufKV
	for _, kv := range append(meta, f.extra...) {
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
	add := func(name string, x []float32, dims ...int) {
		t := ggufOut{name: name, typ: ggmlF32, f: x}
		if f.f16 && len(dims) == 2 {
			t.typ = ggmlF16
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
	if m.RopeFactors != nil {
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
