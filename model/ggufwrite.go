package model

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/prefixd/prefixd/gguf"
	"github.com/prefixd/prefixd/kernels"
)

// This file lays a Model out as GGUF (prefixd gen-model, and the tests):
// llama.cpp's metadata and tensor names, encoded by package gguf's writer.

// WriteGGUF writes m to w as a GGUF v3 file of architecture "llama", in
// llama.cpp's tensor names and layout: matrices in type typ (F32, F16 or
// BF16 rounded to nearest even, a quantized type by kernels/quant's
// reference quantizers), vectors as F32. m's tokenizer is not written:
// the file has the tokenizer.* keys of extra, if any (extra is written
// after the model's metadata, replacing a key of the same name). It
// refuses a model whose Arch options a "llama" file cannot carry, and a
// typ whose blocks do not divide a matrix's rows. The converted matrices
// are held in memory until written.
func WriteGGUF(w io.Writer, m *Model, typ kernels.DType, extra ...gguf.KV) error {
	if err := m.check(); err != nil {
		return err
	}
	if m.Config.Arch != (Arch{}) {
		return errors.New("model: WriteGGUF writes Llama models: no q/k/v bias, q/k norm or half-rotation RoPE")
	}
	f := ggufFile{arch: "llama", name: m.Name, types: func(string) kernels.DType { return typ }, extra: extra}
	tensors, err := ggufTensorsOf(m, f)
	if err != nil {
		return err
	}
	return gguf.Write(w, ggufMetaOf(m, f), tensors)
}

// ggufFile describes how to write a Model as GGUF.
type ggufFile struct {
	arch string // general.architecture
	name string // general.name
	f16  bool   // matrices as F16 (vectors stay F32, as llama.cpp writes them)
	// types, when set, gives each matrix's type by its GGUF name (vectors
	// stay F32); the values are quantized by kernels/quant's reference
	// quantizers, so the file holds them only approximately.
	types func(name string) kernels.DType
	extra []gguf.KV // more metadata, replacing the model's of the same key
	// omitKeys drops metadata the writer would write, to test defaults.
	omitKeys map[string]bool
}

// ggufMetaOf is the metadata llama.cpp's converter writes for m's shape.
func ggufMetaOf(m *Model, f ggufFile) []gguf.KV {
	c, a := m.Config, f.arch+"."
	meta := []gguf.KV{
		{Key: "general.architecture", Value: f.arch}, {Key: "general.name", Value: f.name},
		{Key: a + "context_length", Value: uint32(c.MaxSeqLen)}, {Key: a + "embedding_length", Value: uint32(c.Dim)},
		{Key: a + "block_count", Value: uint32(c.Layers)}, {Key: a + "feed_forward_length", Value: uint32(c.Hidden)},
		{Key: a + "attention.head_count", Value: uint32(c.Heads)}, {Key: a + "attention.head_count_kv", Value: uint32(c.KVHeads)},
		{Key: a + "attention.key_length", Value: uint32(c.HeadDim())}, {Key: a + "attention.value_length", Value: uint32(c.HeadDim())},
		{Key: a + "rope.dimension_count", Value: uint32(c.HeadDim())}, {Key: a + "rope.freq_base", Value: c.RopeTheta},
		{Key: a + "attention.layer_norm_rms_epsilon", Value: c.NormEps},
	}
	for _, kv := range f.extra {
		if i := slices.IndexFunc(meta, func(m gguf.KV) bool { return m.Key == kv.Key }); i >= 0 {
			meta[i] = kv
		} else {
			meta = append(meta, kv)
		}
	}
	var out []gguf.KV
	for _, kv := range meta {
		if !f.omitKeys[kv.Key] {
			out = append(out, kv)
		}
	}
	return out
}

// ggufTensorsOf lays out m's tensors under llama.cpp's names, each in the
// type f gives it.
func ggufTensorsOf(m *Model, f ggufFile) ([]gguf.Tensor, error) {
	c := m.Config
	var out []gguf.Tensor
	var err error
	add := func(name string, w kernels.Tensor, dims ...int) {
		if err != nil {
			return
		}
		typ := kernels.F32
		switch {
		case f.types != nil && len(dims) == 2:
			typ = f.types(name)
		case f.f16 && len(dims) == 2:
			typ = kernels.F16
		}
		var conv kernels.Tensor
		if conv, err = w.Convert(typ); err != nil {
			err = fmt.Errorf("model: GGUF tensor %s: %w", name, err)
			return
		}
		out = append(out, gguf.Tensor{Name: name, Type: typ, Shape: dims, Data: conv.Data})
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
	return out, err
}
