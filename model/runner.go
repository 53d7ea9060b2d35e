package model

import (
	"errors"
	"fmt"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/cpu"
)

// Runner runs a Model's forward pass on a Backend: the Llama layer order,
// written once, with the options of the model's Arch. It uploads the
// model's weights to the backend once, declares its activation buffers
// there (grown to the largest batch seen) and has it allocate the K/V pool
// in NewKV, so after warm-up a forward pass on the CPU backend allocates
// nothing. A Runner is not safe for concurrent use (the engine's scheduler
// goroutine owns it); the Model may be shared.
type Runner struct {
	m      *Model
	b      Backend
	w      weights
	kv     kernels.KVConfig // zero until NewKV
	kvType kernels.DType    // the element type NewKV asks for

	x, xb, q, k, v, att, hb, hb2 kernels.Buf
	// On a FusedBackend: qkv holds [q | k | v] (k and v are then not
	// declared), gu [gate | up] (hb2 is not).
	qkv, gu kernels.Buf
	fb      FusedBackend   // b, if it is one (asserted once)
	grp     GroupedBackend // b, if it is one
	gb      GreedyBackend  // b, if it is one
	sb      SamplingBackend
	// live are the buffers the last layer reads after its attention (the
	// attention output and the residual), which Forward narrows to the
	// rows that want logits; made once, so passing them allocates nothing.
	live []kernels.Buf
	// qkvOut and gateUpOut are [q, k, v] and [hb, hb2], the outputs of a
	// layer's grouped products where the backend is not a FusedBackend.
	qkvOut, gateUpOut []kernels.Buf
	ids               []int32 // ForwardSample's on a backend that is not a GreedyBackend
}

// weights are the backend's handles of a Model's tensors.
type weights struct {
	embed, finalNorm, classifier kernels.Weight
	ropeFactors                  kernels.Weight // kernels.NoWeight for plain RoPE
	layers                       []layerWeights
}

type layerWeights struct {
	attnNorm, wo, ffnNorm, w2 kernels.Weight
	bq, bk, bv, qNorm, kNorm  kernels.Weight // as the Arch has them
	// Where the backend is not a FusedBackend: [wq, wk, wv] and [w1, w3],
	// each group multiplied by one input (matMuls).
	qkv, gateUp []kernels.Weight
	// On a FusedBackend: [wq; wk; wv] (with [bq | bk | bv]) in place of
	// wq, wk, wv (and their biases) where the runner fuses them, and
	// [w1; w3] in place of w1 and w3.
	wqkv, bqkv, w13 kernels.Weight
}

// NewRunner returns a Runner computing on the CPU with w, which the caller
// owns and closes. The Runner must not share w with a concurrent user of
// w's For. m must be a loaded Model (whose tensors fit its config, in
// types the CPU backend always accepts); NewRunner panics if it is not.
func NewRunner(m *Model, w *cpu.Workers) *Runner {
	r, err := NewRunnerOn(m, cpu.NewBackend(w))
	if err != nil {
		panic(fmt.Sprintf("model: NewRunner on a model that is not loaded: %v", err))
	}
	return r
}

