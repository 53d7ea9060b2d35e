package cpu

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels"
)

// AttnSeq is one sequence's share of an attention call.
type AttnSeq struct {
	Blocks []blockstore.BlockID // the block table: physical blocks in logical order
	Start  int                  // position of the first query row
	Rows   int                  // query rows: 1 for decode, the chunk length for prefill
}

// attnRowChunk is the most query rows one work item takes. A long prefill
// chunk is split into items of this many rows so that the workers share it
// and per-worker buffers stay small (a few hundred KiB); each such item
// reads the prefix's K/V again, which costs little next to its compute.
const attnRowChunk = 128

// attnSpan is how many positions an item folds into its running softmax
// at once, gathered from as many blocks as they lie in: the per-pair work
// of the online softmax (the max, the rescaling, the exponentials) is paid
// once a span rather than once a block. Spans start at multiples of
// attnSpan, absolute positions as blocks are, so the positions a row's
// softmax folds together do not depend on how its prompt was chunked or
// batched (the kernels that fold them may: see attnGemmPairs).
const attnSpan = 64

// attnGemmPairs is the fewest pairs (query rows × heads of the group) of
// an item for which a span's scores and its weighted sum of V are one
// GEMM each, over the span's K and V (transposed) gathered into scratch,
// rather than a GEMM per run on the cache and a pass over V for each
// pair: a prefill chunk's 128 pairs share the gathering, a decode row's
// few pairs would not repay it.
const attnGemmPairs = 16

// attnDotRows is the most query rows of an item whose scores are one dot
// product per query head and position (a row's K read from L1 again for
// each row), not a GEMM whose per-score arithmetic depends on how many
// positions and rows it covers, and whose weighted sums of V are taken
// pair by pair: so a row of a decode step, of a speculative verify pass
// (1 + at most 16 drafts) or of a small batch gets the same bits however
// many rows share its item, and greedy output with speculation on is the
// output without it.
const attnDotRows = 17

// AttnScratch holds Attention's buffers, one set per worker, so Attention
// allocates nothing once the buffers have grown to the largest batch seen.
// The zero value is ready to use. It must not be shared by concurrent
// calls.
type AttnScratch struct {
	parts []attnState
	items []attnItem
	task  attnTask
}

// attnItem is one unit of Attention's work: up to attnRowChunk query rows
// of one sequence with one KV head and its group of query heads.
type attnItem struct {
	blocks       []blockstore.BlockID
	start, rows  int // position of the first row, row count
	row0, kvHead int // index of the first row in q and out
}

// cost estimates an item's work: score pairs, rows × positions seen.
func (it *attnItem) cost() int { return it.rows * (it.start + it.rows) }

// attnState is one worker's running softmax over one item. A pair is one
// query row with one query head of the KV head's group.
type attnState struct {
	q      []float32 // [pair][headDim], pre-scaled by 1/sqrt(headDim)
	acc    []float32 // [pair][headDim], Σ weight·V so far
	mx     []float32 // [pair], largest score so far
	sum    []float32 // [pair], Σ weight so far
	scores []float32 // [pair][n], one span's scores, then weights
	corr   []float32 // [pair], the span's rescaling of acc, for gemmPV
	pv     []float32 // [pair][headDim], the span's Σ weight·V, for gemmPV
	kb     []float32 // [position][headDim]: a gemmPV span's K, or an F16 run's, float32
	vb     []float32 // [position][headDim]: an F16 span's or run's V, float32
	vt     []float32 // [headDim][attnSpan]: the span's V, transposed
	runs   []attnRun // the span's runs
	nruns  []attnRun // the next span's runs
	group  int       // query heads per KV head
}

// attnTask is one Attention call. Its parts claim items one at a time from
// next rather than taking fixed ranges, because items differ in cost by
// orders of magnitude (a prefill chunk against a decode row).
type attnTask struct {
	c      *KVCache
	q, out []float32
	nHeads int
	items  []attnItem
	states []attnState
	kv     attnKV
	next   atomic.Int64
}

