// Package model loads Llama-family models (llama2.c checkpoints; GGUF
// files and Hugging Face safetensors folders of Llama 2 and 3.x, Mistral,
// Qwen2 and Qwen3, their weights kept in the file's types; and a built-in
// synthetic model), tokenizes text, and runs the forward pass over paged K/V:
// attention reads each sequence's K/V through its block table, so a cached
// prefix skips its compute entirely.
package model

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/prefixd/prefixd/batch"
	"github.com/prefixd/prefixd/kernels"
)

// Config is a Llama-architecture model's shape.
type Config struct {
	Dim       int     // embedding width
	Hidden    int     // feed-forward width
	Layers    int     // transformer blocks
	Heads     int     // query heads
	KVHeads   int     // key/value heads (grouped-query attention)
	Vocab     int     // vocabulary size
	MaxSeqLen int     // longest sequence
	RopeTheta float32 // RoPE base, 10000 for Llama 2
	NormEps   float32 // RMSNorm epsilon
	BOS, EOS  int32   // special tokens; negative if none
	// SharedClassifier is true when the output classifier is the token
	// embedding matrix (Model.Classifier aliases Model.Embedding).
	SharedClassifier bool
	// HeadWidth is the width of one attention head when it is not
	// Dim/Heads (Qwen3-0.6B: dim 1024, 16 heads of 128); 0 means
	// Dim/Heads. HeadDim returns the width in effect.
	HeadWidth int
	Arch      Arch // how the layer differs from Llama's
}

// Arch is what sets a Llama-family architecture's layer apart from
// Llama's, as options the one layer loop honours; the zero value is Llama.
type Arch struct {
	Rope kernels.RopeLayout // which elements RoPE pairs
	// QKVBias adds Layer.Bq, Bk and Bv after the q, k and v products
	// (Qwen2).
	QKVBias bool
	// QKNorm applies RMSNorm with Layer.QNorm and KNorm, one head wide,
	// to each head of q and k before RoPE (Qwen3).
	QKNorm bool
}

// HeadDim is the width of one attention head: HeadWidth, or Dim/Heads
// when that is 0.
func (c Config) HeadDim() int {
	if c.HeadWidth != 0 {
		return c.HeadWidth
	}
	return c.Dim / c.Heads
}

// QDim is the width of one token's queries (and of attention's output)
// across heads: Dim unless HeadWidth sets the heads apart.
func (c Config) QDim() int { return c.Heads * c.HeadDim() }

// KVDim is the width of one token's K (or V) across KV heads.
func (c Config) KVDim() int { return c.KVHeads * c.HeadDim() }

// Validate reports a shape the forward pass cannot run.
func (c Config) Validate() error {
	switch {
	case c.Dim <= 0 || c.Hidden <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.Vocab <= 0 || c.MaxSeqLen <= 0:
		return fmt.Errorf("model: config sizes must be positive: %+v", c)
	case c.HeadWidth < 0:
		return fmt.Errorf("model: head width %d is negative", c.HeadWidth)
	case c.HeadWidth == 0 && c.Dim%c.Heads != 0:
		return fmt.Errorf("model: dim %d is not a multiple of %d heads", c.Dim, c.Heads)
	case c.HeadDim()%2 != 0:
		return fmt.Errorf("model: head dim %d is odd; RoPE rotates pairs", c.HeadDim())
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("model: %d heads are not a multiple of %d KV heads", c.Heads, c.KVHeads)
	case c.RopeTheta <= 0 || c.NormEps <= 0:
		return fmt.Errorf("model: rope theta %v and norm eps %v must be positive", c.RopeTheta, c.NormEps)
	case c.Arch.Rope != kernels.RopeAdjacent && c.Arch.Rope != kernels.RopeHalves:
		return fmt.Errorf("model: unknown RoPE layout %d", c.Arch.Rope)
	case int(c.BOS) >= c.Vocab || int(c.EOS) >= c.Vocab:
		return fmt.Errorf("model: BOS %d / EOS %d outside the vocabulary of %d", c.BOS, c.EOS, c.Vocab)
	}
	return nil
}

// Layer holds one transformer block's weights, each a kernels.Tensor in
// the type the file stores it in: a matrix out×in (rows×cols), a vector
// one row.
type Layer struct {
	AttnNorm       kernels.Tensor // dim
	Wq, Wk, Wv, Wo kernels.Tensor // qDim×dim, kvDim×dim, kvDim×dim, dim×qDim
	FFNNorm        kernels.Tensor // dim
	W1, W2, W3     kernels.Tensor // gate hidden×dim, down dim×hidden, up hidden×dim
	Bq, Bk, Bv     kernels.Tensor // qDim, kvDim, kvDim with Arch.QKVBias, else zero
	QNorm, KNorm   kernels.Tensor // headDim each with Arch.QKNorm, else zero
}

