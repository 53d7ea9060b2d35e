package model

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/prefixd/prefixd/gguf"
	"github.com/prefixd/prefixd/kernels"
)

// This file lays a Model out as GGUF (prefixd gen-model, and the tests):
// llama.cpp's metadata and tensor names, encoded by package gguf's writer.

// WriteGGUF writes m to w as a GGUF v3 file of architecture "llama", in
// llama.cpp's tensor names and layout: matrices in type typ (F32, F16 or
// BF16 rounded to nearest even, a quantized type by kernels/quant's
// reference quantizers), vectors as F32. m's tokenizer is not written:
// meta adds metadata (a tokenizer's, from TokenizerMetadata), replacing
// the writer's own entries of the same key. It refuses a model whose Arch
// options a "llama" file cannot carry, and a typ whose blocks do not divide
// a matrix's rows. The converted matrices are held in memory until written.
func WriteGGUF(w io.Writer, m *Model, typ kernels.DType, meta ...gguf.KV) error {
	if err := m.check(); err != nil {
		return err
	}
	if m.Config.Arch != (Arch{}) {
		return errors.New("model: WriteGGUF writes Llama models: no q/k/v bias, q/k norm or half-rotation RoPE")
	}
	f := ggufFile{arch: "llama", name: m.Name, types: func(string) kernels.DType { return typ }, extra: meta}
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
		meta = setKV(meta, kv.Key, kv.Value)
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

// TokenizerMetadata returns the tokenizer.* metadata of the GGUF file at
// path (a model's, or a vocabulary-only file such as llama.cpp's
// ggml-vocab-*.gguf) in file order, for WriteGGUF, and the number of tokens
// its vocabulary has.
func TokenizerMetadata(path string) (meta []gguf.KV, tokens int, err error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	for _, k := range f.Keys {
		if strings.HasPrefix(k, "tokenizer.") {
			meta = append(meta, gguf.KV{Key: k, Value: f.Metadata[k]})
		}
	}
	list, ok := f.Metadata["tokenizer.ggml.tokens"].([]string)
	if !ok || len(list) == 0 {
		return nil, 0, fmt.Errorf("model: %s has no tokenizer.ggml.tokens", path)
	}
	return meta, len(list), nil
}

// ChatMLTemplate is a ChatML chat template in the form Qwen2.5 ships: a
// conversation without a system message gets a default one, which tells
// its rendering apart from the built-in chatml template's.
const ChatMLTemplate = "{%- if messages[0]['role'] != 'system' %}" +
	"{{- '<|im_start|>system\\nYou are a tiny test model.<|im_end|>\\n' }}" +
	"{%- endif %}" +
	"{%- for message in messages %}" +
	"{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}" +
	"{%- endfor %}" +
	"{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"

// WithChatML returns tokenizer metadata meta (TokenizerMetadata's) with
// ChatML's <|im_start|> and <|im_end|> appended to the vocabulary as
// control tokens, <|im_end|> as the end-of-turn token and template as the
// chat template: a vocabulary to serve chat with. meta must carry
// tokenizer.ggml.tokens and tokenizer.ggml.token_type of one length.
func WithChatML(meta []gguf.KV, template string) ([]gguf.KV, error) {
	out := slices.Clone(meta)
	ti := slices.IndexFunc(out, func(kv gguf.KV) bool { return kv.Key == "tokenizer.ggml.tokens" })
	yi := slices.IndexFunc(out, func(kv gguf.KV) bool { return kv.Key == "tokenizer.ggml.token_type" })
	if ti < 0 || yi < 0 {
		return nil, errors.New("model: WithChatML: metadata lacks tokenizer.ggml.tokens or token_type")
	}
	tokens, ok1 := out[ti].Value.([]string)
	types, ok2 := out[yi].Value.([]int32)
	if !ok1 || !ok2 || len(tokens) != len(types) {
		return nil, errors.New("model: WithChatML: tokenizer.ggml.tokens and token_type are not string and int32 arrays of one length")
	}
	const control = 3 // llama.cpp's LLAMA_TOKEN_TYPE_CONTROL
	tokens = append(slices.Clone(tokens), "<|im_start|>", "<|im_end|>")
	out[ti].Value = tokens
	out[yi].Value = append(slices.Clone(types), control, control)
	out = setKV(out, "tokenizer.ggml.eot_token_id", uint32(len(tokens)-1))
	return setKV(out, "tokenizer.chat_template", template), nil
}

// setKV sets key to v in meta, replacing its entry or appending one.
func setKV(meta []gguf.KV, key string, v any) []gguf.KV {
	if i := slices.IndexFunc(meta, func(kv gguf.KV) bool { return kv.Key == key }); i >= 0 {
		meta[i].Value = v
		return meta
	}
	return append(meta, gguf.KV{Key: key, Value: v})
}
