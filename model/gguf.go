package model

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/prefixd/prefixd/gguf"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
	"github.com/prefixd/prefixd/tokenizer/bpe"
)

// loadGGUF opens a GGUF file with package gguf and builds the Model it
// describes, its tensors moved to a copy in huge pages if resident and
// the kernels read them in place (readInPlace), left in the file's mapping
// otherwise. The model's tensors view those bytes in their file types
// (nothing is converted); Model.Close releases them.
func loadGGUF(path string, resident bool) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	mapped := !resident || !readInPlace(f)
	if !mapped {
		if err := f.Resident(); err != nil {
			return nil, errors.Join(err, f.Close())
		}
	}
	m, err := fromGGUF(f)
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	m.closers, m.mapped = append(m.closers, f), mapped
	return m, nil
}

// readInPlace reports whether the CPU kernels read most of f's tensor
// bytes where they lie, so that a copy in huge pages speeds decoding. Not
// where Q8_0 matrices hold half the bytes or more and the CPU packs them
// (quant.PacksQ8_0, AVX-512 VNNI): decoding then reads their packed
// copies, and a copy of the file would only double their memory, where
// the mapping's pages, once packed, are the page cache's to drop.
func readInPlace(f *gguf.File) bool {
	if !quant.PacksQ8_0() {
		return true
	}
	var q8, all int
	for _, name := range f.Names() {
		t, _ := f.Tensor(name)
		all += len(t.Data)
		if t.Type == quant.Q8_0 {
			q8 += len(t.Data)
		}
	}
	return 2*q8 < all
}

// parseGGUF builds the Model of a GGUF file held in memory, its tensors
// viewing data.
func parseGGUF(data []byte) (*Model, error) {
	f, err := gguf.Parse(data)
	if err != nil {
		return nil, err
	}
	return fromGGUF(f)
}

// ggufMetadata returns f's metadata in the form the metadata readers here
// and the tokenizer loaders take: every integer and bool as int64, every
// float as float64, strings as they are. Arrays stay the typed slices
// package gguf reads ([]uint8, []int32, []float32, []string, ...; []any
// of those for arrays of arrays), shared with f rather than boxed value by
// value: a 100 MB uint8 array in a hostile file costs 100 MB, not the
// 1.7 GB an []any of int64 took. metaArray reads their elements.
func ggufMetadata(f *gguf.File) map[string]any {
	out := make(map[string]any, len(f.Metadata))
	for k, v := range f.Metadata {
		if reflect.ValueOf(v).Kind() == reflect.Slice {
			out[k] = v
		} else {
			out[k] = metaValue(reflect.ValueOf(v))
		}
	}
	return out
}

// metaValue converts one value as ggufMetadata converts scalars, and an
// array into an []any of converted values (ReadGGUFMetadata's form).
func metaValue(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Interface:
		return metaValue(v.Elem())
	case reflect.Bool:
		if v.Bool() {
			return int64(1)
		}
		return int64(0)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int64(v.Uint())
	case reflect.Float32, reflect.Float64:
		return v.Float()
	case reflect.Slice:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = metaValue(v.Index(i))
		}
		return out
	}
	return v.String()
}

// metaArray is a metadata array in either form: a typed slice, as
// ggufMetadata keeps them, or an []any, as ReadGGUFMetadata returns them
// and tests write them. Its methods read one element without converting
// the rest.
type metaArray struct{ v reflect.Value }

// arrayMeta returns meta[key] as an array, and whether it is one.
func arrayMeta(meta map[string]any, key string) (metaArray, bool) {
	v := reflect.ValueOf(meta[key])
	return metaArray{v}, v.Kind() == reflect.Slice
}

// Len is the number of elements.
func (a metaArray) Len() int { return a.v.Len() }

// elem returns element i, out of its interface in an []any.
func (a metaArray) elem(i int) reflect.Value {
	e := a.v.Index(i)
	if e.Kind() == reflect.Interface {
		e = e.Elem()
	}
	return e
}

// String returns element i if it is a string.
func (a metaArray) String(i int) (string, bool) {
	if e := a.elem(i); e.Kind() == reflect.String {
		return e.String(), true
	}
	return "", false
}