// Attention computes causal attention for a batch: q and out hold the
// sequences' query rows one after another, nHeads·HeadDim floats each. Row
// r of a sequence is at position Start+r and attends to positions
// 0..Start+r, whose K/V it reads through the sequence's block table (the
// caller has already Put them). Scores are scaled by 1/sqrt(HeadDim), and
// query head h uses KV head h/(nHeads/KVHeads).
//
// Work is split on w into items of one sequence (up to 128 of its rows)
// and one KV head, largest first. An item walks its context once, a span
// of 64 positions (a few blocks) at a time: the span's K and V serve every
// query row and every query head of the group while they are in L1, and a
// running (online) softmax means no buffer grows with the context. One
// call thus covers a prefill chunk over its cached prefix and a batch of
// decodes alike. An F16 cache's K and V are made float32 as they are read
// (by the loads of the AVX-512 GEMM and of the decode path's V sums, or
// into the worker's scratch), so the arithmetic is the F32 cache's, bit
// for bit on the same values.
//
// Attention panics if the shapes disagree (a broken caller invariant). It
// reads the cache while it runs, so nothing may Put or write blocks
// concurrently.
func (c *KVCache) Attention(w *Workers, layer int, q, out []float32, seqs []AttnSeq, nHeads int, scratch *AttnScratch) {
	kvh, hd, bs := c.cfg.KVHeads, c.cfg.HeadDim, c.cfg.BlockSize
	if nHeads <= 0 || nHeads%kvh != 0 {
		panic(fmt.Sprintf("cpu: Attention with %d query heads over %d KV heads", nHeads, kvh))
	}
	scratch.items = scratch.items[:0]
	rows := 0
	for i, s := range seqs {
		if s.Start < 0 || s.Rows < 0 || len(s.Blocks)*bs < s.Start+s.Rows {
			panic(fmt.Sprintf("cpu: Attention sequence %d: %d rows from %d with %d blocks of %d", i, s.Rows, s.Start, len(s.Blocks), bs))
		}
		for r := 0; r < s.Rows; r += attnRowChunk {
			for h := range kvh {
				scratch.items = append(scratch.items, attnItem{
					blocks: s.Blocks, start: s.Start + r, rows: min(attnRowChunk, s.Rows-r),
					row0: rows + r, kvHead: h,
				})
			}
		}
		rows += s.Rows
	}
	if len(q) < rows*nHeads*hd || len(out) < rows*nHeads*hd {
		panic(fmt.Sprintf("cpu: Attention over %d rows with len(q)=%d len(out)=%d", rows, len(q), len(out)))
	}
	slices.SortFunc(scratch.items, func(a, b attnItem) int { return b.cost() - a.cost() })
	if len(scratch.parts) < w.N() {
		scratch.parts = append(scratch.parts, make([]attnState, w.N()-len(scratch.parts))...)
	}
	maxPairs := min(rows, attnRowChunk) * nHeads / kvh
	for i := range scratch.parts {
		scratch.parts[i].grow(maxPairs, hd)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t := &scratch.task
	t.c, t.q, t.out, t.nHeads = c, q, out, nHeads
	t.items, t.states = scratch.items, scratch.parts
	t.kv = attnKV{stride: hd, block: bs * kvh * hd}
	if c.k16 != nil {
		t.kv.kh, t.kv.vh = c.k16[layer], c.v16[layer]
	} else {
		t.kv.kl, t.kv.vl = c.k[layer], c.v[layer]
	}
	t.next.Store(0)
	w.forLocked(min(w.N(), len(scratch.items)), t)
	// Do not keep the caller's slices alive.
	t.q, t.out, t.kv = nil, nil, attnKV{}
	clear(scratch.items)
}

func (t *attnTask) run(part, _, _ int) {
	hd, bs := t.c.cfg.HeadDim, t.c.cfg.BlockSize
	group := t.nHeads / t.c.cfg.KVHeads
	st := &t.states[part]
	for {
		i := int(t.next.Add(1)) - 1
		if i >= len(t.items) {
			return
		}
		it := &t.items[i]
		hoff := it.kvHead * bs * hd
		st.begin(t.q, it.row0, it.rows, t.nHeads, it.kvHead, hd, group)
		end := it.start + it.rows
		gemmPV, dots := attnPaths(it.rows, group)
		st.runs = spanRuns(st.runs[:0], it.blocks, bs, &t.kv, hoff, 0, min(attnSpan, end))
		for p0 := 0; p0 < end; p0 += attnSpan {
			st.nruns = st.nruns[:0]
			if next := p0 + attnSpan; next < end {
				st.nruns = spanRuns(st.nruns, it.blocks, bs, &t.kv, hoff, next, min(attnSpan, end-next))
			}
			st.attend(&t.kv, p0, min(attnSpan, end-p0), it.start, hd, gemmPV, dots)
			st.runs, st.nruns = st.nruns, st.runs
		}
		st.finish(t.out, it.row0, t.nHeads, it.kvHead, hd)
	}
}

// attnRun is a stretch of a span's positions that lie together in one
// block: n positions from column j of the span on, whose K and V vectors
// of the item's KV head start at off in the layer's K and V, a row
// stride apart.
type attnRun struct{ j, n, off int }

// spanRuns appends to dst the runs of the n positions from p0 on, read
// through the block table blocks of blocks of bs positions laid out as kv
// says, the head's vectors hoff values into each block.
func spanRuns(dst []attnRun, blocks []blockstore.BlockID, bs int, kv *attnKV, hoff, p0, n int) []attnRun {
	for j := 0; j < n; {
		p := p0 + j
		slot := p % bs
		run := min(bs-slot, n-j)
		dst = append(dst, attnRun{j, run, int(blocks[p/bs])*kv.block + hoff + slot*kv.stride})
		j += run
	}
	return dst
}

// attnKV is one layer's K and V: float32 in an F32 cache (kl, vl), halves
// in an F16 one (kh, vh), block values from one block to the next and, in
// a block, stride values from one position of a head to the next.
type attnKV struct {
	kl, vl        []float32
	kh, vh        []uint16
	block, stride int
}

// prefetch asks for the K and V vectors of run r, hd values each, to be
// brought into cache ahead of use.
func (kv *attnKV) prefetch(r attnRun, hd int) {
	if kv.kh != nil {
		prefetchHalf(kv.kh[r.off:], kv.stride, r.n, hd)
		prefetchHalf(kv.vh[r.off:], kv.stride, r.n, hd)
	} else {
		prefetch(kv.kl[r.off:], kv.stride, r.n, hd)
		prefetch(kv.vl[r.off:], kv.stride, r.n, hd)
	}
}

// grow makes room for pairs pairs of headDim.
func (st *attnState) grow(pairs, headDim int) {
	if cap(st.q) < pairs*headDim {
		st.q = make([]float32, pairs*headDim)
		st.acc = make([]float32, pairs*headDim)
		st.pv = make([]float32, pairs*headDim)
		st.mx = make([]float32, pairs)
		st.sum = make([]float32, pairs)
		st.corr = make([]float32, pairs)
	}
	if cap(st.scores) < pairs*attnSpan {
		st.scores = make([]float32, pairs*attnSpan)
	}
	if len(st.kb) < attnSpan*headDim {
		st.kb = make([]float32, attnSpan*headDim)
		st.vb = make([]float32, attnSpan*headDim)
		st.vt = make([]float32, attnSpan*headDim)
	}
	if st.runs == nil {
		st.runs, st.nruns = make([]attnRun, 0, attnSpan), make([]attnRun, 0, attnSpan)
	}
}

// begin starts an item: it gathers the item's query vectors (rows of
// query row row0 on, the heads of KV head kvHead) into st.q, scaled, and
// clears the running softmax.
func (st *attnState) begin(q []float32, row0, rows, nHeads, kvHead, hd, group int) {
	pairs := rows * group
	st.q, st.acc = st.q[:pairs*hd], st.acc[:pairs*hd]
	st.mx, st.sum = st.mx[:pairs], st.sum[:pairs]
	st.group = group
	scale := float32(1 / math.Sqrt(float64(hd)))
	for r := range rows {
		src := q[((row0+r)*nHeads+kvHead*group)*hd:][:group*hd]
		dst := st.q[r*group*hd:][:group*hd]
		for i, x := range src {
			dst[i] = x * scale
		}
	}
	clear(st.acc)
	clear(st.sum)
	for i := range st.mx {
		st.mx[i] = float32(math.Inf(-1))
	}
}

// attend folds the span of n positions from p0 on, whose runs are
// st.runs, into the running softmax. Query row r (at position start+r)
// sees only positions up to its own, so rows before p0-start skip the
// span and rows inside it use only its first start+r-p0+1 positions.
// With gemmPV the scores and the weighted sum of V are one product each
// for all the pairs, over K and V gathered into scratch; without, the
// scores are a product a run, read from the cache where it can be (an F16
// cache's K converted by the AVX-512 GEMM's loads, which compute what the
// F32 cache's GEMM does on the same values), and each pair adds its own
// weighted sum.
func (st *attnState) attend(kv *attnKV, p0, n, start, hd int, gemmPV, dots bool) {
	g := st.group
	first := max(0, p0-start) * g
	pairs := len(st.mx) - first
	scores, q := st.scores[:pairs*n], st.q[first*hd:]
	for i, r := range st.runs {
		// Block-table order is not memory order, so the hardware
		// prefetcher cannot guess the next run's block: ask for it one
		// run ahead. (A whole span ahead at once, into L1 or L2, made
		// BenchmarkAttentionFromMemory 1.4-1.7x slower.)
		if i+1 < len(st.runs) {
			kv.prefetch(st.runs[i+1], hd)
		} else if len(st.nruns) > 0 {
			kv.prefetch(st.nruns[0], hd)
		}
		switch {
		case dots && kv.kh != nil:
			if !simdHalfScores(scores[r.j:], n, q, hd, kv.kh[r.off:], kv.stride, pairs, r.n) {
				halfRows(st.kb, kv.kh[r.off:], kv.stride, r.n, hd)
				dotScores(scores[r.j:], n, q, hd, st.kb, hd, pairs, r.n)
			}
		case dots:
			if !simdScores(scores[r.j:], n, q, hd, kv.kl[r.off:], kv.stride, pairs, r.n) {
				dotScores(scores[r.j:], n, q, hd, kv.kl[r.off:], kv.stride, pairs, r.n)
			}
		case gemmPV:
			st.gather(kv, r, hd)
		case kv.kh != nil && !directGemm(kernels.F16, r.n):
			halfRows(st.kb, kv.kh[r.off:], kv.stride, r.n, hd)
			gemm(scores[r.j:], n, q, hd, st.kb, hd, pairs, r.n, hd)
		case kv.kh != nil:
			halfScores(scores[r.j:], n, q, hd, kv.kh[r.off:], kv.stride, pairs, r.n, hd)
		default:
			gemm(scores[r.j:], n, q, hd, kv.kl[r.off:], kv.stride, pairs, r.n, hd)
		}
		if kv.vh != nil && !gemmPV && !fusedHalfAccum(hd) {
			halfRows(st.vb[r.j*hd:], kv.vh[r.off:], kv.stride, r.n, hd)
		}
	}
	if gemmPV {
		gemm(scores, n, q, hd, st.kb, hd, pairs, n, hd)
	}
	for i := first; i < len(st.mx); i++ {
		valid := min(n, start+i/g-p0+1)
		s := scores[(i-first)*n:][:n]
		m := maxScore(s[:valid], st.mx[i])
		corr := float32(1)
		if m > st.mx[i] {
			corr = expf(st.mx[i] - m)
			st.sum[i] *= corr
			st.mx[i] = m
		}
		st.sum[i] += expSub(s[:valid], m)
		if gemmPV {
			clear(s[valid:])
			st.corr[i-first] = corr
			continue
		}
		acc := st.acc[i*hd : (i+1)*hd]
		if corr != 1 {
			for d := range acc {
				acc[d] *= corr
			}
		}
		st.accumV(kv, acc, s[:valid], hd)
	}
	if gemmPV {
		pv := st.pv[:pairs*hd]
		gemm(pv, hd, scores, n, st.vt, attnSpan, pairs, hd, n)
		for i, corr := range st.corr[:pairs] {
			scaleAdd(st.acc[(first+i)*hd:][:hd], pv[i*hd:][:hd], corr)
		}
	}
}

// attnPaths returns how an item of rows query rows, group query heads
// per KV head, takes its spans: by one GEMM each for its scores and its V
// sums (attnGemmPairs), or by one dot product a score (attnDotRows).
func attnPaths(rows, group int) (gemmPV, dots bool) {
	dots = rows <= attnDotRows
	return !dots && rows*group >= attnGemmPairs, dots
}

// dotScores sets c[i*ldc+j] to the dot product of query pair i (q, hd
// values a row) and position j's K (k, ldk apart) for i < m, j < n, each
// one Dot, so a score's bits depend on neither m nor n.
func dotScores(c []float32, ldc int, q []float32, hd int, k []float32, ldk, m, n int) {
	for i := range m {
		qi := q[i*hd : (i+1)*hd]
		for j := range n {
			c[i*ldc+j] = Dot(qi, k[j*ldk:])
		}
	}
}

// maxScore returns the largest of m and the scores s. A NaN score is
// skipped here but still turns the output NaN, through expSub. (Not the
// max builtin: its NaN and signed-zero handling made this loop a fifth of
// decode time.)
func maxScore(s []float32, m float32) float32 {
	m, j0 := simdMax(s, m)
	for _, x := range s[j0:] {
		if x > m {
			m = x
		}
	}
	return m
}

// scaleAdd sets acc[i] = acc[i]·c + add[i]: a pair's running sum of
// weighted V vectors, rescaled, plus a span's.
func scaleAdd(acc, add []float32, c float32) {
	add = add[:len(acc)]
	for i := simdScaleAdd(acc, add, c); i < len(acc); i++ {
		acc[i] = acc[i]*c + add[i]
	}
}

// accumV adds Σ_j w[j]·V[j] over the span's first len(w) positions to
// acc: run by run from the cache (an F16 one's halves converted as they
// load, where fusedHalfAccum), or from an F16 cache's V converted into
// st.vb. accum and accumHalf add position after position, so either way
// each element of acc takes the same additions in the same order.
func (st *attnState) accumV(kv *attnKV, acc, w []float32, hd int) {
	if kv.vh != nil && !fusedHalfAccum(hd) {
		accum(acc, w, st.vb, hd)
		return
	}
	for _, r := range st.runs {
		if r.j >= len(w) {
			return
		}
		rw := w[r.j:min(r.j+r.n, len(w))]
		if kv.vh != nil {
			accumHalf(acc, rw, kv.vh[r.off:], kv.stride)
		} else {
			accum(acc, rw, kv.vl[r.off:], kv.stride)
		}
	}
}

// gather copies run r's K vectors into st.kb and its V vectors, transposed,
// into st.vt (st.vt[d*attnSpan+j] is element d of the V vector at column j
// of the span), for an item whose P·V is a GEMM: the whole span's scores
// are then one product, and its P·V the product's a·bᵀ. An F16 cache's V
// goes through st.vb, converted.
func (st *attnState) gather(kv *attnKV, r attnRun, hd int) {
	kb := st.kb[r.j*hd:][:r.n*hd]
	src, ld := kv.vl, kv.stride
	if kv.kh != nil {
		halfRows(kb, kv.kh[r.off:], kv.stride, r.n, hd)
		halfRows(st.vb, kv.vh[r.off:], kv.stride, r.n, hd)
		src, ld = st.vb, hd
	} else {
		for j := range r.n {
			copy(kb[j*hd:][:hd], kv.kl[r.off+j*kv.stride:][:hd])
		}
		src = src[r.off:]
	}
	for j := range r.n {
		col := st.vt[r.j+j:]
		for d, x := range src[j*ld:][:hd] {
			col[d*attnSpan] = x
		}
	}
}

// finish writes the item's outputs, acc/sum, into out.
func (st *attnState) finish(out []float32, row0, nHeads, kvHead, hd int) {
	g := st.group
	for i, sum := range st.sum {
		o := out[((row0+i/g)*nHeads+kvHead*g+i%g)*hd:][:hd]
		inv := 1 / sum
		for d, x := range st.acc[i*hd : (i+1)*hd] {
			o[d] = x * inv
		}
	}
}
