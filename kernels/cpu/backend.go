package cpu

import (
	"fmt"
	"runtime"

	"github.com/prefixd/prefixd/batch"
	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/internal/mmap"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
)

// Backend runs a forward pass's operations on the CPU: it implements
// model.Backend (structurally; this package does not import model) over
// this package's kernels, its weights in host memory, its activations in
// float32 slices it grows to the largest batch seen, and its K/V in a
// KVCache. After warm-up a step allocates nothing. A Backend is not safe
// for concurrent use; it shares its Workers with no concurrent user.
type Backend struct {
	w       *Workers
	q       *quant.Multiplier // products on weights of other types than F32
	deq     deqGemm           // and those of a prefill chunk
	deqRun  func(part, lo, hi int)
	weights []weight
	bufs    []buffer
	kv      *KVCache

	rows     []batch.Row // the current step's, from Begin
	tokens   int         // Σ len(rows[i].Tokens), or after Narrow the rows left
	narrowed bool        // Narrow has run this step
	attn     []AttnSeq
	scratch  AttnScratch
	normed   []float32 // the final norm of the rows that want logits
	rope     ropeTable
	logits   []float32
	packs    *packedCopies
	prods    []quant.Product // MatMuls' products, reused
}

// packedCopies hold the packed Q8_0 matrices (pack) in huge pages: an
// arena sized at the first product for every Q8_0 matrix uploaded by
// then, carved in the order the matrices are first multiplied, so that
// small matrices share huge pages; a matrix uploaded later gets its own.
// The releases run when the Backend is garbage: the memory is not the Go
// heap's.
type packedCopies struct {
	arena    []byte
	reserved bool
	release  []func() error
}

// take returns n bytes of huge pages for a packed matrix, reserving the
// arena for every Q8_0 matrix in weights at the first call; nil if the
// memory cannot be had.
func (p *packedCopies) take(n int, weights []weight) []byte {
	if !p.reserved {
		p.reserved = true
		total := 0
		for _, w := range weights {
			if w.t.Type == kernels.Q8_0 {
				total += quant.PackedQ8_0Size(w.rows, w.cols)
			}
		}
		if arena, release, err := mmap.Huge(total); err == nil {
			p.arena, p.release = arena, append(p.release, release)
		}
	}
	if len(p.arena) >= n {
		b := p.arena[:n:n]
		p.arena = p.arena[n:]
		return b
	}
	b, release, err := mmap.Huge(n)
	if err != nil {
		return nil
	}
	p.release = append(p.release, release)
	return b
}

// weight is an uploaded tensor, rows×cols of t's type. f holds its values
// as float32 where the ops need them: a view of t for F32, a converted
// copy for a vector of another type (a norm or a bias, tiny); nil for a
// matrix of another type, which only MatMul, Embed and Logits read, in
// its own type.
type weight struct {
	t          kernels.Tensor
	f          []float32
	rows, cols int
	// packed is a Q8_0 matrix laid out for kernels/quant's packed kernels,
	// made at its first product (so an embedding that is only looked up
	// is not packed); packTried says PackQ8_0 ran, nil where it declined.
	packed    []byte
	packTried bool
}

// buffer is an activation: one row of cols floats per token of the step.
type buffer struct {
	f    []float32
	cols int
}

// NewBackend returns a Backend computing on w, which the caller owns and
// closes.
func NewBackend(w *Workers) *Backend {
	// Entry 0 stands for kernels.NoWeight, which Upload never issues; its
	// zero width makes any op handed it fail its shape check.
	var par quant.ParallelFor // nil runs the quantized products inline
	if w != nil {
		par = w.For
	}
	b := &Backend{w: w, q: quant.NewMultiplier(par), weights: make([]weight, 1), packs: &packedCopies{}}
	b.deqRun = b.deq.run // made once, so handing it to For does not allocate
	runtime.AddCleanup(b, func(p *packedCopies) {
		for _, release := range p.release {
			_ = release()
		}
	}, b.packs)
	return b
}

