package cpu

import (
	"fmt"
	"math"

	"prefixd/blockstore"
)

// AttnSeq is one sequence's share of an attention call.
type AttnSeq struct {
	Blocks []blockstore.BlockID // the block table: physical blocks in logical order
	Start  int                  // position of the first query row
	Rows   int                  // query rows: 1 for decode, the chunk length for prefill
}

// AttnScratch holds Attention's buffers, one set per worker, so Attention
// allocates nothing once the buffers have grown to the largest batch seen.
// The zero value is ready to use. It must not be shared by concurrent
// calls.
type AttnScratch struct {
	parts []attnState
	rows  []int // first query row of each sequence
	task  attnTask
}

// attnState is one worker's running softmax over one (sequence, KV head)
// item. A pair is one query row with one query head of the KV head's group.
type attnState struct {
	q      []float32 // [pair][headDim], pre-scaled by 1/sqrt(headDim)
	acc    []float32 // [pair][headDim], Σ weight·V so far
	mx     []float32 // [pair], largest score so far
	sum    []float32 // [pair], Σ weight so far
	scores []float32 // [pair][chunk], one chunk's scores, then weights
	group  int       // query heads per KV head
}

// attnTask is one Attention call; a part runs items [lo, hi), item
// seq·KVHeads + kvHead.
type attnTask struct {
	c        *KVCache
	layer    int
	q, out   []float32
	seqs     []AttnSeq
	nHeads   int
	rows     []int
	states   []attnState
	kl, vl   []float32
	kvStride int
}

// Attention computes causal attention for a batch: q and out hold the
// sequences' query rows one after another, nHeads·HeadDim floats each. Row
// r of a sequence is at position Start+r and attends to positions
// 0..Start+r, whose K/V it reads through the sequence's block table (the
// caller has already Put them). Scores are scaled by 1/sqrt(HeadDim), and
// query head h uses KV head h/(nHeads/KVHeads).
//
// Work is split over (sequence, KV head) items on w. An item walks its
// blocks once; each block's K and V serve every query row and every query
// head of the group while they are in L1, and a running (online) softmax
// means no buffer grows with the context. One call thus covers a prefill
// chunk over its cached prefix and a batch of decodes alike. Attention
// panics if the shapes disagree (a broken caller invariant).
func (c *KVCache) Attention(w *Workers, layer int, q, out []float32, seqs []AttnSeq, nHeads int, scratch *AttnScratch) {
	kvh, hd, bs := c.cfg.KVHeads, c.cfg.HeadDim, c.cfg.BlockSize
	if nHeads <= 0 || nHeads%kvh != 0 {
		panic(fmt.Sprintf("cpu: Attention with %d query heads over %d KV heads", nHeads, kvh))
	}
	scratch.rows = scratch.rows[:0]
	rows, maxPairs := 0, 0
	for i, s := range seqs {
		if s.Start < 0 || s.Rows < 0 || len(s.Blocks)*bs < s.Start+s.Rows {
			panic(fmt.Sprintf("cpu: Attention sequence %d: %d rows from %d with %d blocks of %d", i, s.Rows, s.Start, len(s.Blocks), bs))
		}
		scratch.rows = append(scratch.rows, rows)
		rows += s.Rows
		maxPairs = max(maxPairs, s.Rows*nHeads/kvh)
	}
	if len(q) < rows*nHeads*hd || len(out) < rows*nHeads*hd {
		panic(fmt.Sprintf("cpu: Attention over %d rows with len(q)=%d len(out)=%d", rows, len(q), len(out)))
	}
	if len(scratch.parts) < w.N() {
		scratch.parts = append(scratch.parts, make([]attnState, w.N()-len(scratch.parts))...)
	}
	for i := range scratch.parts {
		scratch.parts[i].grow(maxPairs, hd, bs)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	scratch.task = attnTask{
		c: c, layer: layer, q: q, out: out, seqs: seqs, nHeads: nHeads,
		rows: scratch.rows, states: scratch.parts,
		kl: c.k[layer], vl: c.v[layer], kvStride: kvh * hd,
	}
	w.forLocked(len(seqs)*kvh, &scratch.task)
	scratch.task = attnTask{} // do not keep the caller's slices alive
}

func (t *attnTask) run(part, lo, hi int) {
	kvh, hd, bs := t.c.cfg.KVHeads, t.c.cfg.HeadDim, t.c.cfg.BlockSize
	st := &t.states[part]
	for it := lo; it < hi; it++ {
		s, h := t.seqs[it/kvh], it%kvh
		if s.Rows == 0 {
			continue
		}
		row0 := t.rows[it/kvh]
		st.begin(t.q, row0, s.Rows, t.nHeads, h, hd, t.nHeads/kvh)
		end := s.Start + s.Rows
		blocks := s.Blocks[:(end+bs-1)/bs]
		for b, id := range blocks {
			off := int(id)*bs*t.kvStride + h*hd
			n := min(bs, end-b*bs)
			if b+1 < len(blocks) {
				// Block-table order is not memory order, so the
				// hardware prefetcher cannot guess the next block.
				next := int(blocks[b+1])*bs*t.kvStride + h*hd
				nn := min(bs, end-(b+1)*bs)
				prefetch(t.kl[next:], t.kvStride, nn, hd)
				prefetch(t.vl[next:], t.kvStride, nn, hd)
			}
			st.attend(t.kl[off:], t.vl[off:], t.kvStride, b*bs, n, s.Start, hd)
		}
		st.finish(t.out, row0, t.nHeads, h, hd)
	}
}

// grow makes room for pairs pairs of headDim and chunks of up to chunk
// positions.
func (st *attnState) grow(pairs, headDim, chunk int) {
	if cap(st.q) < pairs*headDim {
		st.q = make([]float32, pairs*headDim)
		st.acc = make([]float32, pairs*headDim)
		st.mx = make([]float32, pairs)
		st.sum = make([]float32, pairs)
	}
	if cap(st.scores) < pairs*chunk {
		st.scores = make([]float32, pairs*chunk)
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
			m = max(m, x)
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