// Model is an immutable, loaded model: safe to share between Runners. Its
// tensors keep the file's element types; loaded from a GGUF or
// safetensors file, their Data are views of its read-only bytes, copied
// or mapped (Mapped), valid until Close.
type Model struct {
	Config     Config
	Embedding  kernels.Tensor // vocab×dim
	Layers     []Layer
	FinalNorm  kernels.Tensor // dim
	Classifier kernels.Tensor // vocab×dim; may alias Embedding
	Tokenizer  Tokenizer      // nil when the file has no vocabulary
	Name       string         // what the model is, for logs and /v1/models
	// RopeFactors divide RoPE's pair frequencies, headDim/2 of them, one
	// per pair (Llama 3.x's rope scaling); the zero Tensor for plain RoPE.
	RopeFactors kernels.Tensor

	closers []io.Closer // the files the tensors view, mapped or copied
	mapped  bool        // the tensors view a shared mapping of the files
	// named lists the weights under their file's names, in file order,
	// for CheckTensors; nil for a file without names.
	named []namedTensor
}

// Mapped reports whether the model's tensors view a shared mapping of
// its files (LoadMapped, or Load where the kernels read the file from
// copies of their own), whose pages become resident only as they are
// read, rather than a copy made as it loaded.
func (m *Model) Mapped() bool { return m.mapped }

// Close releases the files the model's tensors view (a GGUF or
// safetensors mapping); neither the model nor a Runner or backend that
// uploaded its tensors may be used afterwards. A model built in memory
// has nothing to close. Closing twice is harmless.
func (m *Model) Close() error {
	var errs []error
	for _, c := range m.closers {
		errs = append(errs, c.Close())
	}
	m.closers = nil
	return errors.Join(errs...)
}

// finish completes a model a loader has filled: factors, when the file
// has RoPE frequency factors, become its RopeFactors, and the whole is
// checked.
func (m *Model) finish(factors []float32) (*Model, error) {
	if factors != nil {
		m.RopeFactors = kernels.FromF32(factors, 1, len(factors))
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

// check verifies every tensor's shape and bytes against the config.
func (m *Model) check() error {
	c := m.Config
	if err := c.Validate(); err != nil {
		return err
	}
	if len(m.Layers) != c.Layers {
		return fmt.Errorf("model: %d layers loaded, config says %d", len(m.Layers), c.Layers)
	}
	want := func(name string, got kernels.Tensor, rows, cols int) error {
		if got.Rows != rows || got.Cols != cols {
			return fmt.Errorf("model: %s is %d×%d, want %d×%d", name, got.Rows, got.Cols, rows, cols)
		}
		if err := got.Check(); err != nil {
			return fmt.Errorf("model: %s: %w", name, err)
		}
		return nil
	}
	vec := func(name string, got kernels.Tensor, n int) error { return want(name, got, min(n, 1), n) }
	d, h, kv, qd := c.Dim, c.Hidden, c.KVDim(), c.QDim()
	errs := []error{
		want("token embedding", m.Embedding, c.Vocab, d),
		vec("final norm", m.FinalNorm, d),
		want("classifier", m.Classifier, c.Vocab, d),
	}
	if m.RopeFactors.Rows != 0 {
		errs = append(errs, vec("rope factors", m.RopeFactors, c.HeadDim()/2))
		if f, err := m.RopeFactors.Float32s(); err == nil {
			for i, f := range f {
				if !(f > 0) || math.IsInf(float64(f), 0) {
					errs = append(errs, fmt.Errorf("model: rope factor %d is %v, not a positive number", i, f))
					break
				}
			}
		}
	}
	for i, l := range m.Layers {
		p := fmt.Sprintf("layer %d ", i)
		errs = append(errs,
			vec(p+"attention norm", l.AttnNorm, d), want(p+"wq", l.Wq, qd, d), want(p+"wk", l.Wk, kv, d),
			want(p+"wv", l.Wv, kv, d), want(p+"wo", l.Wo, d, qd), vec(p+"ffn norm", l.FFNNorm, d),
			want(p+"w1", l.W1, h, d), want(p+"w2", l.W2, d, h), want(p+"w3", l.W3, h, d),
			vec(p+"q bias", l.Bq, ifArch(c.Arch.QKVBias, qd)), vec(p+"k bias", l.Bk, ifArch(c.Arch.QKVBias, kv)),
			vec(p+"v bias", l.Bv, ifArch(c.Arch.QKVBias, kv)),
			vec(p+"q norm", l.QNorm, ifArch(c.Arch.QKNorm, c.HeadDim())), vec(p+"k norm", l.KNorm, ifArch(c.Arch.QKNorm, c.HeadDim())))
	}
	return errors.Join(errs...)
}

// ifArch is n for a tensor that an Arch option on requires, 0 when the
// option is off: a tensor the layer loop would ignore is an error.
func ifArch(on bool, n int) int {
	if on {
		return n
	}
	return 0
}

// kvShape returns the shape of a K/V pool for this model.
func (m *Model) kvShape() (layers, kvHeads, headDim int) {
	return m.Config.Layers, m.Config.KVHeads, m.Config.HeadDim()
}

// Seq is one sequence's part of a forward pass: batch.Row, named here for
// the model's callers.
type Seq = batch.Row