// Upload keeps t for the ops that name the returned handle, in its own
// type: any of ggml's weight types (F32, F16, BF16, Q4_0 ... Q8_0, Q4_K,
// Q5_K, Q6_K). t.Data is used in place, not copied, so it must outlive
// the Backend; a vector (one row) of a type other than F32 is converted to
// float32 once, since the row ops (norms, biases, RoPE factors) take
// floats. It returns an error for a type this backend cannot compute on or
// data that does not fit the shape.
func (b *Backend) Upload(t kernels.Tensor) (kernels.Weight, error) {
	if err := t.Check(); err != nil {
		return 0, fmt.Errorf("cpu: upload: %w", err)
	}
	w := weight{t: t, rows: t.Rows, cols: t.Cols}
	if t.Type == kernels.F32 || t.Rows == 1 {
		f, err := t.Float32s()
		if err != nil {
			return 0, fmt.Errorf("cpu: upload: %w", err)
		}
		w.f = f
	}
	b.weights = append(b.weights, w)
	return kernels.Weight(len(b.weights) - 1), nil
}

// Buffer declares an activation buffer of cols floats per token row.
func (b *Backend) Buffer(cols int) kernels.Buf {
	b.bufs = append(b.bufs, buffer{cols: cols})
	return kernels.Buf(len(b.bufs) - 1)
}

// NewKV allocates the K/V pool the steps read and write, replacing any
// earlier one, and returns it as the block pool's Storage (whose
// CopyBlocks serves copy-on-write).
func (b *Backend) NewKV(cfg kernels.KVConfig) (blockstore.Storage, error) {
	kv, err := NewKVCache(cfg)
	if err != nil {
		return nil, err
	}
	b.kv = kv
	return kv, nil
}

// Begin starts a step over rows, which the caller has validated against
// the model and the K/V pool: every buffer gets one row per token. The
// Backend keeps rows until the next Begin.
func (b *Backend) Begin(rows []batch.Row) {
	b.rows = rows
	b.rope.ok = false
	b.tokens, b.narrowed = 0, false
	b.attn = b.attn[:0]
	for _, r := range rows {
		b.tokens += len(r.Tokens)
		b.attn = append(b.attn, AttnSeq{Blocks: r.Blocks, Start: r.Start, Rows: len(r.Tokens)})
	}
	for i := range b.bufs {
		b.bufs[i].f = grow(b.bufs[i].f, b.tokens*b.bufs[i].cols)
	}
}

// grow returns f resized to n, reallocating only when f is too small.
func grow(f []float32, n int) []float32 {
	if cap(f) < n {
		return make([]float32, n)
	}
	return f[:n]
}

// Embed sets each token row of dst to its token's row of table,
// dequantizing it when the table is not F32.
func (b *Backend) Embed(dst kernels.Buf, table kernels.Weight) {
	d, w := &b.bufs[dst], &b.weights[table]
	same("Embed", d.cols, w.cols)
	t := 0
	for _, r := range b.rows {
		for _, tok := range r.Tokens {
			row := d.f[t*d.cols : (t+1)*d.cols]
			if w.t.Type == kernels.F32 {
				copy(row, w.f[int(tok)*w.cols:])
			} else if err := quant.Dequantize(w.t.Type, row, w.t.Row(int(tok))); err != nil {
				panic(fmt.Sprintf("cpu: Embed: %v", err)) // Upload checked the shape
			}
			t++
		}
	}
}

// RMSNorm sets each row of dst to RMSNorm(row of x)·weight. It runs on
// the calling goroutine: it is O(tokens·width), negligible beside the
// matrix products, and handing a closure to the workers would allocate.
func (b *Backend) RMSNorm(dst, x kernels.Buf, weight kernels.Weight, eps float32) {
	d, s, w := &b.bufs[dst], &b.bufs[x], &b.weights[weight]
	same("RMSNorm", d.cols, s.cols)
	same("RMSNorm", d.cols, w.cols)
	n := d.cols
	for t := range b.tokens {
		RMSNorm(d.f[t*n:(t+1)*n], s.f[t*n:(t+1)*n], w.f, eps)
	}
}

