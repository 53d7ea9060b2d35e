package model

import (
	"errors"
	"fmt"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels/cpu"
)

// Runner runs a Model's forward pass on the CPU. It owns its scratch
// buffers (grown to the largest batch seen) and the K/V pool it allocates
// with NewKV, so after warm-up a forward pass allocates nothing. A Runner is not safe for
// concurrent use (the engine's scheduler goroutine owns it); the Model may
// be shared.
type Runner struct {
	m     *Model
	w     *cpu.Workers
	kv    *cpu.KVCache
	bsize int

	x, xb, q, k, v, att, hb, hb2 []float32
	logits                       []float32
	attn                         []cpu.AttnSeq
	scratch                      cpu.AttnScratch
}

// NewRunner returns a Runner computing on w, which the caller owns and
// closes. The Runner must not share w with a concurrent user of w's For.
func NewRunner(m *Model, w *cpu.Workers) *Runner { return &Runner{m: m, w: w} }

// Model returns the runner's model.
func (r *Runner) Model() *Model { return r.m }

// VocabSize is the number of logits per row.
func (r *Runner) VocabSize() int { return r.m.Config.Vocab }

// MaxSeqLen is the longest sequence the model supports.
func (r *Runner) MaxSeqLen() int { return r.m.Config.MaxSeqLen }

// NewKV allocates the K/V pool Forward reads and writes, replacing any
// earlier one.
func (r *Runner) NewKV(numBlocks, blockSize int) (blockstore.Storage, error) {
	l, kvh, hd := r.m.kvShape()
	kv, err := cpu.NewKVCache(cpu.KVConfig{Layers: l, KVHeads: kvh, HeadDim: hd, BlockSize: blockSize, NumBlocks: numBlocks})
	if err != nil {
		return nil, err
	}
	r.kv, r.bsize = kv, blockSize
	return kv, nil
}

// grow returns b resized to n, reallocating only when b is too small.
func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// ErrInvalidBatch is wrapped by every error Forward returns for a batch
// that does not fit the model or the K/V pool (the fault is the caller's).
var ErrInvalidBatch = errors.New("model: invalid batch")

// validate checks a batch against the model and the K/V pool.
func (r *Runner) validate(seqs []Seq) (tokens int, err error) {
	c := r.m.Config
	if r.kv == nil {
		return 0, fmt.Errorf("%w: Forward before NewKV", ErrInvalidBatch)
	}
	if len(seqs) == 0 {
		return 0, fmt.Errorf("%w: no sequences", ErrInvalidBatch)
	}
	numBlocks := r.kv.Config().NumBlocks
	for i, s := range seqs {
		end := s.Start + len(s.Tokens)
		switch {
		case len(s.Tokens) == 0:
			return 0, fmt.Errorf("%w: sequence %d has no tokens", ErrInvalidBatch, i)
		case s.Start < 0 || end > c.MaxSeqLen:
			return 0, fmt.Errorf("%w: sequence %d spans positions [%d, %d), outside [0, %d)", ErrInvalidBatch, i, s.Start, end, c.MaxSeqLen)
		case len(s.Blocks)*r.bsize < end:
			return 0, fmt.Errorf("%w: sequence %d has %d blocks for %d positions", ErrInvalidBatch, i, len(s.Blocks), end)
		}
		for _, b := range s.Blocks[:(end+r.bsize-1)/r.bsize] {
			if b < 0 || int(b) >= numBlocks {
				return 0, fmt.Errorf("%w: sequence %d uses block %d of a %d-block pool", ErrInvalidBatch, i, b, numBlocks)
			}
		}
		for _, t := range s.Tokens {
			if t < 0 || int(t) >= c.Vocab {
				return 0, fmt.Errorf("%w: token %d outside the vocabulary of %d", ErrInvalidBatch, t, c.Vocab)
			}
		}
		tokens += len(s.Tokens)
	}
	return tokens, nil
}

