package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/prefixd/prefixd/batch"
	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
	"github.com/prefixd/prefixd/sample"
)

// Backend runs a forward pass's operations on a Device: it implements
// model.Backend (structurally; this package does not import model). Ops
// between Begin and Logits are queued and run in one Device.Do when Logits
// is called, which reports the step's first device error. A Backend is not
// safe for concurrent use; Close frees everything it allocated.
type Backend struct {
	dev     Device
	dt      src.DType
	weights []weight
	bufs    []buffer
	kv      KVPool
	lay     launch.KVLayout

	// The current step, from Begin.
	rows     []batch.Row
	tokens   int  // token rows, or after Narrow the rows left
	nLogits  int  // token rows that want logits (LogitRows of each row)
	narrowed bool // Narrow has run this step
	sb       launch.StepBuilder
	host     []byte // tokens | logit row indices | the StepBuilder's arrays
	st       launch.Step
	tok      launch.Ptr // int32 [tokens]
	idx      launch.Ptr // int32 [nLogits]
	ops      []op       // the step's ops, reused from step to step
	rowsCap  int        // token rows every buffer holds
	err      error      // the first error found while queueing the step

	// Device buffers grown to the largest step seen; lout holds the
	// logits, then one int32 argmax per row, then one int32 token per
	// draw; draws the draws' packed parameters; counts attention's split
	// counts, zero between launches.
	stepBuf, part, counts, normed, normedE, lout, draws area
	spares                                              []area // Narrow's, one per buffer it narrows
	logits                                              []float32
	ids                                                 []int32
	pinned                                              []byte // host memory from Mem.HostAlloc: argmax ids, drawn tokens, then logits
	rope                                                ropeTable

	// The step's draws (LogitsSample): packed for sample_rows, as bytes
	// to upload, and whether each logits row comes back as an id.
	sampler   launch.SampleBuilder
	drawBytes []byte
	asID      []bool

	// What the step's one hand-over (runStep) needs besides the ops: set
	// by LogitsSample, and runStep itself as a func value made once, so
	// that a step allocates nothing on the host.
	fin     finish
	runs    [][2]int // the runs of rows whose logits come back whole
	runStep func(Mem) error

	graphs graphs // the steps' ops replayed from CUDA graphs
}

// finish is the end of a step, which runStep runs after its ops: the
// final RMSNorm and the classifier over the rows that want logits.
type finish struct {
	x         launch.Ptr // the rows, or with narrowed just those wanted
	norm, cls weight
	rows, dim int
	eps       float32
	narrowed  bool
	argmax    bool // some row wants its argmax
	vocab     int
	draws     int    // rows drawn on the device (b.sampler's)
	asID      []bool // rows that come back as an id: greedy or drawn
}

// opcode says which kernel an op launches.
type opcode uint8

const (
	opWrite     opcode = iota // upload the step's host arrays (Begin)
	opEmbed                   // launch.Embed
	opRMSNorm                 // launch.RMSNorm
	opHeadNorm                // launch.RMSNormF32, in place
	opMatMul                  // Mem.MatMulT
	opAddBias                 // launch.AddBias
	opRoPE                    // launch.RoPE
	opRoPEPutKV               // launch.RoPEAppendKV
	opSwiGLU                  // launch.SwiGLU
	opPutKV                   // launch.AppendKV
	opAttention               // launch.Attention
	opAdd                     // launch.Add
	opGather                  // launch.GatherRows (Narrow)
)

// op is one queued operation: its kernel and the operands the op's
// method read when it was queued, which runStep hands to the kernel on
// the device's thread. Each code uses the fields its launch takes; the
// step's layout, block tables and positions are the Backend's (b.lay,
// b.st), fixed from Begin to Logits.
type op struct {
	code       opcode
	out, x, y  launch.Ptr // output and inputs
	w          launch.Ptr // weight (or RoPE's factors, or the K/V pool)
	rows, cols int        // token rows (Add: elements) and values a row
	ld         int        // row stride where it is not cols (RoPE, SwiGLU); MatMulT's output columns
	heads, hd  int
	layer      int
	f          float32 // eps, theta or MatMulT's beta
	layout     launch.RoPELayout
	attn       launch.Attn
	ropeKV     launch.RoPEKV
}

// weight is an uploaded tensor: rows×cols of dt at p, and a vector's
// values on the host too (RoPE's frequency factors feed RoPETable).
type weight struct {
	p          launch.Ptr
	rows, cols int
	dt         src.DType
	host       []float32
}

// ropeTable is the uploaded launch.RoPETable RoPEPutKV reads: rows
// positions for head dimension hd, theta and factors (a weight handle,
// kernels.NoWeight for none).
type ropeTable struct {
	a       area
	rows    int
	hd      int
	theta   float32
	factors kernels.Weight
}