// HeadNorm applies RMSNorm with weight (one head wide) to every head of
// every row of x, in place: the q/k norm of Qwen3.
func (b *Backend) HeadNorm(x kernels.Buf, heads int, weight kernels.Weight, eps float32) {
	s, w := &b.bufs[x], &b.weights[weight]
	same("HeadNorm", s.cols, heads*w.cols)
	hd := w.cols
	for i := range b.tokens * heads {
		h := s.f[i*hd : (i+1)*hd]
		RMSNorm(h, h, w.f, eps)
	}
}

// MatMul sets dst = x·Wᵀ over the step's rows, W being rows×cols
// (out×in).
func (b *Backend) MatMul(dst, x kernels.Buf, w kernels.Weight) {
	d, s, m := &b.bufs[dst], &b.bufs[x], &b.weights[w]
	same("MatMul", d.cols, m.rows)
	same("MatMul", s.cols, m.cols)
	b.matMul(d.f, s.f, m, b.tokens)
}

// MatMuls sets each dsts[i] = x·ws[i]ᵀ, as MatMul on each would, to the
// same bits. Where every one of the weights runs on kernels/quant for the
// step's rows (a decode step, a small batch), x is quantized once for all
// of them and their output rows are split over the workers in one
// parallel loop: a layer's q, k and v projections, or its gate and up,
// then wait once for the slowest worker instead of once each.
func (b *Backend) MatMuls(dsts []kernels.Buf, x kernels.Buf, ws []kernels.Weight) {
	s := &b.bufs[x]
	if len(dsts) != len(ws) {
		panic(fmt.Sprintf("cpu: MatMuls into %d buffers with %d weights", len(dsts), len(ws)))
	}
	b.prods = b.prods[:0]
	for i, w := range ws {
		d, m := &b.bufs[dsts[i]], &b.weights[w]
		same("MatMuls", d.cols, m.rows)
		same("MatMuls", s.cols, m.cols)
		if p, ok := b.quantProduct(d.f, m, b.tokens); ok {
			b.prods = append(b.prods, p)
		}
	}
	if len(b.prods) == len(ws) {
		b.quantMatMuls(s.f, b.tokens, s.cols, b.prods...)
	} else {
		for i, w := range ws {
			b.matMul(b.bufs[dsts[i]].f, s.f, &b.weights[w], b.tokens)
		}
	}
	clear(b.prods) // keep no weights or buffers alive
}

// matMul sets dst = x·Wᵀ for rows rows of x: F32 weights through this
// package's GEMM (its results are those of every earlier release); other
// types through kernels/quant on the weights as uploaded, or, for
// gemmRows(type) rows and more (a prefill chunk, or a decode batch where
// the type dequantizes fast), through the GEMM: on the weights as they
// are where it converts their type as it loads them (directGemm), else
// on float32 groups of their rows.
func (b *Backend) matMul(dst, x []float32, m *weight, rows int) {
	if p, ok := b.quantProduct(dst, m, rows); ok {
		b.quantMatMuls(x, rows, m.cols, p)
		return
	}
	switch {
	case m.t.Type == kernels.F32:
		MatMul(b.w, dst, x, m.f, rows, m.rows, m.cols)
	case directGemm(m.t.Type, m.rows):
		matMulDirect(b.w, dst, x, m.t.Data, m.t.Type, rows, m.rows, m.cols)
	default:
		b.deqMatMul(dst, x, m.t, rows)
	}
}

// quantProduct returns the product of rows rows by m into dst for
// kernels/quant, and whether they run there (matMul says where they do).
func (b *Backend) quantProduct(dst []float32, m *weight, rows int) (quant.Product, bool) {
	if m.t.Type == kernels.F32 || rows >= gemmRows(m.t.Type) {
		return quant.Product{}, false
	}
	if m.t.Type == kernels.Q8_0 && !m.packTried {
		m.packed, m.packTried = b.pack(m), true
	}
	return quant.Product{Dst: dst, W: m.t.Data, Type: m.t.Type, Out: m.rows, Packed: m.packed}, true
}

