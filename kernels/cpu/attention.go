package cpu

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/prefixd/prefixd/blockstore"
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
	scores []float32 // [pair][chunk], one chunk's scores, then weights
	kb, vb []float32 // [slot][headDim]: an F16 block's K and V, converted
	group  int       // query heads per KV head
}

// attnTask is one Attention call. Its parts claim items one at a time from
// next rather than taking fixed ranges, because items differ in cost by
// orders of magnitude (a prefill chunk against a decode row).
type attnTask struct {
	c        *KVCache
	q, out   []float32
	nHeads   int
	items    []attnItem
	states   []attnState
	kl, vl   []float32 // the layer's K and V in an F32 cache
	kh, vh   []uint16  // the layer's K and V in an F16 cache
	kvStride int
	next     atomic.Int64
}

// Attention computes causal attention for a batch: q and out hold the
// sequences' query rows one after another, nHeads·HeadDim floats each. Row
// r of a sequence is at position Start+r and attends to positions
// 0..Start+r, whose K/V it reads through the sequence's block table (the
// caller has already Put them). Scores are scaled by 1/sqrt(HeadDim), and
// query head h uses KV head h/(nHeads/KVHeads).
//
// Work is split on w into items of one sequence (up to 128 of its rows)
// and one KV head, largest first. An item walks its blocks once;
// each block's K and V serve every query row and every query head of the
// group while they are in L1, and a running (online) softmax means no
// buffer grows with the context. One call thus covers a prefill chunk over
// its cached prefix and a batch of decodes alike. In an F16 cache each
// block's K and V vectors of the item's head are first made float32 in the
// worker's scratch (one block, a few KiB, stays in L1), so the arithmetic
// after is the F32 cache's, bit for bit on the same values.
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
	half := c.k16 != nil
	for i := range scratch.parts {
		scratch.parts[i].grow(maxPairs, hd, bs, half)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t := &scratch.task
	t.c, t.q, t.out, t.nHeads = c, q, out, nHeads
	t.items, t.states = scratch.items, scratch.parts
	if half {
		t.kh, t.vh = c.k16[layer], c.v16[layer]
	} else {
		t.kl, t.vl = c.k[layer], c.v[layer]
	}
	t.kvStride = kvh * hd
	t.next.Store(0)
	w.forLocked(min(w.N(), len(scratch.items)), t)
	// Do not keep the caller's slices alive.
	t.q, t.out, t.kl, t.vl, t.kh, t.vh = nil, nil, nil, nil, nil, nil
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
		h := it.kvHead
		st.begin(t.q, it.row0, it.rows, t.nHeads, h, hd, group)
		end := it.start + it.rows
		blocks := it.blocks[:(end+bs-1)/bs]
		for b, id := range blocks {
			off := int(id)*bs*t.kvStride + h*hd
			n := min(bs, end-b*bs)
			if b+1 < len(blocks) {
				// Block-table order is not memory order, so the
				// hardware prefetcher cannot guess the next block.
				next := int(blocks[b+1])*bs*t.kvStride + h*hd
				nn := min(bs, end-(b+1)*bs)
				if t.kh != nil {
					prefetchHalf(t.kh[next:], t.kvStride, nn, hd)
					prefetchHalf(t.vh[next:], t.kvStride, nn, hd)
				} else {
					prefetch(t.kl[next:], t.kvStride, nn, hd)
					prefetch(t.vl[next:], t.kvStride, nn, hd)
				}
			}
			if t.kh != nil {
				halfRows(st.kb, t.kh[off:], t.kvStride, n, hd)
				halfRows(st.vb, t.vh[off:], t.kvStride, n, hd)
				st.attend(st.kb, st.vb, hd, b*bs, n, it.start, hd)
				continue
			}
			st.attend(t.kl[off:], t.vl[off:], t.kvStride, b*bs, n, it.start, hd)
		}
		st.finish(t.out, it.row0, t.nHeads, h, hd)
	}
}

// grow makes room for pairs pairs of headDim and chunks of up to chunk
// positions, and with half for a chunk of K and V vectors converted from
// an F16 cache.
func (st *attnState) grow(pairs, headDim, chunk int, half bool) {
	if cap(st.q) < pairs*headDim {
		st.q = make([]float32, pairs*headDim)
		st.acc = make([]float32, pairs*headDim)
		st.mx = make([]float32, pairs)
		st.sum = make([]float32, pairs)
	}
	if cap(st.scores) < pairs*chunk {
		st.scores = make([]float32, pairs*chunk)
	}
	if half && len(st.kb) < chunk*headDim {
		st.kb = make([]float32, chunk*headDim)
		st.vb = make([]float32, chunk*headDim)
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

// attend folds n positions from p0 on into the running softmax. Their K
// and V vectors for this item's KV head start at k and v, stride floats
// apart. Query row r (at position start+r) sees only positions up to its
// own, so rows before p0-start skip the chunk and rows inside it use only
// its first start+r-p0+1 positions.
func (st *attnState) attend(k, v []float32, stride, p0, n, start, hd int) {
	g := st.group
	first := max(0, p0-start) * g
	pairs := len(st.mx) - first
	scores := st.scores[:pairs*n]
	gemm(scores, n, st.q[first*hd:], hd, k, stride, pairs, n, hd)
	for i := first; i < len(st.mx); i++ {
		valid := min(n, start+i/g-p0+1)
		s := scores[(i-first)*n:][:valid]
		m := st.mx[i]
		for _, x := range s {
			// Not the max builtin: its NaN and signed-zero handling made
			// this loop a fifth of decode time. A NaN score still turns
			// the output NaN, through expSub.
			if x > m {
				m = x
			}
		}
		acc := st.acc[i*hd : (i+1)*hd]
		if m > st.mx[i] {
			corr := expf(st.mx[i] - m)
			st.sum[i] *= corr
			for d := range acc {
				acc[d] *= corr
			}
			st.mx[i] = m
		}
		st.sum[i] += expSub(s, m)
		accum(acc, s, v, stride)
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