// buffer is an activation: one row of cols values per token row, as
// float32 at f and, on a device whose element type is narrower, in that
// type at e, where matrix products read it (e == f on an f32 device).
// elem says which of the two the last op wrote.
type buffer struct {
	cols    int
	f, e    area
	elem    bool
	written bool
}

// area is a device allocation that grows.
type area struct {
	p     launch.Ptr
	bytes int
}

// NewBackend returns a Backend on dev; the caller closes both (the
// Backend first).
func NewBackend(dev Device) *Backend {
	// Entry 0 stands for kernels.NoWeight, which Upload never issues.
	b := &Backend{dev: dev, dt: dev.DType(), weights: make([]weight, 1)}
	b.runStep = b.step
	return b
}

// Upload copies t to the device: a matrix (more than one row) in the
// device's element type, a vector in float32. A tensor of any weight type
// is read as float32 first (F16 and BF16 exactly, a quantized type by
// dequantizing it), so a quantized model runs on its dequantized weights
// rounded to nearest even into the device's type. It returns an error for
// a tensor Check refuses or a device failure.
func (b *Backend) Upload(t kernels.Tensor) (kernels.Weight, error) {
	f, err := t.Float32s()
	if err != nil {
		return 0, fmt.Errorf("gpu: upload: %w", err)
	}
	if len(f) == 0 {
		return 0, fmt.Errorf("gpu: upload of an empty %d×%d tensor", t.Rows, t.Cols)
	}
	w := weight{rows: t.Rows, cols: t.Cols, dt: b.dt}
	if t.Rows == 1 {
		w.dt, w.host = src.F32, f
	}
	raw := make([]byte, len(f)*w.dt.Size())
	launch.Encode(w.dt, raw, f)
	err = b.dev.Do(func(m Mem) (err error) {
		if w.p, err = m.Alloc(len(raw)); err != nil {
			return err
		}
		if err := m.Write(w.p, raw); err != nil {
			return errors.Join(err, m.Free(w.p))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("gpu: upload of a %d×%d tensor: %w", t.Rows, t.Cols, err)
	}
	b.weights = append(b.weights, w)
	return kernels.Weight(len(b.weights) - 1), nil
}

// Buffer declares an activation buffer of cols values per token row; its
// memory is allocated by the first Begin that needs it.
func (b *Backend) Buffer(cols int) kernels.Buf {
	b.bufs = append(b.bufs, buffer{cols: cols})
	b.rowsCap = 0 // the next Begin sizes the new buffer
	return kernels.Buf(len(b.bufs) - 1)
}

// NewKV allocates the K/V pool on the device, replacing (and freeing) any
// earlier one. The pool's element type is the device's (Device.DType), so
// a config asking for another (cfg.Type other than the zero value, the
// CPU's f16 K/V cache) is refused.
func (b *Backend) NewKV(cfg kernels.KVConfig) (blockstore.Storage, error) {
	if cfg.Type != kernels.F32 {
		return nil, fmt.Errorf("gpu: a %v K/V cache is for the CPU backend; on the GPU the K/V pool takes the device's element type", cfg.Type)
	}
	lay := launch.KVLayout{Layers: cfg.Layers, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, BlockSize: cfg.BlockSize, NumBlocks: cfg.NumBlocks}
	kv, err := b.dev.NewKV(lay)
	if err != nil {
		return nil, err
	}
	if b.kv != nil {
		if err := b.kv.Close(); err != nil {
			return nil, errors.Join(err, kv.Close())
		}
	}
	b.kv, b.lay = kv, lay
	return kv, nil
}

// Begin starts a step over rows, which the caller has validated against
// the model and the K/V pool: it grows the device buffers if this is the
// largest step yet, and queues the upload of the rows' tokens, positions
// and block tables.
func (b *Backend) Begin(rows []batch.Row) {
	b.rows, b.ops, b.err = rows, b.ops[:0], nil
	b.tokens, b.nLogits, b.narrowed = 0, 0, false
	b.sb.Reset()
	for _, r := range rows {
		b.tokens += len(r.Tokens)
		b.nLogits += r.LogitRows()
		if err := b.sb.Add(r.Blocks, b.lay.BlockSize, r.Start, len(r.Tokens)); err != nil {
			b.fail(err)
		}
	}
	b.host = b.host[:0]
	for _, r := range rows {
		for _, t := range r.Tokens {
			b.host = binary.LittleEndian.AppendUint32(b.host, uint32(t))
		}
	}
	t := 0
	for _, r := range rows {
		t += len(r.Tokens)
		for j := r.LogitRows(); j > 0; j-- {
			b.host = binary.LittleEndian.AppendUint32(b.host, uint32(t-j))
		}
	}
	for _, v := range b.sb.Packed() {
		b.host = binary.LittleEndian.AppendUint32(b.host, uint32(v))
	}
	if len(b.host) > b.stepBuf.bytes || b.tokens > b.rowsCap {
		// The largest step yet (rare after warm-up): one more hand-over.
		b.fail(b.dev.Do(func(m Mem) error {
			// Twice the need: the block tables grow with the contexts,
			// and a step's buffers that stay put keep its launches the
			// same as the step before's (graphs).
			errs := []error{b.stepBuf.grow(m, 2*len(b.host))}
			for i := range b.bufs {
				errs = append(errs, b.bufs[i].grow(m, b.tokens, b.dt))
			}
			return errors.Join(errs...)
		}))
		b.rowsCap = max(b.rowsCap, b.tokens)
	}
	b.tok = b.stepBuf.p
	b.idx = b.tok + launch.Ptr(4*b.tokens)
	b.st = b.sb.Step(b.idx + launch.Ptr(4*b.nLogits))
	b.queue(op{code: opWrite, out: b.stepBuf.p})
}

// grow makes a hold at least n bytes (its contents are lost when it
// moves).
func (a *area) grow(m Mem, n int) error {
	if n <= a.bytes {
		return nil
	}
	if err := a.free(m); err != nil {
		return err
	}
	p, err := m.Alloc(n)
	if err != nil {
		return err
	}
	a.p, a.bytes = p, n
	return nil
}

func (a *area) free(m Mem) error {
	if a.bytes == 0 {
		return nil
	}
	a.bytes = 0
	return m.Free(a.p)
}

// grow sizes the buffer for rows token rows.
func (u *buffer) grow(m Mem, rows int, dt src.DType) error {
	err := u.f.grow(m, 4*rows*u.cols)
	if dt == src.F32 {
		u.e = u.f
		return err
	}
	return errors.Join(err, u.e.grow(m, rows*u.cols*dt.Size()))
}

func (u *buffer) free(m Mem) error {
	if u.e.p == u.f.p {
		u.e = area{}
	}
	return errors.Join(u.f.free(m), u.e.free(m))
}

// fail keeps the step's first error for Logits.
func (b *Backend) fail(err error) {
	if err != nil && b.err == nil {
		b.err = err
	}
}

// queue adds op to the step, unless Narrow has left the step no rows (no
// row wants logits): the kernels refuse empty shapes, and there is
// nothing left to compute.
func (b *Backend) queue(o op) {
	if b.narrowed && b.tokens == 0 {
		return
	}
	b.ops = append(b.ops, o)
}

// run launches o.
func (b *Backend) run(m Mem, o *op) error {
	switch o.code {
	case opWrite:
		return m.Write(o.out, b.host)
	case opEmbed:
		return launch.Embed(m, o.out, o.w, o.x, o.rows, o.cols)
	case opRMSNorm:
		return launch.RMSNorm(m, o.out, o.x, o.w, o.rows, o.cols, o.f)
	case opHeadNorm:
		return launch.RMSNormF32(m, o.out, o.x, o.w, o.rows, o.cols, o.f)
	case opMatMul:
		return m.MatMulT(o.out, o.x, o.w, o.rows, o.ld, o.cols, o.f)
	case opAddBias:
		return launch.AddBias(m, o.x, o.w, o.rows, o.cols)
	case opRoPE:
		return launch.RoPE(m, o.layout, o.x, o.ld, o.y, o.rows, o.heads, o.hd, o.f, o.w)
	case opRoPEPutKV:
		return launch.RoPEAppendKV(m, o.w, b.lay, b.st, o.ropeKV)
	case opSwiGLU:
		return launch.SwiGLU(m, o.out, o.x, o.y, o.ld, o.rows, o.cols)
	case opPutKV:
		return launch.AppendKV(m, o.w, b.lay, o.layer, o.x, o.y, b.lay.KVDim(), b.st)
	case opAttention:
		return launch.Attention(m, o.w, b.lay, b.st, o.attn)
	case opAdd:
		return launch.Add(m, o.out, o.x, o.rows)
	case opGather:
		return launch.GatherRows(m, o.out, o.x, o.y, o.rows, o.cols)
	}
	return fmt.Errorf("gpu: op code %d", o.code)
}

// in returns buffer h for an op that reads it: in float32 unless elem,
// when it must have been written in the element type (by RMSNorm,
// Attention or SwiGLU, the ops that feed a matrix product).
func (b *Backend) in(op string, h kernels.Buf, elem bool) launch.Ptr {
	u := &b.bufs[h]
	if b.dt != src.F32 && u.written && u.elem != elem {
		panic(fmt.Sprintf("gpu: %s reads buffer %d in the form (float32 or %v) its last writer did not write", op, h, b.dt))
	}
	if elem {
		return u.e.p
	}
	return u.f.p
}

// out returns buffer h for an op that writes it, in the element type if
// elem, else float32.
func (b *Backend) out(h kernels.Buf, elem bool) launch.Ptr {
	u := &b.bufs[h]
	u.elem, u.written = elem, true
	if elem {
		return u.e.p
	}
	return u.f.p
}

// Embed sets each token row of dst to its token's row of table.
func (b *Backend) Embed(dst kernels.Buf, table kernels.Weight) {
	w := b.matrix("Embed", table)
	same("Embed", b.bufs[dst].cols, w.cols)
	b.queue(op{code: opEmbed, out: b.out(dst, false), w: w.p, x: b.tok, rows: b.tokens, cols: w.cols})
}

// RMSNorm sets each row of dst, in the element type (a matrix product's
// input), to RMSNorm(row of x)·weight.
func (b *Backend) RMSNorm(dst, x kernels.Buf, weight kernels.Weight, eps float32) {
	w := b.vector("RMSNorm", weight)
	same("RMSNorm", b.bufs[dst].cols, b.bufs[x].cols)
	same("RMSNorm", b.bufs[x].cols, w.cols)
	xp := b.in("RMSNorm", x, false)
	b.queue(op{code: opRMSNorm, out: b.out(dst, true), x: xp, w: w.p, rows: b.tokens, cols: w.cols, f: eps})
}

// HeadNorm applies RMSNorm with weight to every head of every row of x,
// in place, in float32.
func (b *Backend) HeadNorm(x kernels.Buf, heads int, weight kernels.Weight, eps float32) {
	w := b.vector("HeadNorm", weight)
	same("HeadNorm", b.bufs[x].cols, heads*w.cols)
	xp := b.in("HeadNorm", x, false)
	b.out(x, false)
	b.queue(op{code: opHeadNorm, out: xp, x: xp, w: w.p, rows: b.tokens * heads, cols: w.cols, f: eps})
}

// MatMul sets dst (float32) = x·Wᵀ, x having been written in the element
// type.
func (b *Backend) MatMul(dst, x kernels.Buf, weight kernels.Weight) {
	w := b.matrix("MatMul", weight)
	same("MatMul", b.bufs[dst].cols, w.rows)
	same("MatMul", b.bufs[x].cols, w.cols)
	xp := b.in("MatMul", x, true)
	b.queue(op{code: opMatMul, out: b.out(dst, false), x: xp, w: w.p, rows: b.tokens, ld: w.rows, cols: w.cols})
}

// MatMulAdd sets dst (float32) += x·Wᵀ in one product (GemmEx's beta =
// 1), x having been written in the element type: the residual
// connection without a separate add. It implements model.FusedBackend.
func (b *Backend) MatMulAdd(dst, x kernels.Buf, weight kernels.Weight) {
	w := b.matrix("MatMulAdd", weight)
	same("MatMulAdd", b.bufs[dst].cols, w.rows)
	same("MatMulAdd", b.bufs[x].cols, w.cols)
	xp, acc := b.in("MatMulAdd", x, true), b.in("MatMulAdd", dst, false)
	b.out(dst, false)
	b.queue(op{code: opMatMul, out: acc, x: xp, w: w.p, rows: b.tokens, ld: w.rows, cols: w.cols, f: 1})
}

// AddBias adds bias (one row as wide as x) to every row of x.
func (b *Backend) AddBias(x kernels.Buf, bias kernels.Weight) {
	w := b.vector("AddBias", bias)
	same("AddBias", b.bufs[x].cols, w.cols)
	b.queue(op{code: opAddBias, x: b.in("AddBias", x, false), w: w.p, rows: b.tokens, cols: w.cols})
}

// RoPE rotates every row of x (heads heads) in place for its token's
// position, dividing pair i's frequency by factors' element i unless
// factors is kernels.NoWeight.
func (b *Backend) RoPE(x kernels.Buf, heads int, theta float32, layout kernels.RopeLayout, factors kernels.Weight) {
	u := &b.bufs[x]
	hd := u.cols / heads
	same("RoPE", u.cols, heads*hd)
	var fp launch.Ptr
	if factors != kernels.NoWeight {
		w := b.vector("RoPE factors", factors)
		same("RoPE factors", w.cols, hd/2)
		fp = w.p
	}
	lay := launch.Adjacent
	if layout == kernels.RopeHalves {
		lay = launch.Halves
	}
	b.queue(op{code: opRoPE, layout: lay, x: b.in("RoPE", x, false), ld: u.cols, y: b.st.RowPos, rows: b.tokens,
		heads: heads, hd: hd, f: theta, w: fp})
}

// RoPEPutKV reads each row of qkv as [q | k | v]: it writes the
// queries (heads heads) rotated by their rows' positions into q and
// stores the keys, rotated alike, and the values in layer of the K/V
// pool, each query and key head first normalised by qNorm and kNorm
// unless they are kernels.NoWeight, in one launch (launch.RoPEAppendKV)
// whose angles come from a table uploaded once and grown with the longest
// position seen: it implements model.FusedBackend.
func (b *Backend) RoPEPutKV(layer int, q, qkv kernels.Buf, heads int, theta float32, layout kernels.RopeLayout, factors, qNorm, kNorm kernels.Weight, eps float32) {
	hd, kd := b.lay.HeadDim, b.lay.KVDim()
	qd, ld := heads*hd, b.bufs[qkv].cols
	same("RoPEPutKV", b.bufs[q].cols, qd)
	same("RoPEPutKV", ld, qd+2*kd)
	var f []float32
	if factors != kernels.NoWeight {
		w := b.vector("RoPE factors", factors)
		same("RoPE factors", w.cols, hd/2)
		f = w.host
	}
	t := &b.rope
	if need := b.st.MaxPos + 1; need > t.rows || t.hd != hd || t.theta != theta || t.factors != factors {
		rows := max(need, 2*t.rows, 256)
		if t.hd != hd || t.theta != theta || t.factors != factors {
			rows = max(need, 256)
		}
		raw := make([]byte, 4*rows*hd)
		launch.Encode(src.F32, raw, launch.RoPETable(rows, hd, theta, f))
		// Between steps: no queued op reads the table yet.
		b.fail(b.dev.Do(func(m Mem) error {
			if err := t.a.grow(m, len(raw)); err != nil {
				return err
			}
			return m.Write(t.a.p, raw)
		}))
		t.rows, t.hd, t.theta, t.factors = rows, hd, theta, factors
	}
	lay := launch.Adjacent
	if layout == kernels.RopeHalves {
		lay = launch.Halves
	}
	in := b.in("RoPEPutKV", qkv, false)
	a := launch.RoPEKV{QOut: b.out(q, false), Q: in, LDQ: ld, K: in + launch.Ptr(4*qd), V: in + launch.Ptr(4*(qd+kd)),
		LDKV: ld, NHeads: heads, Layer: layer, Layout: lay, Table: t.a.p, Eps: eps}
	if qNorm != kernels.NoWeight || kNorm != kernels.NoWeight {
		qn, kn := b.vector("RoPEPutKV's q norm", qNorm), b.vector("RoPEPutKV's k norm", kNorm)
		same("RoPEPutKV's q norm", qn.cols, hd)
		same("RoPEPutKV's k norm", kn.cols, hd)
		a.QNorm, a.KNorm = qn.p, kn.p
	}
	b.queue(op{code: opRoPEPutKV, w: b.kv.Pool(), ropeKV: a})
}

// SwiGLUFused sets dst, in the element type, to silu(gate)·up, each row
// of gu (float32) being [gate | up]: the fused gate and up product's
// output. It implements model.FusedBackend.
func (b *Backend) SwiGLUFused(dst, gu kernels.Buf) {
	hidden := b.bufs[dst].cols
	same("SwiGLUFused", b.bufs[gu].cols, 2*hidden)
	g := b.in("SwiGLUFused", gu, false)
	b.queue(op{code: opSwiGLU, out: b.out(dst, true), x: g, y: g + launch.Ptr(4*hidden), ld: 2 * hidden, rows: b.tokens, cols: hidden})
}

// PutKV stores every token row of k and v in layer of the K/V pool.
func (b *Backend) PutKV(layer int, k, v kernels.Buf) {
	same("PutKV", b.bufs[k].cols, b.lay.KVDim())
	same("PutKV", b.bufs[v].cols, b.lay.KVDim())
	b.queue(op{code: opPutKV, w: b.kv.Pool(), layer: layer, x: b.in("PutKV", k, false), y: b.in("PutKV", v, false)})
}

// Attention sets dst, in the element type, to causal attention of the
// query rows q over layer's K/V; long contexts are split over the
// sequence (FlashDecoding) when the rows alone would not fill the device.
func (b *Backend) Attention(dst, q kernels.Buf, layer, heads int) {
	same("Attention", b.bufs[q].cols, heads*b.lay.HeadDim)
	same("Attention", b.bufs[dst].cols, heads*b.lay.HeadDim)
	split := launch.ChooseSplit(b.st, b.lay.KVHeads, b.dev.SMs())
	if n := launch.AttnWorkspace(b.st, b.lay, heads, split); 4*n > b.part.bytes {
		b.fail(b.dev.Do(func(m Mem) error { return b.part.grow(m, 8*n) })) // twice the need, as the step buffer
	}
	if n := launch.AttnCounts(b.st, b.lay, split); 4*n > b.counts.bytes {
		// Between steps, so no launch is using the counts.
		b.fail(b.dev.Do(func(m Mem) error {
			if err := b.counts.grow(m, 8*n); err != nil {
				return err
			}
			return m.Write(b.counts.p, make([]byte, b.counts.bytes))
		}))
	}
	a := launch.Attn{Q: b.in("Attention", q, false), LDQ: b.bufs[q].cols, Out: b.out(dst, true), NHeads: heads,
		Layer: layer, Split: split, Partial: b.part.p, Counts: b.counts.p}
	b.queue(op{code: opAttention, w: b.kv.Pool(), attn: a})
}

// SwiGLU sets dst, in the element type, to silu(gate)·up; dst may be
// gate.
func (b *Backend) SwiGLU(dst, gate, up kernels.Buf) {
	hidden := b.bufs[gate].cols
	same("SwiGLU", b.bufs[up].cols, hidden)
	same("SwiGLU", b.bufs[dst].cols, hidden)
	g, u := b.in("SwiGLU", gate, false), b.in("SwiGLU", up, false)
	b.queue(op{code: opSwiGLU, out: b.out(dst, true), x: g, y: u, ld: hidden, rows: b.tokens, cols: hidden})
}

// Add sets dst += x, both float32.
func (b *Backend) Add(dst, x kernels.Buf) {
	same("Add", b.bufs[dst].cols, b.bufs[x].cols)
	d, s := b.in("Add", dst, false), b.in("Add", x, false)
	b.queue(op{code: opAdd, out: d, x: s, rows: b.tokens * b.bufs[x].cols})
}

// Narrow queues, for each of bufs (distinct), the gather of the token
// rows that want logits (the last LogitRows of each row: the rows Logits would take,
// by the step's index array) into a spare area, which then becomes the
// buffer's, its old area the spare: a gather in place would race between
// the rows' threads. It copies only the form the buffer's last writer
// wrote, as 32-bit words (every width the model declares is even), and
// the ops after it cover just those rows. A step whose rows are all one
// token that wants logits (decodes) has nothing to move.
func (b *Backend) Narrow(bufs ...kernels.Buf) {
	b.narrowed = true
	if b.nLogits == b.tokens {
		return
	}
	for len(b.spares) < len(bufs) {
		b.spares = append(b.spares, area{})
	}
	n, idx := b.nLogits, b.idx
	for i, h := range bufs {
		u, spare := &b.bufs[h], &b.spares[i]
		a, size := &u.f, 4
		if u.elem && b.dt != src.F32 {
			a, size = &u.e, b.dt.Size()
		}
		if spare.bytes < a.bytes {
			// Before the swap below, no queued op reads the spare.
			b.fail(b.dev.Do(func(m Mem) error { return spare.grow(m, a.bytes) }))
		}
		if n > 0 {
			b.queue(op{code: opGather, out: spare.p, x: a.p, y: idx, rows: n, cols: u.cols * size / 4})
		}
		*a, *spare = *spare, *a
		if b.dt == src.F32 {
			u.e = u.f // one area on an f32 device
		}
	}
	b.tokens = n
}

// Logits queues the final RMSNorm and the classifier for the token rows
// that want logits (the last LogitRows of each row; after Narrow, each row left), runs
// the step's ops on the device in one Do and copies those logits back. It
// returns the step's first error; the slice is reused by the next call.
func (b *Backend) Logits(x kernels.Buf, norm, classifier kernels.Weight, eps float32) ([]float32, error) {
	logits, _, err := b.LogitsSample(x, norm, classifier, eps, nil, nil)
	return logits, err
}

// LogitsGreedy is Logits, except that for each logits row i with
// greedy[i] set it returns the row's argmax (sample.Argmax's rule; -2 if
// the row holds NaN or an infinity) in ids[i], computed on the device, and copies back 4 bytes for the row
// instead of its logits, which it leaves unspecified: it implements
// model.GreedyBackend. greedy is nil or has an entry per token row that
// wants logits. Both slices are reused by the next call.
func (b *Backend) LogitsGreedy(x kernels.Buf, norm, classifier kernels.Weight, eps float32, greedy []bool) ([]float32, []int32, error) {
	return b.LogitsSample(x, norm, classifier, eps, greedy, nil)
}

// LogitsSample is LogitsGreedy, except that each logits row i with
// draws[i] set (and greedy[i] not) is drawn on the device by sample_rows
// (launch.Sample) from the draw's parameters, bias and penalty state and
// uniform number: ids[i] is its token, or -2 where the row after its
// biases and penalties is not finite, and 4 bytes come back instead of
// the row's logits, which it leaves unspecified. It implements
// model.SamplingBackend. greedy and draws are nil or have an entry per
// token row that wants logits. The draws' parameters go up in one copy
// before the step's ops; the results come back asynchronously into
// page-locked host memory, the logits in one copy per run of rows that
// come back whole, and the step waits for them once. Both slices are
// reused by the next call.
func (b *Backend) LogitsSample(x kernels.Buf, norm, classifier kernels.Weight, eps float32, greedy []bool, draws []*sample.Draw) ([]float32, []int32, error) {
	nw, cw := b.vector("Logits", norm), b.matrix("Logits", classifier)
	d := b.bufs[x].cols
	same("Logits", d, nw.cols)
	same("Logits", d, cw.cols)
	n, vocab := b.nLogits, cw.rows
	if greedy != nil {
		same("LogitsSample's greedy flags", len(greedy), n)
	}
	if draws != nil {
		same("LogitsSample's draws", len(draws), n)
	}
	b.sampler.Reset()
	b.asID = slices.Grow(b.asID[:0], n)[:n]
	for i := range n {
		g := greedy != nil && greedy[i]
		b.asID[i] = g
		if g || draws == nil || draws[i] == nil {
			continue
		}
		b.asID[i] = true
		if err := b.sampler.Add(launch.SampleRow{Row: i, Draw: *draws[i]}, vocab); err != nil {
			b.fail(fmt.Errorf("gpu: logits row %d's draw: %w", i, err))
		}
	}
	b.drawBytes = b.drawBytes[:0]
	if b.sampler.Rows() > 0 {
		for _, v := range b.sampler.Packed() {
			b.drawBytes = binary.LittleEndian.AppendUint32(b.drawBytes, uint32(v))
		}
	}
	b.logits = grow(b.logits, n*vocab)
	b.ids = slices.Grow(b.ids[:0], n)[:n]
	b.fin = finish{x: b.in("Logits", x, false), norm: nw, cls: cw, rows: n, dim: d, eps: eps, narrowed: b.narrowed,
		argmax: slices.Contains(greedy, true), vocab: vocab, draws: b.sampler.Rows(), asID: b.asID}
	if err := b.err; err != nil {
		b.ops, b.err = b.ops[:0], nil
		return nil, nil, err
	}
	err := b.dev.Do(b.runStep)
	b.ops = b.ops[:0]
	if err != nil {
		return nil, nil, fmt.Errorf("gpu: step: %w", err)
	}
	drawn, logits := b.pinned[4*n:], b.pinned[4*(n+b.fin.draws):]
	for i := range n {
		switch {
		case b.fin.argmax && greedy[i]:
			b.ids[i] = notFinite(binary.LittleEndian.Uint32(b.pinned[4*i:]))
		case b.asID[i]:
			b.ids[i] = notFinite(binary.LittleEndian.Uint32(drawn))
			drawn = drawn[4:]
		default:
			b.ids[i] = 0
			launch.Decode(src.F32, b.logits[i*vocab:(i+1)*vocab], logits[4*i*vocab:][:4*vocab])
		}
	}
	return b.logits, b.ids, nil
}

// notFinite returns the id argmax or sample_rows wrote, -1 (the row held
// NaN or an infinity) becoming -2, as model.GreedyBackend and
// SamplingBackend say.
func notFinite(id uint32) int32 {
	if int32(id) == -1 {
		return -2
	}
	return int32(id)
}

// step runs on the device's thread: the step's ops, then b.fin's final
// norm and classifier, whose results it copies into b.pinned and waits
// for.
func (b *Backend) step(m Mem) error {
	f := &b.fin
	if f.draws > 0 && f.rows > 0 {
		// Before the ops: a copy from pageable memory waits for the
		// work queued before it.
		if err := errors.Join(b.draws.grow(m, len(b.drawBytes)), m.Write(b.draws.p, b.drawBytes)); err != nil {
			return err
		}
	}
	if err := b.runOps(m); err != nil {
		return err
	}
	n, d, vocab := f.rows, f.dim, f.vocab
	if n == 0 {
		return nil
	}
	idsAt := 4 * n * vocab // the argmax ids, then the drawn tokens, follow the logits in lout
	ids := 4 * (n + f.draws)
	err := errors.Join(b.normed.grow(m, 4*n*d), b.normedE.grow(m, n*d*b.dt.Size()), b.lout.grow(m, idsAt+ids),
		b.growPinned(m, ids+4*n*vocab))
	if err != nil {
		return err
	}
	normedE := b.normedE.p
	if b.dt == src.F32 {
		normedE = b.normed.p // rmsnorm reads each element before writing it
	}
	rows := f.x // after Narrow, x holds just the rows wanted
	if !f.narrowed {
		rows = b.normed.p
		if err := launch.GatherRows(m, rows, f.x, b.idx, n, d); err != nil {
			return err
		}
	}
	if err := errors.Join(launch.RMSNorm(m, normedE, rows, f.norm.p, n, d, f.eps),
		m.MatMulT(b.lout.p, normedE, f.cls.p, n, vocab, d, 0)); err != nil {
		return err
	}
	if f.argmax {
		// Before sample_rows, which rewrites its rows in place.
		ids := b.lout.p + launch.Ptr(idsAt)
		if err := errors.Join(launch.Argmax(m, ids, b.lout.p, n, vocab), m.ReadAsync(b.pinned[:4*n], ids)); err != nil {
			return err
		}
	}
	if f.draws > 0 {
		out := b.lout.p + launch.Ptr(idsAt+4*n)
		if err := errors.Join(launch.Sample(m, out, b.lout.p, b.draws.p, &b.sampler, vocab),
			m.ReadAsync(b.pinned[4*n:ids], out)); err != nil {
			return err
		}
	}
	b.runs = wholeRuns(b.runs[:0], f.asID, n)
	for _, r := range b.runs {
		at, size := 4*r[0]*vocab, 4*(r[1]-r[0])*vocab
		if err := m.ReadAsync(b.pinned[ids+at:][:size], b.lout.p+launch.Ptr(at)); err != nil {
			return err
		}
	}
	return m.Synchronize()
}

// wholeRuns appends to runs the runs [from, to) of rows, of n, that
// asID does not mark: the rows whose logits come back whole.
func wholeRuns(runs [][2]int, asID []bool, n int) [][2]int {
	for i := 0; i < n; {
		if asID[i] {
			i++
			continue
		}
		j := i + 1
		for j < n && !asID[j] {
			j++
		}
		runs = append(runs, [2]int{i, j})
		i = j
	}
	return runs
}

// growPinned makes the host buffer the step's results land in at least
// n bytes.
func (b *Backend) growPinned(m Mem, n int) error {
	if len(b.pinned) >= n {
		return nil
	}
	if b.pinned != nil {
		if err := m.HostFree(b.pinned); err != nil {
			return err
		}
		b.pinned = nil
	}
	p, err := m.HostAlloc(n)
	if err != nil {
		return err
	}
	b.pinned = p
	return nil
}

// Close frees every device allocation of the Backend (weights, buffers
// and the K/V pool) and its graphs. The Backend is unusable afterwards.
func (b *Backend) Close() error {
	errs := []error{b.dev.Do(func(m Mem) error {
		errs := []error{b.graphs.destroy()}
		for _, w := range b.weights[1:] {
			errs = append(errs, m.Free(w.p))
		}
		for i := range b.bufs {
			errs = append(errs, b.bufs[i].free(m))
		}
		for _, a := range []*area{&b.stepBuf, &b.part, &b.counts, &b.normed, &b.normedE, &b.lout, &b.draws, &b.rope.a} {
			errs = append(errs, a.free(m))
		}
		for i := range b.spares {
			errs = append(errs, b.spares[i].free(m))
		}
		if b.pinned != nil {
			errs = append(errs, m.HostFree(b.pinned))
			b.pinned = nil
		}
		return errors.Join(errs...)
	})}
	if b.kv != nil {
		errs = append(errs, b.kv.Close())
	}
	b.weights, b.bufs, b.kv, b.rowsCap = b.weights[:1], nil, nil, 0
	return errors.Join(errs...)
}

// matrix returns weight h, which a kernel reads in the element type.
func (b *Backend) matrix(op string, h kernels.Weight) weight {
	w := b.weights[h]
	if w.dt != b.dt || h == kernels.NoWeight {
		panic(fmt.Sprintf("gpu: %s on weight %d, a %d×%d vector, not a matrix", op, h, w.rows, w.cols))
	}
	return w
}

// vector returns weight h, a float32 row.
func (b *Backend) vector(op string, h kernels.Weight) weight {
	w := b.weights[h]
	if w.rows != 1 {
		panic(fmt.Sprintf("gpu: %s on weight %d, a %d×%d matrix, not a vector", op, h, w.rows, w.cols))
	}
	return w
}

func grow(f []float32, n int) []float32 {
	if cap(f) < n {
		return make([]float32, n)
	}
	return f[:n]
}

// same panics unless widths a and b agree: an op given buffers and
// weights whose shapes do not fit is a broken caller invariant.
func same(op string, a, b int) {
	if a != b {
		panic(fmt.Sprintf("gpu: %s on widths %d and %d", op, a, b))
	}
}
