// Package ggufwrite writes GGUF v3 files: metadata and F32 tensors, and
// small random-weight Llama models around a given vocabulary. It exists
// so tests and the client test script can serve a model with a real
// tokenizer and chat template without shipping one; the reader is
// package model's.
package ggufwrite

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
)

// GGUF value types (the GGUF specification's numbering).
const (
	typeUint32  = 4
	typeInt32   = 5
	typeFloat32 = 6
	typeBool    = 7
	typeString  = 8
	typeArray   = 9
	typeInt64   = 11
)

const alignment = 32

// Tensor is an F32 tensor; Dims are innermost first, as GGUF stores them.
type Tensor struct {
	Name string
	Dims []uint64
	Data []float32
}

// Write writes a GGUF v3 file of meta and tensors. Metadata values may be
// string, bool, int, int32, uint32, int64 (written as int32 when it fits,
// as model.ReadGGUFMetadata reads every integer back as int64), float32,
// float64 (written as float32), or a []any, []string or []int32 of those.
// Keys are written in sorted order, so the same input gives the same bytes.
func Write(w io.Writer, meta map[string]any, tensors []Tensor) error {
	// The header goes to memory first: the tensor data starts at its
	// length rounded up to the alignment.
	bw := new(bytes.Buffer)
	le := func(v any) { binary.Write(bw, binary.LittleEndian, v) }
	str := func(s string) { le(uint64(len(s))); bw.WriteString(s) }
	bw.WriteString("GGUF")
	le(uint32(3))
	le(uint64(len(tensors)))
	le(uint64(len(meta)))
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var value func(v any, tagged bool) error
	value = func(v any, tagged bool) error {
		tag := func(t uint32) {
			if tagged {
				le(t)
			}
		}
		switch x := v.(type) {
		case string:
			tag(typeString)
			str(x)
		case bool:
			tag(typeBool)
			b := uint8(0)
			if x {
				b = 1
			}
			le(b)
		case int:
			return value(int64(x), tagged)
		case int32:
			tag(typeInt32)
			le(x)
		case uint32:
			tag(typeUint32)
			le(x)
		case int64:
			if x >= math.MinInt32 && x <= math.MaxInt32 {
				tag(typeInt32)
				le(int32(x))
			} else {
				tag(typeInt64)
				le(x)
			}
		case float32:
			tag(typeFloat32)
			le(x)
		case float64:
			tag(typeFloat32)
			le(float32(x))
		case []string:
			return value(toAny(x), tagged)
		case []int32:
			return value(toAny(x), tagged)
		case []any:
			tag(typeArray)
			et, err := elemType(x)
			if err != nil {
				return err
			}
			le(et)
			le(uint64(len(x)))
			for _, e := range x {
				if et == typeInt32 {
					e = int32(toInt64(e))
				}
				if err := value(e, false); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("ggufwrite: metadata value of type %T", v)
		}
		return nil
	}
	for _, k := range keys {
		str(k)
		if err := value(meta[k], true); err != nil {
			return fmt.Errorf("%w (key %q)", err, k)
		}
	}
	var offset uint64
	for _, t := range tensors {
		n := uint64(1)
		for _, d := range t.Dims {
			n *= d
		}
		if n != uint64(len(t.Data)) {
			return fmt.Errorf("ggufwrite: tensor %q has %d values for shape %v", t.Name, len(t.Data), t.Dims)
		}
		str(t.Name)
		le(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			le(d)
		}
		le(uint32(0)) // F32
		le(offset)
		offset += pad(4 * n)
	}
	bw.Write(make([]byte, pad(uint64(bw.Len()))-uint64(bw.Len())))
	for _, t := range tensors {
		for _, f := range t.Data {
			le(f)
		}
		bw.Write(make([]byte, pad(4*uint64(len(t.Data)))-4*uint64(len(t.Data))))
	}
	_, err := bw.WriteTo(w)
	return err
}

func toAny[T any](x []T) []any {
	out := make([]any, len(x))
	for i, v := range x {
		out[i] = v
	}
	return out
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return x
	}
	return 0
}

// elemType is the GGUF type of an array's elements: all strings, all
// integers (int32) or all floats (float32).
func elemType(x []any) (uint32, error) {
	t := uint32(typeString)
	for i, e := range x {
		var et uint32
		switch e.(type) {
		case string:
			et = typeString
		case int, int32, int64:
			et = typeInt32
		case float32, float64:
			et = typeFloat32
		default:
			return 0, fmt.Errorf("ggufwrite: array element of type %T", e)
		}
		if i > 0 && et != t {
			return 0, fmt.Errorf("ggufwrite: array mixes element types")
		}
		t = et
	}
	return t, nil
}

func pad(n uint64) uint64 { return (n + alignment - 1) / alignment * alignment }

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
	d, h, kv := uint64(shape.Dim), uint64(shape.Hidden), uint64(shape.Dim/shape.Heads*shape.KVHeads)
	tensor := func(name string, scale float32, dims ...uint64) Tensor {
		n := uint64(1)
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
		return Tensor{Name: name, Dims: dims, Data: data}
	}
	ts := []Tensor{
		tensor("token_embd.weight", 1, d, uint64(vocab)),
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
	return Write(w, meta, ts)
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
