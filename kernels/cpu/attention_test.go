package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
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

// newAttnFixture fills layer 1 of a two-layer F32 cache. Physical blocks
// are handed out in a shuffled order, so logical neighbours are never
// physical neighbours.
func newAttnFixture(t testing.TB, r *rand.Rand, tc attnCase) *attnFixture {
	return newTypedFixture(t, r, tc, kernels.F32, false)
}

// newTypedFixture is newAttnFixture with a cache of element type typ;
// with halfExact every K and V value is first rounded to a half, so that
// an F16 cache holds exactly what an F32 one does. Fixtures made from
// equal generators (same seed, same case) share every value and block
// table whatever their type.
func newTypedFixture(t testing.TB, r *rand.Rand, tc attnCase, typ kernels.DType, halfExact bool) *attnFixture {
	kvd := tc.kvHeads * tc.hd
	total := 0
	for _, s := range tc.seqs {
		total += (s.start + s.rows + tc.bs - 1) / tc.bs
	}
	c, err := NewKVCache(KVConfig{Layers: 2, KVHeads: tc.kvHeads, HeadDim: tc.hd, BlockSize: tc.bs, NumBlocks: total + 1, Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	f := &attnFixture{cache: c, nHeads: tc.kvHeads * tc.group}
	free := r.Perm(total + 1)
	for _, s := range tc.seqs {
		n := s.start + s.rows
		k, v := randVec(r, n*kvd), randVec(r, n*kvd)
		if halfExact {
			roundToHalf(k)
			roundToHalf(v)
		}
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

// check runs Attention and compares every sequence with the reference:
// within float32 rounding (2e-5) for an F32 cache, and for an F16 one
// within that plus halfTolerance. It returns the outputs.
func (f *attnFixture) check(t testing.TB, w *Workers, scratch *AttnScratch) []float32 {
	t.Helper()
	cfg := f.cache.Config()
	out := randVec(rand.New(rand.NewPCG(0, 0)), len(f.q))
	f.cache.Attention(w, 1, f.q, out, f.seqs, f.nHeads, scratch)
	row := 0
	for i, s := range f.seqs {
		lo, hi := row*f.nHeads*cfg.HeadDim, (row+s.Rows)*f.nHeads*cfg.HeadDim
		want := naiveAttention(f.q[lo:hi], f.k[i], f.v[i], s.Start, s.Rows, f.nHeads, cfg.KVHeads, cfg.HeadDim)
		tol := 2e-5
		if cfg.Type == kernels.F16 {
			tol += halfTolerance(f.q[lo:hi], f.k[i], f.v[i], s.Start, s.Rows, f.nHeads, cfg.KVHeads, cfg.HeadDim)
		}
		checkClose(t, fmt.Sprintf("sequence %d", i), out[lo:hi], want, tol)
		row += s.Rows
	}
	return out
}

// halfUnit is the unit roundoff of IEEE half precision: rounding to
// nearest changes a value in the normal range by at most 2^-11 of it.
const halfUnit = 1.0 / (1 << 11)

// halfTolerance bounds how far attention over K and V rounded to halves
// can stray from attention over the exact values, for one sequence (the
// arguments of naiveAttention). Each K value moves by at most
// u·|k|+2^-25 (u = halfUnit; 2^-25 covers the subnormals), so a score
// q·k/sqrt(hd) moves by at most D = max over positions of
// (u·Σ|q·k| + 2^-25·Σ|q|)/sqrt(hd). Each softmax weight p then moves to
// within a factor e^(±2D) of itself, so Σ p·v moves by at most
// (e^(2D)-1)·max|v|; rounding V adds at most u·max|v|+2^-25.
func halfTolerance(q, k, v []float32, start, rows, nHeads, kvHeads, hd int) float64 {
	group := nHeads / kvHeads
	var d, vmax float64
	for _, x := range v[:(start+rows)*kvHeads*hd] {
		vmax = math.Max(vmax, math.Abs(float64(x)))
	}
	for r := range rows {
		for h := range nHeads {
			for p := range start + r + 1 {
				var qk, qs float64
				for i := range hd {
					qi := math.Abs(float64(q[(r*nHeads+h)*hd+i]))
					qk += qi * math.Abs(float64(k[(p*kvHeads+h/group)*hd+i]))
					qs += qi
				}
				d = math.Max(d, (halfUnit*qk+qs/(1<<25))/math.Sqrt(float64(hd)))
			}
		}
	}
	return math.Expm1(2*d)*vmax + halfUnit*vmax + 1.0/(1<<25)
}

// roundToHalf rounds every value of x to the nearest half.
func roundToHalf(x []float32) {
	for i, f := range x {
		x[i] = quant.F16ToF32(quant.F32ToF16(f))
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
	// Attention walks spans of attnSpan (64) positions, each gathered
	// from several blocks of the shuffled table; an item of at least
	// attnGemmPairs (16) pairs sums P·V with a GEMM, a smaller one pair
	// by pair.
	{"decodes over several spans", 2, 1, 16, 16, []seqShape{{200, 1}, {63, 1}, {64, 1}, {129, 1}, {127, 1}}},
	{"prefill from mid-span across a span boundary", 2, 2, 16, 16, []seqShape{{100, 60}, {64, 64}, {0, 70}}},
	{"group of 4, blocks not dividing a span", 1, 4, 8, 5, []seqShape{{37, 30}, {130, 1}, {3, 2}, {61, 6}}},
	{"blocks longer than a span", 2, 2, 8, 80, []seqShape{{150, 20}, {90, 1}, {159, 3}}},
	{"pairs either side of the P·V GEMM", 1, 1, 8, 16, []seqShape{{50, 15}, {60, 16}, {120, 17}}},
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

// TestAttentionF16 checks an F16 cache against an F32 one over every
// case: where K and V are halves already, both hold the same values and
// the outputs must be the same bits (the F16 path only converts, then
// runs the F32 arithmetic); where they are not, the F16 outputs must be
// within halfTolerance of the exact reference (check does that).
func TestAttentionF16(t *testing.T) {
	for _, workers := range []int{1, 2, 3} {
		w := NewWorkers(workers)
		for i, tc := range attnCases {
			seed := uint64(100 + i)
			exact32 := newTypedFixture(t, rand.New(rand.NewPCG(seed, 1)), tc, kernels.F32, true)
			exact16 := newTypedFixture(t, rand.New(rand.NewPCG(seed, 1)), tc, kernels.F16, true)
			rounded := newTypedFixture(t, rand.New(rand.NewPCG(seed, 2)), tc, kernels.F16, false)
			t.Run(fmt.Sprintf("%s/%d workers", tc.name, workers), func(t *testing.T) {
				eachKernel(t, func(t testing.TB) {
					var scratch AttnScratch
					checkSameBits(t, exact16.check(t, w, &scratch), exact32.check(t, w, &scratch))
					rounded.check(t, w, &scratch)
				})
			})
		}
		w.Close()
	}
}

// checkSameBits fails unless got and want are the same float32 bits.
func checkSameBits(t testing.TB, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("output %d: F16 cache %v, F32 cache %v", i, got[i], want[i])
		}
	}
}

func TestAttentionAllocatesNothing(t *testing.T) {
	w := NewWorkers(2)
	defer w.Close()
	for _, typ := range []kernels.DType{kernels.F32, kernels.F16} {
		f := newTypedFixture(t, rand.New(rand.NewPCG(1, 1)), attnCases[2], typ, false)
		out := make([]float32, len(f.q))
		var scratch AttnScratch
		run := func() { f.cache.Attention(w, 1, f.q, out, f.seqs, f.nHeads, &scratch) }
		run()
		if n := testing.AllocsPerRun(50, run); n != 0 {
			t.Fatalf("%v cache: Attention allocates %.1f times per call after warm-up", typ, n)
		}
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
// against the naive reference with every kernel set, and an F16 cache
// against an F32 one holding the same (half) values, bit for bit.
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
		exact32 := newTypedFixture(t, rand.New(rand.NewPCG(seed, 1)), tc, kernels.F32, true)
		exact16 := newTypedFixture(t, rand.New(rand.NewPCG(seed, 1)), tc, kernels.F16, true)
		eachKernel(t, func(t testing.TB) {
			var scratch AttnScratch
			fx.check(t, w, &scratch)
			checkSameBits(t, exact16.check(t, w, &scratch), exact32.check(t, w, &scratch))
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

// TestMaxScore checks maxScore against math.Max over the scores that are
// not NaN, for every length up to a few SIMD widths and every kernel set.
func TestMaxScore(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	eachKernel(t, func(t testing.TB) {
		for n := range 41 {
			s := randVec(r, n)
			for i := range s {
				if r.IntN(7) == 0 {
					s[i] = float32(math.NaN())
				}
			}
			for _, m := range []float32{float32(math.Inf(-1)), 0.5, 10} {
				want := float64(m)
				for _, x := range s {
					if !math.IsNaN(float64(x)) {
						want = math.Max(want, float64(x))
					}
				}
				if got := maxScore(s, m); float64(got) != want {
					t.Fatalf("n=%d m=%v: maxScore = %v, want %v (s = %v)", n, m, got, want, s)
				}
			}
		}
	})
}

// TestScaleAdd checks scaleAdd against float64 arithmetic, for every
// length up to a few SIMD widths and every kernel set.
func TestScaleAdd(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 10))
	eachKernel(t, func(t testing.TB) {
		for n := range 41 {
			acc, add, c := randVec(r, n), randVec(r, n), float32(r.Float64())
			want := make([]float32, n)
			for i := range want {
				want[i] = float32(float64(acc[i])*float64(c) + float64(add[i]))
			}
			scaleAdd(acc, add, c)
			checkClose(t, fmt.Sprint("n=", n), acc, want, 1e-6)
		}
	})
}

// TestAttentionBatchInvariant: a query row's attention is the same bits
// whether it is alone in its call (a decode step) or one of up to
// attnDotRows rows of its sequence (a speculative verify pass), on both
// cache types and every kernel level, past a span boundary and with
// grouped heads: speculation must not change greedy output.
func TestAttentionBatchInvariant(t *testing.T) {
	const start, rows = 70, 17 // a verify row of 1 + 16 drafts
	tc := attnCase{kvHeads: 2, group: 2, hd: 32, bs: 16, seqs: []struct{ start, rows int }{{start, rows}}}
	for _, typ := range []kernels.DType{kernels.F32, kernels.F16} {
		f := newTypedFixture(t, rand.New(rand.NewPCG(29, 1)), tc, typ, false)
		w := NewWorkers(2)
		defer w.Close()
		width := f.nHeads * tc.hd
		eachKernel(t, func(t testing.TB) {
			var scratch AttnScratch
			alone := make([]float32, rows*width)
			for r := range rows {
				seq := AttnSeq{Blocks: f.seqs[0].Blocks, Start: start + r, Rows: 1}
				f.cache.Attention(w, 1, f.q[r*width:(r+1)*width], alone[r*width:(r+1)*width], []AttnSeq{seq}, f.nHeads, &scratch)
			}
			for n := 1; n <= rows; n++ {
				out := make([]float32, n*width)
				seq := AttnSeq{Blocks: f.seqs[0].Blocks, Start: start, Rows: n}
				f.cache.Attention(w, 1, f.q[:n*width], out, []AttnSeq{seq}, f.nHeads, &scratch)
				for i := range out {
					if math.Float32bits(out[i]) != math.Float32bits(alone[i]) {
						t.Fatalf("%v cache, %d rows: row %d value %d = %v, alone %v", typ, n, i/width, i%width, out[i], alone[i])
					}
				}
			}
		})
	}
}