// NewRunnerOn returns a Runner computing on b, which it uploads m's
// weights to; it fails if a tensor of m does not fit m's config or b
// cannot hold one of them. b must not be shared.
func NewRunnerOn(m *Model, b Backend) (*Runner, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	c := m.Config
	d, kvd, qd := c.Dim, c.KVDim(), c.QDim()
	var errs []error
	up := func(t kernels.Tensor) kernels.Weight {
		w, err := b.Upload(t)
		errs = append(errs, err)
		return w
	}
	r := &Runner{m: m, b: b}
	r.w.embed = up(m.Embedding)
	r.w.classifier = r.w.embed
	if !c.SharedClassifier {
		r.w.classifier = up(m.Classifier)
	}
	r.w.finalNorm = up(m.FinalNorm)
	if m.RopeFactors.Rows != 0 {
		r.w.ropeFactors = up(m.RopeFactors)
	}
	// On a FusedBackend, q, k and v come from one product, gate and up
	// from another.
	r.fb, _ = b.(FusedBackend)
	r.grp, _ = b.(GroupedBackend)
	r.gb, _ = b.(GreedyBackend)
	r.sb, _ = b.(SamplingBackend)
	fused := r.fb != nil
	upStack := func(ts ...kernels.Tensor) kernels.Weight {
		t, err := stack(ts...)
		if err != nil {
			errs = append(errs, err)
			return kernels.NoWeight
		}
		return up(t)
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		lw := layerWeights{attnNorm: up(l.AttnNorm), wo: up(l.Wo), ffnNorm: up(l.FFNNorm), w2: up(l.W2)}
		if fused {
			lw.wqkv = upStack(l.Wq, l.Wk, l.Wv)
		} else {
			lw.qkv = []kernels.Weight{up(l.Wq), up(l.Wk), up(l.Wv)}
		}
		if fused {
			lw.w13 = upStack(l.W1, l.W3)
		} else {
			lw.gateUp = []kernels.Weight{up(l.W1), up(l.W3)}
		}
		switch {
		case c.Arch.QKVBias && fused:
			lw.bqkv = upStack(l.Bq, l.Bk, l.Bv)
		case c.Arch.QKVBias:
			lw.bq, lw.bk, lw.bv = up(l.Bq), up(l.Bk), up(l.Bv)
		}
		if c.Arch.QKNorm {
			lw.qNorm, lw.kNorm = up(l.QNorm), up(l.KNorm)
		}
		r.w.layers = append(r.w.layers, lw)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r.x, r.xb, r.att, r.q, r.hb = b.Buffer(d), b.Buffer(d), b.Buffer(qd), b.Buffer(qd), b.Buffer(c.Hidden)
	if fused {
		r.qkv, r.gu = b.Buffer(qd+2*kvd), b.Buffer(2*c.Hidden)
	} else {
		r.k, r.v, r.hb2 = b.Buffer(kvd), b.Buffer(kvd), b.Buffer(c.Hidden)
		r.qkvOut, r.gateUpOut = []kernels.Buf{r.q, r.k, r.v}, []kernels.Buf{r.hb, r.hb2}
	}
	r.live = []kernels.Buf{r.att, r.x}
	return r, nil
}

// Model returns the runner's model.
func (r *Runner) Model() *Model { return r.m }

// VocabSize is the number of logits per row.
func (r *Runner) VocabSize() int { return r.m.Config.Vocab }

// MaxSeqLen is the longest sequence the model supports.
func (r *Runner) MaxSeqLen() int { return r.m.Config.MaxSeqLen }

// ParseKVType parses a K/V element type's name, as --kv-type takes it:
// "f32" or "f16".
func ParseKVType(s string) (kernels.DType, error) {
	switch s {
	case "f32":
		return kernels.F32, nil
	case "f16":
		return kernels.F16, nil
	}
	return 0, fmt.Errorf("model: K/V element type %q: want f32 or f16", s)
}

// SetKVType sets the element type of the K/V pools NewKV allocates from
// then on: kernels.F32 (the default) or kernels.F16, half the memory (the
// CPU backend's; the GPU backend keeps its own type and refuses it). A
// type the backend cannot hold is NewKV's error.
func (r *Runner) SetKVType(t kernels.DType) { r.kvType = t }

// NewKV allocates the K/V pool Forward reads and writes, replacing any
// earlier one.
func (r *Runner) NewKV(numBlocks, blockSize int) (blockstore.Storage, error) {
	l, kvh, hd := r.m.kvShape()
	cfg := kernels.KVConfig{Layers: l, KVHeads: kvh, HeadDim: hd, BlockSize: blockSize, NumBlocks: numBlocks, Type: r.kvType}
	st, err := r.b.NewKV(cfg)
	if err != nil {
		return nil, err
	}
	r.kv = cfg
	return st, nil
}

// ErrInvalidBatch is wrapped by every error Forward returns for a batch
// that does not fit the model or the K/V pool (the fault is the caller's).
var ErrInvalidBatch = errors.New("model: invalid batch")

// qkvApart computes layer li's q, k and v in three products, with their
// biases and per-head norms as the model has them, rotates q and k and
// stores k and v: what a backend without FusedBackend runs.
func (r *Runner) qkvApart(li int, l *layerWeights) {
	c, b, eps := r.m.Config, r.b, r.m.Config.NormEps
	r.matMuls(r.qkvOut, r.xb, l.qkv)
	if c.Arch.QKVBias {
		b.AddBias(r.q, l.bq)
		b.AddBias(r.k, l.bk)
		b.AddBias(r.v, l.bv)
	}
	if c.Arch.QKNorm {
		b.HeadNorm(r.q, c.Heads, l.qNorm, eps)
		b.HeadNorm(r.k, c.KVHeads, l.kNorm, eps)
	}
	b.RoPE(r.q, c.Heads, c.RopeTheta, c.Arch.Rope, r.w.ropeFactors)
	b.RoPE(r.k, c.KVHeads, c.RopeTheta, c.Arch.Rope, r.w.ropeFactors)
	b.PutKV(li, r.k, r.v)
}

// matMuls sets each dsts[i] = x·ws[i]ᵀ: in one op on a GroupedBackend,
// else one MatMul each.
func (r *Runner) matMuls(dsts []kernels.Buf, x kernels.Buf, ws []kernels.Weight) {
	if r.grp != nil {
		r.grp.MatMuls(dsts, x, ws)
		return
	}
	for i, w := range ws {
		r.b.MatMul(dsts[i], x, w)
	}
}

// residual adds x·Wᵀ to the residual stream r.x: in one product on a
// FusedBackend, else through r.xb.
func (r *Runner) residual(x kernels.Buf, w kernels.Weight) {
	if r.fb != nil {
		r.fb.MatMulAdd(r.x, x, w)
		return
	}
	r.b.MatMul(r.xb, x, w)
	r.b.Add(r.x, r.xb)
}

// validate checks a batch against the model and the K/V pool.
func (r *Runner) validate(seqs []Seq) error {
	c := r.m.Config
	bs := r.kv.BlockSize
	if bs == 0 {
		return fmt.Errorf("%w: Forward before NewKV", ErrInvalidBatch)
	}
	if len(seqs) == 0 {
		return fmt.Errorf("%w: no sequences", ErrInvalidBatch)
	}
	for i, s := range seqs {
		end := s.Start + len(s.Tokens)
		switch {
		case len(s.Tokens) == 0:
			return fmt.Errorf("%w: sequence %d has no tokens", ErrInvalidBatch, i)
		case s.Start < 0 || end > c.MaxSeqLen:
			return fmt.Errorf("%w: sequence %d spans positions [%d, %d), outside [0, %d)", ErrInvalidBatch, i, s.Start, end, c.MaxSeqLen)
		case len(s.Blocks)*bs < end:
			return fmt.Errorf("%w: sequence %d has %d blocks for %d positions", ErrInvalidBatch, i, len(s.Blocks), end)
		case s.Drafts < 0 || s.Drafts >= len(s.Tokens) || s.Drafts > 0 && !s.Logits:
			return fmt.Errorf("%w: sequence %d asks for logits at %d drafted positions of its %d tokens (logits %v)", ErrInvalidBatch, i, s.Drafts, len(s.Tokens), s.Logits)
		}
		for _, b := range s.Blocks[:(end+bs-1)/bs] {
			if b < 0 || int(b) >= r.kv.NumBlocks {
				return fmt.Errorf("%w: sequence %d uses block %d of a %d-block pool", ErrInvalidBatch, i, b, r.kv.NumBlocks)
			}
		}
		for _, t := range s.Tokens {
			if t < 0 || int(t) >= c.Vocab {
				return fmt.Errorf("%w: token %d outside the vocabulary of %d", ErrInvalidBatch, t, c.Vocab)
			}
		}
	}
	return nil
}

// Forward runs one batch: every token of every sequence goes through each
// weight matrix in one product, and attention reads each sequence's K/V
// through its block table after this pass's K/V are written. It returns
// Vocab logits for each position that wants them (Seq.LogitRows trailing
// positions of each sequence), in order; the slice is reused by the next
// call.
func (r *Runner) Forward(seqs []Seq) ([]float32, error) {
	if err := r.layers(seqs); err != nil {
		return nil, err
	}
	return r.b.Logits(r.x, r.w.finalNorm, r.w.classifier, r.m.Config.NormEps)
}

// layers validates seqs and queues the step's layers on the backend, up
// to the final norm and classifier, which Forward and ForwardSample add.
func (r *Runner) layers(seqs []Seq) error {
	if err := r.validate(seqs); err != nil {
		return err
	}
	c, b, eps := r.m.Config, r.b, r.m.Config.NormEps
	fb, fused := r.fb, r.fb != nil
	b.Begin(seqs)
	b.Embed(r.x, r.w.embed)
	for li := range r.w.layers {
		l := &r.w.layers[li]
		b.RMSNorm(r.xb, r.x, l.attnNorm, eps)
		if fused {
			b.MatMul(r.qkv, r.xb, l.wqkv)
			if c.Arch.QKVBias {
				b.AddBias(r.qkv, l.bqkv)
			}
			fb.RoPEPutKV(li, r.q, r.qkv, c.Heads, c.RopeTheta, c.Arch.Rope, r.w.ropeFactors, l.qNorm, l.kNorm, eps)
		} else {
			r.qkvApart(li, l)
		}
		b.Attention(r.att, r.q, li, c.Heads)
		if li == len(r.w.layers)-1 {
			// Only the rows that want logits have a use for what follows
			// (a prompt's other rows have stored their K/V): llama.cpp
			// skips them too, 6% of a 12-layer model's prompt products.
			b.Narrow(r.live...)
		}
		r.residual(r.att, l.wo)
		b.RMSNorm(r.xb, r.x, l.ffnNorm, eps)
		if fused {
			b.MatMul(r.gu, r.xb, l.w13)
			fb.SwiGLUFused(r.hb, r.gu)
		} else {
			r.matMuls(r.gateUpOut, r.xb, l.gateUp)
			b.SwiGLU(r.hb, r.hb, r.hb2)
		}
		r.residual(r.hb, l.w2)
	}
	return nil
}