// Forward runs one batch: every token of every sequence goes through each
// weight matrix in one product, and attention reads each sequence's K/V
// through its block table after this pass's K/V are written. It returns
// Vocab logits for each sequence with Logits set, in order; the slice is
// reused by the next call.
func (r *Runner) Forward(seqs []Seq) ([]float32, error) {
	T, err := r.validate(seqs)
	if err != nil {
		return nil, err
	}
	c := r.m.Config
	d, kvd, hid, hd := c.Dim, c.KVDim(), c.Hidden, c.HeadDim()
	r.x, r.xb, r.att = grow(r.x, T*d), grow(r.xb, T*d), grow(r.att, T*d)
	r.q, r.k, r.v = grow(r.q, T*d), grow(r.k, T*kvd), grow(r.v, T*kvd)
	r.hb, r.hb2 = grow(r.hb, T*hid), grow(r.hb2, T*hid)

	row := 0
	r.attn = r.attn[:0]
	for _, s := range seqs {
		for _, t := range s.Tokens {
			copy(r.x[row*d:(row+1)*d], r.m.Embedding[int(t)*d:])
			row++
		}
		r.attn = append(r.attn, cpu.AttnSeq{Blocks: s.Blocks, Start: s.Start, Rows: len(s.Tokens)})
	}
	for li := range r.m.Layers {
		l := &r.m.Layers[li]
		r.norm(T, l.AttnNorm)
		cpu.MatMul(r.w, r.q, r.xb, l.Wq, T, d, d)
		cpu.MatMul(r.w, r.k, r.xb, l.Wk, T, kvd, d)
		cpu.MatMul(r.w, r.v, r.xb, l.Wv, T, kvd, d)
		t := 0
		for _, s := range seqs {
			for i := range s.Tokens {
				pos := s.Start + i
				cpu.RoPE(r.q[t*d:(t+1)*d], pos, c.Heads, hd, c.RopeTheta)
				cpu.RoPE(r.k[t*kvd:(t+1)*kvd], pos, c.KVHeads, hd, c.RopeTheta)
				r.kv.Put(li, s.Blocks[pos/r.bsize], pos%r.bsize, r.k[t*kvd:(t+1)*kvd], r.v[t*kvd:(t+1)*kvd])
				t++
			}
		}
		r.kv.Attention(r.w, li, r.q, r.att, r.attn, c.Heads, &r.scratch)
		cpu.MatMul(r.w, r.xb, r.att, l.Wo, T, d, d)
		cpu.Add(r.x, r.xb)
		r.norm(T, l.FFNNorm)
		cpu.MatMul(r.w, r.hb, r.xb, l.W1, T, hid, d)
		cpu.MatMul(r.w, r.hb2, r.xb, l.W3, T, hid, d)
		cpu.SwiGLU(r.hb, r.hb, r.hb2)
		cpu.MatMul(r.w, r.xb, r.hb, l.W2, T, d, hid)
		cpu.Add(r.x, r.xb)
	}
	// Final norm and classifier for the rows that want logits only.
	n := 0
	row = 0
	for _, s := range seqs {
		row += len(s.Tokens)
		if s.Logits {
			cpu.RMSNorm(r.xb[n*d:(n+1)*d], r.x[(row-1)*d:row*d], r.m.FinalNorm, c.NormEps)
			n++
		}
	}
	r.logits = grow(r.logits, n*c.Vocab)
	cpu.MatMul(r.w, r.logits, r.xb, r.m.Classifier, n, c.Vocab, d)
	return r.logits, nil
}

// norm writes RMSNorm(x)·weight of the first n rows of x into xb. It runs
// on the calling goroutine: it is O(n·dim), negligible beside the matrix
// products, and handing a closure to the workers would allocate per call.
func (r *Runner) norm(n int, weight []float32) {
	d, eps := r.m.Config.Dim, r.m.Config.NormEps
	for t := range n {
		cpu.RMSNorm(r.xb[t*d:(t+1)*d], r.x[t*d:(t+1)*d], weight, eps)
	}
}
