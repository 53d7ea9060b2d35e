package cpu

import (
	"math"

	"prefixd/blockstore"
)

// AttnSeq is one sequence's share of an attention call.
type AttnSeq struct {
	Blocks []blockstore.BlockID // the block table: physical blocks in logical order
	Start  int                  // position of the first query row
	Rows   int                  // query rows: 1 for decode, the chunk length for prefill
}

// AttnScratch holds per-worker buffers so Attention allocates nothing once
// warm. The zero value is ready to use; it must not be shared by
// concurrent calls.
type AttnScratch struct {
	parts [][]float32
	items []int
}

// Attention computes causal attention for a batch: q and out hold the
// sequences' rows one after another, nHeads·HeadDim floats each. Row r of
// a sequence is position Start+r and attends to positions 0..Start+r,
// whose K/V it reads through the sequence's block table (the caller has
// already Put them). Query head h uses KV head h/(nHeads/KVHeads), and each
// K/V vector is loaded once for every row and head that uses it. Work is
// split over (sequence, KV head) pairs; softmax runs online, so no buffer
// grows with the context.
func (c *KVCache) Attention(w *Workers, layer int, q, out []float32, seqs []AttnSeq, nHeads int, scratch *AttnScratch) {
	kvh, hd := c.cfg.KVHeads, c.cfg.HeadDim
	group := nHeads / kvh
	scratch.items = scratch.items[:0]
	row := 0
	for _, s := range seqs {
		scratch.items = append(scratch.items, row)
		row += s.Rows
	}
	if len(scratch.parts) < w.N() {
		scratch.parts = make([][]float32, w.N())
	}
	w.For(len(seqs)*kvh, func(part, lo, hi int) {
		for it := lo; it < hi; it++ {
			si, h := it/kvh, it%kvh
			s := seqs[si]
			need := s.Rows * group * (hd + 2)
			if cap(scratch.parts[part]) < need {
				scratch.parts[part] = make([]float32, need)
			}
			c.attendOne(layer, q, out, scratch.items[si], s, h, nHeads, group, scratch.parts[part][:need])
		}
	})
}

// attendOne handles one sequence and one KV head: every query row of the
// sequence and every query head of the group, position by position.
func (c *KVCache) attendOne(layer int, q, out []float32, row0 int, s AttnSeq, kvHead, nHeads, group int, buf []float32) {
	hd, bs := c.cfg.HeadDim, c.cfg.BlockSize
	pairs := s.Rows * group
	mx, sum, acc := buf[:pairs], buf[pairs:2*pairs], buf[2*pairs:]
	clear(sum)
	clear(acc)
	for i := range mx {
		mx[i] = float32(math.Inf(-1))
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	kl, vl := c.k[layer], c.v[layer]
	last := s.Start + s.Rows - 1
	for p := 0; p <= last; p++ {
		off := ((int(s.Blocks[p/bs])*bs+p%bs)*c.cfg.KVHeads + kvHead) * hd
		kv, vv := kl[off:off+hd], vl[off:off+hd]
		for r := max(0, p-s.Start); r < s.Rows; r++ {
			qrow := q[(row0+r)*nHeads*hd:]
			for g := range group {
				h := kvHead*group + g
				score := Dot(qrow[h*hd:(h+1)*hd], kv) * scale
				i := r*group + g
				a := acc[i*hd : (i+1)*hd]
				if score > mx[i] {
					corr := float32(math.Exp(float64(mx[i] - score)))
					sum[i] *= corr
					for d := range a {
						a[d] *= corr
					}
					mx[i] = score
				}
				wgt := float32(math.Exp(float64(score - mx[i])))
				sum[i] += wgt
				for d, v := range vv {
					a[d] += wgt * v
				}
			}
		}
	}
	for r := range s.Rows {
		orow := out[(row0+r)*nHeads*hd:]
		for g := range group {
			h := kvHead*group + g
			i := r*group + g
			inv := 1 / sum[i]
			o := orow[h*hd : (h+1)*hd]
			for d, v := range acc[i*hd : (i+1)*hd] {
				o[d] = v * inv
			}
		}
	}
}
