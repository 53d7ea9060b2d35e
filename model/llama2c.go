package model

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/prefixd/prefixd/kernels"
)

// parseLlama2C reads a llama2.c checkpoint: seven little-endian int32
// (dim, hidden, layers, heads, kv heads, vocab — negative when the
// classifier is stored separately — and max length), then float32 tensors
// in a fixed order, the legacy RoPE tables (skipped), and the classifier
// if separate.
func parseLlama2C(data []byte) (*Model, error) {
	if len(data) < 28 {
		return nil, fmt.Errorf("model: llama2.c checkpoint of %d bytes is shorter than its header", len(data))
	}
	var h [7]int32
	for i := range h {
		h[i] = int32(binary.LittleEndian.Uint32(data[4*i:]))
	}
	shared := h[5] > 0
	vocab := h[5]
	if !shared {
		vocab = -vocab
	}
	for i, v := range h {
		if v == 0 || (i != 5 && v < 0) || v > 1<<24 {
			return nil, fmt.Errorf("model: implausible llama2.c header %v", h)
		}
	}
	cfg := Config{
		Dim: int(h[0]), Hidden: int(h[1]), Layers: int(h[2]), Heads: int(h[3]), KVHeads: int(h[4]),
		Vocab: int(vocab), MaxSeqLen: int(h[6]), RopeTheta: 10000, NormEps: 1e-5, BOS: 1, EOS: 2,
		SharedClassifier: shared,
	}
	if cfg.Vocab <= 2 {
		cfg.BOS, cfg.EOS = -1, -1
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := floatReader{data: data, off: 28}
	d, kv, hid, L := cfg.Dim, cfg.KVDim(), cfg.Hidden, cfg.Layers
	m := &Model{Config: cfg, Layers: make([]Layer, L), Name: "llama2.c checkpoint"}
	m.Embedding = r.tensor(cfg.Vocab, d)
	perLayer := func(rows, cols int, set func(l *Layer) *kernels.Tensor) {
		n := rows * cols
		all := r.next(L * n)
		for i := range m.Layers {
			if all != nil {
				*set(&m.Layers[i]) = kernels.FromF32(all[i*n:(i+1)*n], rows, cols)
			}
		}
	}
	perLayer(1, d, func(l *Layer) *kernels.Tensor { return &l.AttnNorm })
	perLayer(d, d, func(l *Layer) *kernels.Tensor { return &l.Wq })
	perLayer(kv, d, func(l *Layer) *kernels.Tensor { return &l.Wk })
	perLayer(kv, d, func(l *Layer) *kernels.Tensor { return &l.Wv })
	perLayer(d, d, func(l *Layer) *kernels.Tensor { return &l.Wo })
	perLayer(1, d, func(l *Layer) *kernels.Tensor { return &l.FFNNorm })
	perLayer(hid, d, func(l *Layer) *kernels.Tensor { return &l.W1 })
	perLayer(d, hid, func(l *Layer) *kernels.Tensor { return &l.W2 })
	perLayer(hid, d, func(l *Layer) *kernels.Tensor { return &l.W3 })
	m.FinalNorm = r.tensor(1, d)
	r.next(cfg.MaxSeqLen * cfg.HeadDim()) // legacy RoPE tables, real and imaginary halves
	if shared {
		m.Classifier = m.Embedding
	} else {
		m.Classifier = r.tensor(cfg.Vocab, d)
	}
	if r.err != nil {
		return nil, r.err
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

// floatReader slices float32 tensors off a byte buffer, remembering the
// first shortfall.
type floatReader struct {
	data []byte
	off  int
	err  error
}

// tensor reads a rows×cols F32 tensor (the zero Tensor after a shortfall).
func (r *floatReader) tensor(rows, cols int) kernels.Tensor {
	f := r.next(rows * cols)
	if f == nil {
		return kernels.Tensor{}
	}
	return kernels.FromF32(f, rows, cols)
}

// next reads n floats (nil after a shortfall).
func (r *floatReader) next(n int) []float32 {
	if r.err != nil {
		return nil
	}
	if n < 0 || r.off+4*n > len(r.data) {
		r.err = fmt.Errorf("model: file truncated: need %d more bytes at offset %d, have %d", 4*n, r.off, len(r.data)-r.off)
		return nil
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(r.data[r.off+4*i:]))
	}
	r.off += 4 * n
	return out
}
