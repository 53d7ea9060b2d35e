package cpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels"
)

func BenchmarkMatMul(b *testing.B) {
	w := NewWorkers(0)
	defer w.Close()
	r := rand.New(rand.NewPCG(1, 1))
	for _, s := range []struct {
		name    string
		m, n, k int
		goOnly  bool
	}{
		{"prefill_m64_n1024_k1024", 64, 1024, 1024, false},
		{"prefill_m64_n1024_k1024_purego", 64, 1024, 1024, true},
		{"decode_batch8_n4096_k4096", 8, 4096, 4096, false},
		{"matvec_n4096_k4096", 1, 4096, 4096, false},
	} {
		a, bm, c := randVec(r, s.m*s.k), randVec(r, s.n*s.k), make([]float32, s.m*s.n)
		b.Run(s.name, func(b *testing.B) {
			if s.goOnly {
				saved2, saved512 := useAVX2, useAVX512
				useAVX2, useAVX512 = false, false
				defer func() { useAVX2, useAVX512 = saved2, saved512 }()
			}
			b.ReportAllocs()
			b.SetBytes(int64(4 * s.n * s.k)) // weight bytes read per call
			for b.Loop() {
				MatMul(w, c, a, bm, s.m, s.n, s.k)
			}
			b.ReportMetric(2*float64(s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// contiguousAttention is the same attention over per-sequence contiguous
// K/V ([pos][kvHead][hd], as a cache without paging would keep it), for
// measuring what the block-table indirection costs. It splits the work
// into the same items, claims them the same way, walks the same spans and
// prefetches the next span as the paged version does, so only the
// addressing differs: each span is one run.
func contiguousAttention(w *Workers, cfg KVConfig, k, v [][]float32, q, out []float32, seqs []AttnSeq, nHeads int, states []attnState) {
	kvh, hd := cfg.KVHeads, cfg.HeadDim
	stride, group := kvh*hd, nHeads/kvh
	type item struct{ seq, start, rows, row0, kvHead int }
	var items []item
	n := 0
	for si, s := range seqs {
		for r := 0; r < s.Rows; r += attnRowChunk {
			for h := range kvh {
				items = append(items, item{si, s.Start + r, min(attnRowChunk, s.Rows-r), n + r, h})
			}
		}
		n += s.Rows
	}
	slices.SortFunc(items, func(a, b item) int { return b.rows*(b.start+b.rows) - a.rows*(a.start+a.rows) })
	for i := range states {
		states[i].grow(min(n, attnRowChunk)*group, hd)
	}
	var next atomic.Int64
	w.For(min(w.N(), len(items)), func(part, _, _ int) {
		st := &states[part]
		for {
			i := int(next.Add(1)) - 1
			if i >= len(items) {
				return
			}
			it := items[i]
			kv := attnKV{kl: k[it.seq], vl: v[it.seq], stride: stride}
			st.begin(q, it.row0, it.rows, nHeads, it.kvHead, hd, group)
			end := it.start + it.rows
			gemmPV, dots := attnPaths(it.rows, group)
			for p0 := 0; p0 < end; p0 += attnSpan {
				off := p0*stride + it.kvHead*hd
				st.nruns = st.nruns[:0]
				if next := p0 + attnSpan; next < end {
					st.nruns = append(st.nruns, attnRun{0, min(attnSpan, end-next), off + attnSpan*stride})
				}
				sn := min(attnSpan, end-p0)
				st.runs = append(st.runs[:0], attnRun{0, sn, off})
				st.attend(&kv, p0, sn, it.start, hd, gemmPV, dots)
			}
			st.finish(out, it.row0, nHeads, it.kvHead, hd)
		}
	})
}

func TestContiguousAttentionMatchesNaive(t *testing.T) {
	w := NewWorkers(2)
	defer w.Close()
	f := newAttnFixture(t, rand.New(rand.NewPCG(2, 2)), attnCases[2])
	cfg := f.cache.Config()
	out := make([]float32, len(f.q))
	contiguousAttention(w, cfg, f.k, f.v, f.q, out, f.seqs, f.nHeads, make([]attnState, w.N()))
	row := 0
	for i, s := range f.seqs {
		lo, hi := row*f.nHeads*cfg.HeadDim, (row+s.Rows)*f.nHeads*cfg.HeadDim
		checkClose(t, fmt.Sprint("sequence ", i), out[lo:hi], naiveAttention(f.q[lo:hi], f.k[i], f.v[i], s.Start, s.Rows, f.nHeads, cfg.KVHeads, cfg.HeadDim), 2e-5)
		row += s.Rows
	}
}

// BenchmarkAttention compares paged attention (shuffled physical blocks)
// with the contiguous version on the same shapes: head dim 64, 8 query
// heads over 4 KV heads, blocks of 16; paged_f16 is the paged one over an
// F16 cache (SetBytes still counts float32 K/V, so its MB/s compare with
// the others' as work done, not bytes read).
func BenchmarkAttention(b *testing.B) {
	w := NewWorkers(0)
	defer w.Close()
	for _, tc := range []struct {
		name string
		seqs []seqShape
	}{
		{"decode_8seqs_ctx1024", []seqShape{{1023, 1}, {1023, 1}, {1023, 1}, {1023, 1}, {1023, 1}, {1023, 1}, {1023, 1}, {1023, 1}}},
		{"prefill_512rows_prefix1024", []seqShape{{1024, 512}}},
		{"mixed_256rows_prefix512_and_8decodes", []seqShape{{512, 256}, {1023, 1}, {700, 1}, {300, 1}, {1023, 1}, {64, 1}, {900, 1}, {1000, 1}, {1, 1}}},
	} {
		shape := attnCase{kvHeads: 4, group: 2, hd: 64, bs: 16, seqs: tc.seqs}
		f := newAttnFixture(b, rand.New(rand.NewPCG(5, 5)), shape)
		f16 := newTypedFixture(b, rand.New(rand.NewPCG(5, 5)), shape, kernels.F16, false)
		cfg := f.cache.Config()
		out := make([]float32, len(f.q))
		var kvBytes, flops int64
		for _, s := range f.seqs {
			kvBytes += int64(2 * (s.Start + s.Rows) * cfg.KVHeads * cfg.HeadDim * 4)
			for r := range s.Rows {
				flops += int64(4 * (s.Start + r + 1) * f.nHeads * cfg.HeadDim)
			}
		}
		report := func(b *testing.B) {
			b.ReportMetric(float64(flops)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		}
		for _, p := range []struct {
			name string
			f    *attnFixture
		}{{"paged", f}, {"paged_f16", f16}} {
			b.Run(tc.name+"/"+p.name, func(b *testing.B) {
				var scratch AttnScratch
				b.ReportAllocs()
				b.SetBytes(kvBytes)
				for b.Loop() {
					p.f.cache.Attention(w, 1, p.f.q, out, p.f.seqs, p.f.nHeads, &scratch)
				}
				report(b)
			})
		}
		b.Run(tc.name+"/contiguous", func(b *testing.B) {
			states := make([]attnState, w.N())
			b.ReportAllocs()
			b.SetBytes(kvBytes)
			for b.Loop() {
				contiguousAttention(w, cfg, f.k, f.v, f.q, out, f.seqs, f.nHeads, states)
			}
			report(b)
		})
	}
}

// BenchmarkAttentionFromMemory runs 16 decode rows over 1,000-token
// contexts with 12 KV heads of 64 (the shape of the 110M model the CPU
// comparison with llama.cpp uses), in an F32 and an F16 cache: 98 MB of
// float32 K/V, more than a server CPU's L3, so it streams from memory as a
// batched decode step does. SetBytes counts the K/V bytes each type reads.
func BenchmarkAttentionFromMemory(b *testing.B) {
	w := NewWorkers(0)
	defer w.Close()
	seqs := make([]seqShape, 16)
	for i := range seqs {
		seqs[i] = seqShape{1000, 1}
	}
	shape := attnCase{kvHeads: 12, group: 1, hd: 64, bs: 16, seqs: seqs}
	for _, typ := range []kernels.DType{kernels.F32, kernels.F16} {
		f := newTypedFixture(b, rand.New(rand.NewPCG(6, 6)), shape, typ, false)
		out := make([]float32, len(f.q))
		b.Run(typ.String(), func(b *testing.B) {
			var scratch AttnScratch
			b.ReportAllocs()
			b.SetBytes(int64(len(seqs) * 1001 * 2 * 12 * 64 * f.cache.elemBytes()))
			for b.Loop() {
				f.cache.Attention(w, 1, f.q, out, f.seqs, f.nHeads, &scratch)
			}
		})
	}
}

func BenchmarkKVCacheCopyBlocks(b *testing.B) {
	c, err := NewKVCache(KVConfig{Layers: 32, KVHeads: 8, HeadDim: 64, BlockSize: 16, NumBlocks: 64})
	if err != nil {
		b.Fatal(err)
	}
	copies := []blockstore.BlockCopy{{Src: 1, Dst: 2, Slots: 16}, {Src: 3, Dst: 4, Slots: 8}}
	b.ReportAllocs()
	b.SetBytes(int64(c.BlockBytes()) * 3 / 2)
	for b.Loop() {
		if err := c.CopyBlocks(copies); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAttentionModelShapes runs attention as the 110M model of the
// CPU comparison with llama.cpp does (12 KV heads of 64, no grouping,
// blocks of 16), in an F32 and an F16 cache: a batched decode step of 16
// sequences with contexts from 128 to 248 tokens (model's
// BenchmarkDecodeBatch16), and a 512-token prompt from the start
// (BenchmarkPrefill512).
func BenchmarkAttentionModelShapes(b *testing.B) {
	w := NewWorkers(0)
	defer w.Close()
	decode := make([]seqShape, 16)
	for i := range decode {
		decode[i] = seqShape{128 + 8*i, 1}
	}
	for _, tc := range []struct {
		name string
		seqs []seqShape
	}{
		{"decode_16seqs_ctx128-248", decode},
		{"prefill_512rows", []seqShape{{0, 512}}},
	} {
		shape := attnCase{kvHeads: 12, group: 1, hd: 64, bs: 16, seqs: tc.seqs}
		for _, typ := range []kernels.DType{kernels.F32, kernels.F16} {
			f := newTypedFixture(b, rand.New(rand.NewPCG(7, 7)), shape, typ, false)
			out := make([]float32, len(f.q))
			b.Run(tc.name+"/"+typ.String(), func(b *testing.B) {
				var scratch AttnScratch
				b.ReportAllocs()
				for b.Loop() {
					f.cache.Attention(w, 1, f.q, out, f.seqs, f.nHeads, &scratch)
				}
			})
		}
	}
}
