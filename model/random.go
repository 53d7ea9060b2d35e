package model

import (
	"math"
	"math/rand/v2"

	"github.com/prefixd/prefixd/kernels"
)

// Random returns a model of config c (its Arch and HeadWidth included)
// with F32 weights drawn from seed (matrices N(0, 1/fan_in)), tied when
// c.SharedClassifier: norm weights and biases far from one and zero, so a
// tensor the forward pass misplaced or ignored would show in its logits.
// It has no tokenizer.
func Random(c Config, seed uint64) *Model {
	r := rand.New(rand.NewPCG(seed, 1))
	floats := func(n int, mean, scale float64) []float32 {
		w := make([]float32, n)
		for i := range w {
			w[i] = float32(mean + r.NormFloat64()*scale)
		}
		return w
	}
	vec := func(n int, mean, scale float64) kernels.Tensor { return kernels.FromF32(floats(n, mean, scale), 1, n) }
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
