package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
)

// naiveAttention is softmax(q·kᵀ/sqrt(hd))·v in float64 over one
// sequence's contiguous K/V ([pos][kvHead][hd]) with a causal mask and
// grouped heads: query row r is at position start+r.
func naiveAttention(q, k, v []float32, start, rows, nHeads, kvHeads, hd int) []float32 {
	out := make([]float32, rows*nHeads*hd)
	group := nHeads / kvHeads
	for r := range rows {
		pos := start + r
		for h := range nHeads {
			kh := h / group
			scores := make([]float64, pos+1)
			m := math.Inf(-1)
			for p := range scores {
				var s float64
				for d := range hd {
					s += float64(q[(r*nHeads+h)*hd+d]) * float64(k[(p*kvHeads+kh)*hd+d])
				}
				scores[p] = s / math.Sqrt(float64(hd))
				m = math.Max(m, scores[p])
			}
			var sum float64
			for p := range scores {
				scores[p] = math.Exp(scores[p] - m)
				sum += scores[p]
			}
			for d := range hd {
				var acc float64
				for p := range scores {
					acc += scores[p] / sum * float64(v[(p*kvHeads+kh)*hd+d])
				}
				out[(r*nHeads+h)*hd+d] = float32(acc)
			}
		}
	}
	return out
}

// attnCase is a batch to run through both Attention and the reference.
type attnCase struct {
	name                   string
	kvHeads, group, hd, bs int
	seqs                   []struct{ start, rows int }
}

// attnFixture holds one attnCase's cache, contiguous copies of each
// sequence's K/V, its queries and its block tables.
type attnFixture struct {
	cache  *KVCache
	nHeads int
	seqs   []AttnSeq
	k, v   [][]float32 // per sequence, [pos][kvHead][hd]
	q      []float32
}

// newAttnFixture fills layer 1 of a two-layer cache. Physical blocks are
// handed out in a shuffled order, so logical neighbours are never
// physical neighbours.
func newAttnFixture(t testing.TB, r *rand.Rand, tc attnCase) *attnFixture {
	kvd := tc.kvHeads * tc.hd
	total := 0
	for _, s := range tc.seqs {
		total += (s.start + s.rows + tc.bs - 1) / tc.bs
	}
	c, err := NewKVCache(KVConfig{Layers: 2, KVHeads: tc.kvHeads, HeadDim: tc.hd, BlockSize: tc.bs, NumBlocks: total + 1})
	if err != nil {
		t.Fatal(err)
	}
	f := &attnFixture{cache: c, nHeads: tc.kvHeads * tc.group}
	free := r.Perm(total + 1)
	for _, s := range tc.seqs {
		n := s.start + s.rows
		k, v := randVec(r, n*kvd), randVec(r, n*kvd)
		var blocks []blockstore.BlockID
		for range (n + tc.bs - 1) / tc.bs {
			blocks = append(blocks, blockstore.BlockID(free[0]))
			free = free[1:]
		}
		for p := range n {
			c.Put(1, blocks[p/tc.bs], p%tc.bs, k[p*kvd:(p+1)*kvd], v[p*kvd:(p+1)*kvd])
		}
		f.k, f.v = append(f.k, k), append(f.v, v)
		f.seqs = append(f.seqs, AttnSeq{Blocks: blocks, Start: s.start, Rows: s.rows})
		f.q = append(f.q, randVec(r, s.rows*f.nHeads*tc.hd)...)
	}
	return f
}

// check runs Attention and compares every sequence with the reference.
func (f *attnFixture) check(t testing.TB, w *Workers, scratch *AttnScratch) {
	t.Helper()
	cfg := f.cache.Config()
	out := randVec(rand.New(rand.NewPCG(0, 0)), len(f.q))
	f.cache.Attention(w, 1, f.q, out, f.seqs, f.nHeads, scratch)
	row := 0
	for i, s := range f.seqs {
		lo, hi := row*f.nHeads*cfg.HeadDim, (row+s.Rows)*f.nHeads*cfg.HeadDim
		want := naiveAttention(f.q[lo:hi], f.k[i], f.v[i], s.Start, s.Rows, f.nHeads, cfg.KVHeads, cfg.HeadDim)
		checkClose(t, fmt.Sprintf("sequence %d", i), out[lo:hi], want, 2e-5)
		row += s.Rows
	}
}

type seqShape = struct{ start, rows int }

var attnCases = []attnCase{
	{"decode batch", 2, 2, 8, 4, []seqShape{{0, 1}, {3, 1}, {4, 1}, {20, 1}}},
	{"prefill from zero", 2, 2, 8, 4, []seqShape{{0, 9}}},
	{"mixed: chunk over prefix and decodes", 2, 2, 8, 4, []seqShape{{10, 7}, {20, 1}, {0, 1}, {5, 0}}},
	{"multi-head attention", 4, 1, 16, 16, []seqShape{{30, 5}, {1, 1}}},
	{"one KV head, group of 8", 1, 8, 8, 8, []seqShape{{13, 11}, {2, 1}}},
	{"head dim not a multiple of 8", 2, 2, 12, 4, []seqShape{{6, 6}, {9, 1}}},
	{"llama-like", 4, 2, 64, 16, []seqShape{{40, 25}, {70, 1}, {15, 1}}},
	{"block size 1", 2, 2, 8, 1, []seqShape{{3, 3}, {0, 1}}},
	{"chunk aligned to a block", 2, 3, 16, 4, []seqShape{{8, 4}, {4, 8}}},
	{"prefill longer than a row chunk", 1, 2, 8, 16, []seqShape{{10, 300}, {5, 1}, {0, 129}}},
}

func TestAttentionMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, workers := range []int{1, 2, 3} {
		w := NewWorkers(workers)
		for _, tc := range attnCases {
			f := newAttnFixture(t, r, tc)
			t.Run(fmt.Sprintf("%s/%d workers", tc.name, workers), func(t *testing.T) {
				eachKernel(t, func(t testing.TB) {
					var scratch AttnScratch
					f.check(t, w, &scratch)
					f.check(t, w, &scratch) // a reused scratch must give the same answer
				})
			})
		}
		w.Close()
	}
}

func TestAttentionAllocatesNothing(t *testing.T) {
	w := NewWorkers(2)
	defer w.Close()
	f := newAttnFixture(t, rand.New(rand.NewPCG(1, 1)), attnCases[2])
	out := make([]float32, len(f.q))
	var scratch AttnScratch
	run := func() { f.cache.Attention(w, 1, f.q, out, f.seqs, f.nHeads, &scratch) }
	run()
	if n := testing.AllocsPerRun(50, run); n != 0 {
		t.Fatalf("Attention allocates %.1f times per call after warm-up", n)
	}
}

func TestAttentionPanicsOnBadShapes(t *testing.T) {
	w := NewWorkers(1)
	defer w.Close()
	f := newAttnFixture(t, rand.New(rand.NewPCG(1, 1)), attnCases[0])
	for _, tc := range []struct {
		name   string
		nHeads int
		seqs   []AttnSeq
		q      []float32
	}{
		{"heads not a multiple of KV heads", 3, f.seqs, f.q},
		{"short q", f.nHeads, f.seqs, f.q[1:]},
		{"block table too short", f.nHeads, []AttnSeq{{Blocks: f.seqs[3].Blocks[:1], Start: 20, Rows: 1}}, f.q},
		{"negative start", f.nHeads, []AttnSeq{{Blocks: f.seqs[0].Blocks, Start: -1, Rows: 1}}, f.q},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			var scratch AttnScratch
			f.cache.Attention(w, 1, tc.q, make([]float32, len(f.q)), tc.seqs, tc.nHeads, &scratch)
		})
	}
}

// FuzzAttention checks random batches (shapes drawn from the fuzz input)
// against the naive reference with both kernel sets.
func FuzzAttention(f *testing.F) {
	f.Add(uint64(1), uint8(2), uint8(2), uint8(8), uint8(4), []byte{10, 7, 20, 1, 0, 1})
	f.Add(uint64(2), uint8(1), uint8(4), uint8(12), uint8(3), []byte{0, 5})
	f.Add(uint64(3), uint8(3), uint8(1), uint8(64), uint8(16), []byte{33, 1, 2, 2, 17, 9})
	f.Fuzz(func(t *testing.T, seed uint64, kvHeads, group, hd, bs uint8, shape []byte) {
		tc := attnCase{
			kvHeads: 1 + int(kvHeads)%4, group: 1 + int(group)%4,
			hd: 1 + int(hd)%72, bs: 1 + int(bs)%17,
		}
		tc.hd += tc.hd % 2
		for i := 0; i+1 < len(shape) && len(tc.seqs) < 6; i += 2 {
			tc.seqs = append(tc.seqs, seqShape{int(shape[i]) % 80, int(shape[i+1]) % 20})
		}
		w := NewWorkers(2)
		defer w.Close()
		fx := newAttnFixture(t, rand.New(rand.NewPCG(seed, 0)), tc)
		eachKernel(t, func(t testing.TB) {
			var scratch AttnScratch
			fx.check(t, w, &scratch)
		})
	})
}

// TestAttentionPropagatesNaN checks that a NaN query poisons its own
// output rather than being quietly dropped from the softmax.
func TestAttentionPropagatesNaN(t *testing.T) {
	w := NewWorkers(2)
	defer w.Close()
	f := newAttnFixture(t, rand.New(rand.NewPCG(4, 4)), attnCases[6])
	hd := f.cache.Config().HeadDim
	f.q[3*hd+5] = float32(math.NaN()) // row 0, head 3
	eachKernel(t, func(t testing.TB) {
		out := make([]float32, len(f.q))
		var scratch AttnScratch
		f.cache.Attention(w, 1, f.q, out, f.seqs, f.nHeads, &scratch)
		for i, x := range out {
			if nan := math.IsNaN(float64(x)); nan != (i/hd == 3) {
				t.Fatalf("out[%d] = %v: only row 0 head 3 should be NaN", i, x)
			}
		}
	})
}