// Int returns element i if it is an integer or a bool (1 or 0).
func (a metaArray) Int(i int) (int64, bool) {
	switch e := a.elem(i); e.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return e.Int(), true
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int64(e.Uint()), true
	case reflect.Bool:
		if e.Bool() {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// Float returns element i if it is a float.
func (a metaArray) Float(i int) (float64, bool) {
	if e := a.elem(i); e.Kind() == reflect.Float32 || e.Kind() == reflect.Float64 {
		return e.Float(), true
	}
	return 0, false
}

// ggufMatrix and ggufVector turn a GGUF tensor (ggml's shape, innermost
// first) into the kernels.Tensor of its rows, viewing the same bytes.
func ggufMatrix(t gguf.Tensor) kernels.Tensor {
	return kernels.Tensor{Type: t.Type, Rows: t.Rows(), Cols: t.Shape[0], Data: t.Data}
}

// fromGGUF builds the Model that f's metadata and tensors describe, for
// one of ggufArchs, its tensors viewing f's data.
func fromGGUF(f *gguf.File) (*Model, error) {
	meta := ggufMetadata(f)
	c, err := ggufConfig(meta)
	if err != nil {
		return nil, err
	}
	var tok Tokenizer // SentencePiece or byte-level BPE, nil without a vocabulary
	if _, ok := meta["tokenizer.ggml.tokens"]; ok {
		if tok, err = GGUFTokenizer(meta); err != nil {
			return nil, err
		}
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Shape) != 2 {
		return nil, errors.New("model: GGUF has no 2-D token_embd.weight")
	}
	c.Vocab = min(emb.Shape[1], 1<<30)
	c.BOS, c.EOS = -1, -1
	if tok != nil {
		// Fewer tokens than logits is normal (models pad their
		// embeddings); more would be another model's vocabulary.
		if err := bpe.CheckVocabSize(tok.VocabSize(), c.Vocab); err != nil {
			return nil, fmt.Errorf("model: GGUF: %w", err)
		}
		c.BOS, c.EOS = tok.BOS(), tok.EOS()
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	// Every layer has at least 9 tensors: bound the layer count by the
	// file's before allocating layers and naming their tensors.
	if n := len(f.Names()); c.Layers > n/9 {
		return nil, fmt.Errorf("model: GGUF block_count %d, but the file has %d tensors", c.Layers, n)
	}
	d, kv, h, qd, hd := c.Dim, c.KVDim(), c.Hidden, c.QDim(), c.HeadDim()
	m := &Model{Config: c, Layers: make([]Layer, c.Layers), Name: "gguf"}
	if name, ok := meta["general.name"].(string); ok && name != "" {
		m.Name = name
	}
	m.Tokenizer = tok
	var errs []error
	// load sets dst to the named tensor after checking its shape, ggml's
	// (innermost first).
	load := func(dst *kernels.Tensor, name string, shape ...int) {
		t, ok := f.Tensor(name)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("model: GGUF tensor %q missing", name))
		case !slices.Equal(t.Shape, shape):
			errs = append(errs, fmt.Errorf("model: GGUF tensor %q has shape %v, want %v", name, t.Shape, shape))
		default:
			*dst = ggufMatrix(t)
			m.named = append(m.named, namedTensor{name, *dst})
		}
	}
	load(&m.Embedding, "token_embd.weight", d, c.Vocab)
	load(&m.FinalNorm, "output_norm.weight", d)
	if _, ok := f.Tensor("output.weight"); ok {
		load(&m.Classifier, "output.weight", d, c.Vocab)
	} else {
		m.Classifier, m.Config.SharedClassifier = m.Embedding, true
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		load(&l.AttnNorm, p+"attn_norm.weight", d)
		load(&l.Wq, p+"attn_q.weight", d, qd)
		load(&l.Wk, p+"attn_k.weight", d, kv)
		load(&l.Wv, p+"attn_v.weight", d, kv)
		load(&l.Wo, p+"attn_output.weight", qd, d)
		if c.Arch.QKVBias {
			load(&l.Bq, p+"attn_q.bias", qd)
			load(&l.Bk, p+"attn_k.bias", kv)
			load(&l.Bv, p+"attn_v.bias", kv)
		}
		if c.Arch.QKNorm {
			load(&l.QNorm, p+"attn_q_norm.weight", hd)
			load(&l.KNorm, p+"attn_k_norm.weight", hd)
		}
		load(&l.FFNNorm, p+"ffn_norm.weight", d)
		load(&l.W1, p+"ffn_gate.weight", d, h)
		load(&l.W2, p+"ffn_down.weight", h, d)
		load(&l.W3, p+"ffn_up.weight", d, h)
	}
	var freqs []float32
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		var t kernels.Tensor
		load(&t, "rope_freqs.weight", hd/2)
		if t.Rows != 0 {
			// A copy: the scaling may rescale it, and the mapping is read-only.
			f, err := t.Float32s()
			freqs = slices.Clone(f)
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	arch, _ := meta["general.architecture"].(string) // ggufConfig has checked it
	factors, err := ggufRopeFactors(meta, arch, c, freqs)
	if err != nil {
		return nil, err
	}
	return m.finish(factors)
}