// quantMatMuls runs products ps of rows rows of x (in values each) on
// kernels/quant.
func (b *Backend) quantMatMuls(x []float32, rows, in int, ps ...quant.Product) {
	if err := b.q.MatMuls(x, rows, in, ps...); err != nil {
		panic(fmt.Sprintf("cpu: MatMul: %v", err)) // Upload and same checked the shapes
	}
	runtime.KeepAlive(b) // its cleanup releases the packed copies
}

// pack returns m packed for kernels/quant's packed Q8_0 kernels
// (quant.PackQ8_0; nil where they do not run), in huge pages (mmap.Huge)
// as model.Load puts the file's weights: decoding reads the packed matrix
// whole every token, and reads huge pages faster (BENCHMARKS.md, "Weights
// in huge pages"). Where no such memory can be had, it packs onto the
// heap.
func (b *Backend) pack(m *weight) []byte {
	n := quant.PackedQ8_0Size(m.rows, m.cols)
	if n == 0 {
		return nil
	}
	if dst := b.packs.take(n, b.weights); dst != nil {
		return quant.PackQ8_0Into(dst, m.t.Data, m.rows, m.cols)
	}
	return quant.PackQ8_0(m.t.Data, m.rows, m.cols)
}

// AddBias adds bias (one row as wide as x) to every row of x.
func (b *Backend) AddBias(x kernels.Buf, bias kernels.Weight) {
	s, w := &b.bufs[x], &b.weights[bias]
	same("AddBias", s.cols, w.cols)
	for t := range b.tokens {
		Add(s.f[t*s.cols:(t+1)*s.cols], w.f)
	}
}

// RoPE rotates every row of x, heads heads wide, in place for its token's
// position, pairing elements as layout says and dividing pair i's
// frequency by factors' element i (one row, half a head wide) unless
// factors is kernels.NoWeight.
func (b *Backend) RoPE(x kernels.Buf, heads int, theta float32, layout kernels.RopeLayout, factors kernels.Weight) {
	s := &b.bufs[x]
	hd := s.cols / heads
	same("RoPE", s.cols, heads*hd)
	var f []float32
	if factors != kernels.NoWeight {
		w := &b.weights[factors]
		same("RoPE factors", w.rows*w.cols, hd/2)
		f = w.f
	}
	cs := b.ropeAngles(hd, theta, f)
	for t := range b.tokens {
		ropeRotate(s.f[t*s.cols:(t+1)*s.cols], cs[t*hd:(t+1)*hd], heads, hd, layout)
	}
}

// ropeTable is the cosines and sines of the RoPE angles of a step's
// tokens for one head dimension, theta and factors: every layer rotates
// q and k by the same angles, so a step computes them once instead of
// twice a layer (the trigonometry was 5% of a prefill).
type ropeTable struct {
	ok      bool // for the current step; Begin clears it
	hd      int
	theta   float32
	factors []float32 // the weight's values, compared by identity
	cs      []float32 // per token, ropeAngles' hd floats
}

// ropeAngles returns the step's ropeTable for hd, theta and factors,
// computing it unless it is the one already made.
func (b *Backend) ropeAngles(hd int, theta float32, factors []float32) []float32 {
	r := &b.rope
	same := len(factors) == len(r.factors) && (len(factors) == 0 || &factors[0] == &r.factors[0])
	if r.ok && r.hd == hd && r.theta == theta && same {
		return r.cs
	}
	r.ok, r.hd, r.theta, r.factors = true, hd, theta, factors
	r.cs = grow(r.cs, b.tokens*hd)
	t := 0
	for _, row := range b.rows {
		for i := range row.Tokens {
			ropeAngles(r.cs[t*hd:(t+1)*hd], row.Start+i, hd, theta, factors)
			t++
		}
	}
	return r.cs
}

