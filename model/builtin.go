package model

import (
	"math"
	"math/rand/v2"

	"github.com/prefixd/prefixd/kernels"
)

// BuiltinConfig is the shape of the built-in model: a small Llama (about
// 3.2M parameters, 13 MB of float32) over the byte-level vocabulary, sized
// so the daemon answers quickly on two CPU cores.
var BuiltinConfig = Config{
	Dim: 256, Hidden: 768, Layers: 4, Heads: 8, KVHeads: 4,
	Vocab: 258, MaxSeqLen: 4096, RopeTheta: 10000, NormEps: 1e-5,
	BOS: ByteBOS, EOS: ByteEOS, SharedClassifier: true,
}

// Builtin returns the built-in synthetic model: BuiltinConfig with weights
// drawn from a fixed seed (each matrix N(0, 1/fan_in), norms 1), so every
// run of prefixd computes the same outputs. Its text means nothing; it
// exists so the daemon runs, and is benchmarked, with no model file.
func Builtin() *Model {
	c := BuiltinConfig
	r := rand.New(rand.NewPCG(0x70726566, 0x69786421))
	mat := func(rows, cols int) kernels.Tensor {
		w := make([]float32, rows*cols)
		s := 1 / math.Sqrt(float64(cols))
		for i := range w {
			w[i] = float32(r.NormFloat64() * s)
		}
		return kernels.FromF32(w, rows, cols)
	}
	ones := func(n int) kernels.Tensor {
		w := make([]float32, n)
		for i := range w {
			w[i] = 1
		}
		return kernels.FromF32(w, 1, n)
	}
	d, kv, h := c.Dim, c.KVDim(), c.Hidden
	m := &Model{Config: c, Tokenizer: ByteTokenizer{}, Name: "prefixd-builtin-byte-3m"}
	m.Embedding = mat(c.Vocab, d)
	for range c.Layers {
		m.Layers = append(m.Layers, Layer{
			AttnNorm: ones(d), Wq: mat(d, d), Wk: mat(kv, d), Wv: mat(kv, d), Wo: mat(d, d),
			FFNNorm: ones(d), W1: mat(h, d), W2: mat(d, h), W3: mat(h, d),
		})
	}
	m.FinalNorm = ones(d)
	m.Classifier = m.Embedding
	return m
}
