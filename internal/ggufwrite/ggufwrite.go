// Package ggufwrite writes small random-weight Llama models around a given
// vocabulary as GGUF files, through package gguf's writer. It exists so
// tests and the client test script can serve a model with a real
// tokenizer and chat template without shipping one; the reader is
// package model's.
package ggufwrite

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/prefixd/prefixd/gguf"
	"github.com/prefixd/prefixd/kernels"
)

// ggufMeta returns meta as GGUF metadata, keys in sorted order (so the
// same input gives the same bytes). Values may be string, bool, int,
// int32, uint32, int64 (written as int32 when it fits, as
// model.ReadGGUFMetadata reads every integer back as int64), float32,
// float64 (written as float32), or a []any, []string or []int32 of those.
func ggufMeta(meta map[string]any) ([]gguf.KV, error) {
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]gguf.KV, 0, len(keys))
	for _, k := range keys {
		v, err := ggufValue(meta[k])
		if err != nil {
			return nil, fmt.Errorf("%w (key %q)", err, k)
		}
		out = append(out, gguf.KV{Key: k, Value: v})
	}
	return out, nil
}

// ggufValue is v as a Go value of a GGUF type, as ggufMeta describes.
func ggufValue(v any) (any, error) {
	switch x := v.(type) {
	case string, bool, int32, uint32, float32, []string, []int32:
		return x, nil
	case int:
		return ggufValue(int64(x))
	case int64:
		if x >= math.MinInt32 && x <= math.MaxInt32 {
			return int32(x), nil
		}
		return x, nil
	case float64:
		return float32(x), nil
	case []any:
		return ggufArray(x)
	}
	return nil, fmt.Errorf("ggufwrite: metadata value of type %T", v)
}

// ggufArray is x as a GGUF array: all strings, all integers (int32) or all
// floats (float32).
func ggufArray(x []any) (any, error) {
	var (
		ss []string
		is []int32
		fs []float32
	)
	for _, e := range x {
		switch v := e.(type) {
		case string:
			ss = append(ss, v)
		case int:
			is = append(is, int32(v))
		case int32:
			is = append(is, v)
		case int64:
			is = append(is, int32(v))
		case float32:
			fs = append(fs, v)
		case float64:
			fs = append(fs, float32(v))
		default:
			return nil, fmt.Errorf("ggufwrite: array element of type %T", e)
		}
	}
	switch len(x) {
	case len(is):
		return is, nil
	case len(fs):
		return fs, nil
	case len(ss):
		return ss, nil
	}
	return nil, fmt.Errorf("ggufwrite: array mixes element types")
}

// Shape is a Llama model's size.
type Shape struct {
	Dim, Hidden, Layers, Heads, KVHeads, MaxSeqLen int
}

// Llama writes a Llama model of shape with random weights (seeded) around
// the tokenizer metadata tok (the tokenizer.* keys, as
// model.ReadGGUFMetadata returns them; any other key is dropped), with a
// vocabulary of vocab logits, which may exceed the tokenizer's as models
// pad their embeddings.
func Llama(w io.Writer, tok map[string]any, vocab int, shape Shape, seed uint64) error {
	meta := map[string]any{
		"general.architecture":                   "llama",
		"general.name":                           "ggufwrite-tiny",
		"llama.embedding_length":                 shape.Dim,
		"llama.feed_forward_length":              shape.Hidden,
		"llama.block_count":                      shape.Layers,
		"llama.attention.head_count":             shape.Heads,
		"llama.attention.head_count_kv":          shape.KVHeads,
		"llama.context_length":                   shape.MaxSeqLen,
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
	}
	for k, v := range tok {
		if len(k) > 10 && k[:10] == "tokenizer." {
			meta[k] = v
		}
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	d, h, kv := shape.Dim, shape.Hidden, shape.Dim/shape.Heads*shape.KVHeads
	tensor := func(name string, scale float32, dims ...int) gguf.Tensor {
		n := 1
		for _, x := range dims {
			n *= x
		}
		data := make([]float32, n)
		for i := range data {
			if scale == 0 {
				data[i] = 1 // a norm's weight
			} else {
				data[i] = scale * float32(rng.NormFloat64())
			}
		}
		return gguf.Tensor{Name: name, Type: kernels.F32, Shape: dims, Data: kernels.FromF32(data, 1, n).Data}
	}
	ts := []gguf.Tensor{
		tensor("token_embd.weight", 1, d, vocab),
		tensor("output_norm.weight", 0, d),
	}
	for i := range shape.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			tensor(p+"attn_norm.weight", 0, d),
			tensor(p+"attn_q.weight", 0.3, d, d),
			tensor(p+"attn_k.weight", 0.3, d, kv),
			tensor(p+"attn_v.weight", 0.3, d, kv),
			tensor(p+"attn_output.weight", 0.3, d, d),
			tensor(p+"ffn_norm.weight", 0, d),
			tensor(p+"ffn_gate.weight", 0.3, d, h),
			tensor(p+"ffn_down.weight", 0.3, h, d),
			tensor(p+"ffn_up.weight", 0.3, d, h),
		)
	}
	kvs, err := ggufMeta(meta)
	if err != nil {
		return err
	}
	return gguf.Write(w, kvs, ts)
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

// WithChatML returns a copy of tokenizer metadata tok with ChatML's
// <|im_start|> and <|im_end|> appended as control tokens, <|im_end|> as
// the end-of-turn token, and template as the chat template. tok must
// carry tokenizer.ggml.tokens and tokenizer.ggml.token_type.
func WithChatML(tok map[string]any, template string) (map[string]any, error) {
	out := make(map[string]any, len(tok)+2)
	for k, v := range tok {
		out[k] = v
	}
	tokens, ok1 := tok["tokenizer.ggml.tokens"].([]any)
	types, ok2 := tok["tokenizer.ggml.token_type"].([]any)
	if !ok1 || !ok2 || len(tokens) != len(types) {
		return nil, fmt.Errorf("ggufwrite: metadata lacks tokenizer.ggml.tokens and token_type of one length")
	}
	const control = 3
	tokens = append(slices.Clone(tokens), "<|im_start|>", "<|im_end|>")
	types = append(slices.Clone(types), int64(control), int64(control))
	out["tokenizer.ggml.tokens"] = tokens
	out["tokenizer.ggml.token_type"] = types
	out["tokenizer.ggml.eot_token_id"] = int64(len(tokens) - 1)
	out["tokenizer.chat_template"] = template
	return out, nil
}