// PutKV stores every token row of k and v in layer at its position's
// slot of its row's block table.
func (b *Backend) PutKV(layer int, k, v kernels.Buf) {
	kb, vb := &b.bufs[k], &b.bufs[v]
	n, bs := kb.cols, b.kv.cfg.BlockSize
	t := 0
	for _, r := range b.rows {
		for i := range r.Tokens {
			pos := r.Start + i
			b.kv.Put(layer, r.Blocks[pos/bs], pos%bs, kb.f[t*n:(t+1)*n], vb.f[t*n:(t+1)*n])
			t++
		}
	}
}

// Attention sets dst to causal attention of the query rows q (heads
// heads) over layer's K/V of each row's prefix and its own tokens, which
// PutKV has stored (see KVCache.Attention).
func (b *Backend) Attention(dst, q kernels.Buf, layer, heads int) {
	b.kv.Attention(b.w, layer, b.bufs[q].f, b.bufs[dst].f, b.attn, heads, &b.scratch)
}

// SwiGLU sets dst = silu(gate)·up element-wise; dst may be gate.
func (b *Backend) SwiGLU(dst, gate, up kernels.Buf) {
	SwiGLU(b.bufs[dst].f, b.bufs[gate].f, b.bufs[up].f)
}

// Add sets dst += x, the residual connection.
func (b *Backend) Add(dst, x kernels.Buf) {
	Add(b.bufs[dst].f, b.bufs[x].f)
}

// Narrow keeps, in each of bufs, only the token rows that want logits
// (the last LogitRows of each row), packed in order, and shortens every
// buffer to that many rows, so the ops after it (not Attention, whose
// sequences it leaves as they were) cover just those rows.
func (b *Backend) Narrow(bufs ...kernels.Buf) {
	n, t := 0, 0
	for i := range b.rows {
		t += len(b.rows[i].Tokens)
		k := b.rows[i].LogitRows()
		if k == 0 {
			continue
		}
		if n < t-k { // else the rows are in place, as in a step of decodes
			for _, h := range bufs {
				f, c := b.bufs[h].f, b.bufs[h].cols
				copy(f[n*c:(n+k)*c], f[(t-k)*c:t*c]) // rows move only down
			}
		}
		n += k
	}
	b.tokens, b.narrowed = n, true
	for i := range b.bufs {
		b.bufs[i].f = b.bufs[i].f[:n*b.bufs[i].cols]
	}
}

// Logits applies the final RMSNorm (weight norm) and the classifier to
// the token rows of the step that want logits (the last LogitRows of each
// row; after Narrow, to each row left) and returns classifier.rows logits
// for each, in order. The slice is reused by the next call. The CPU
// backend has no device faults to report, so the error is always nil.
func (b *Backend) Logits(x kernels.Buf, norm, classifier kernels.Weight, eps float32) ([]float32, error) {
	s, w, c := &b.bufs[x], &b.weights[norm], &b.weights[classifier]
	d := s.cols
	same("Logits", d, w.cols)
	same("Logits", d, c.cols)
	n := 0
	for i := range b.rows {
		n += b.rows[i].LogitRows()
	}
	b.normed = grow(b.normed, n*d)
	n, t := 0, 0
	for i := range b.rows {
		t += len(b.rows[i].Tokens)
		for j := b.rows[i].LogitRows(); j > 0; j-- {
			row := t - j
			if b.narrowed {
				row = n
			}
			RMSNorm(b.normed[n*d:(n+1)*d], s.f[row*d:(row+1)*d], w.f, eps)
			n++
		}
	}
	b.logits = grow(b.logits, n*c.rows)
	b.matMul(b.logits, b.normed, c, n)
	return b.logits, nil
}

// same panics unless widths a and b agree: an op given buffers and
// weights whose shapes do not fit is a broken caller invariant.
func same(op string, a, b int) {
	if a != b {
		panic(fmt.Sprintf("cpu: %s on widths %d and %d", op, a, b))
	}
}
