package quant

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/prefixd/prefixd/internal/mmap"
)

// benchOut×benchIn is a Llama-7B-sized projection (4096×4096). The
// mat-vec benchmark cycles through enough copies to fill benchSpan bytes,
// four times the 32 MiB L3 of the 2-core EPYC the issue measures on, so
// every call streams its weights from memory as decode does.
const (
	benchOut, benchIn = 4096, 4096
	benchThreads      = 2
	benchSpan         = 128 << 20
)

// BenchmarkMatVec reports the weight bytes streamed per second (MB/s) by
// one activation row times a benchOut×benchIn matrix of each type on
// benchThreads threads; set against BenchmarkMemBandwidth, it is how near
// decode gets to the memory bound.
func BenchmarkMatVec(b *testing.B) {
	pool := newTestPool(benchThreads)
	defer pool.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	x := randRow(rng, benchIn)
	dst := make([]float32, benchOut)
	for _, typ := range weightTypes {
		rs, _ := typ.RowSize(benchIn)
		size := benchOut * rs
		// Quantize 64 distinct rows and tile them: quantizing every row of
		// every copy would dominate the run, and the values do not change
		// the speed.
		tile := make([]byte, 64*rs)
		for o := range 64 {
			if err := Quantize(typ, tile[o*rs:(o+1)*rs], randRow(rng, benchIn)); err != nil {
				b.Fatal(err)
			}
		}
		copies := (benchSpan + size - 1) / size
		all := make([]byte, copies*size)
		for off := 0; off < len(all); off += len(tile) {
			copy(all[off:], tile)
		}
		all = resident(b, all)
		m := NewMultiplier(pool.For)
		benchLevels(b, typ.String(), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				w := all[i*size : (i+1)*size]
				if err := m.MatMul(dst, x, w, typ, 1, benchOut, benchIn); err != nil {
					b.Fatal(err)
				}
				i = (i + 1) % copies
			}
		})
		if typ != Q8_0 || !havePacked() {
			continue
		}
		// The packed copies, tiled as the row-major ones are.
		ptile := PackQ8_0(all[:size], benchOut, benchIn)
		pall := make([]byte, copies*len(ptile))
		for off := 0; off < len(pall); off += len(ptile) {
			copy(pall[off:], ptile)
		}
		b.Run("Q8_0/packed", func(b *testing.B) {
			b.SetBytes(int64(len(ptile)))
			i := 0
			for b.Loop() {
				p := Product{Dst: dst, W: all[i*size : (i+1)*size], Type: Q8_0, Out: benchOut,
					Packed: pall[i*len(ptile) : (i+1)*len(ptile)]}
				if err := m.MatMuls(x, 1, benchIn, p); err != nil {
					b.Fatal(err)
				}
				i = (i + 1) % copies
			}
		})
	}
}

// benchLevels runs f as name/avx2, with the AVX-512 single-row kernels
// off, and as name/avx512 where this CPU and build have them, so one run
// sets the two side by side.
func benchLevels(b *testing.B, name string, f func(*testing.B)) {
	saved := have512
	defer func() { have512 = saved }()
	have512 = false
	b.Run(name+"/avx2", f)
	if saved {
		have512 = true
		b.Run(name+"/avx512", f)
	}
}

// resident returns a read-only copy of data where model.Load puts a
// model's weights: in huge pages (mmap.Resident), which read faster than
// the heap's base pages. The copy lasts until b ends.
func resident(b *testing.B, data []byte) []byte {
	mem, release, err := mmap.Resident(data)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { release() })
	return mem
}

// BenchmarkMemBandwidth measures the read bandwidth (MB/s) on
// benchThreads threads: a sum of 64-bit words over benchSpan bytes, each
// thread reading its own half with four independent accumulators, so the
// loop is bound by memory, not by its adds. The words are read where
// model.Load puts weights (resident).
func BenchmarkMemBandwidth(b *testing.B) {
	pool := newTestPool(benchThreads)
	defer pool.Close()
	words := make([]byte, benchSpan)
	for i := range benchSpan / 8 {
		binary.LittleEndian.PutUint64(words[8*i:], uint64(i))
	}
	mem := resident(b, words)
	buf := unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), benchSpan/8)
	var sums [benchThreads]uint64 // one per part, so the sums are used
	const chunks = 1024
	b.SetBytes(benchSpan)
	for b.Loop() {
		pool.For(chunks, func(part, lo, hi int) {
			var s0, s1, s2, s3 uint64
			words := buf[lo*len(buf)/chunks : hi*len(buf)/chunks]
			for i := 0; i+4 <= len(words); i += 4 {
				s0 += words[i]
				s1 += words[i+1]
				s2 += words[i+2]
				s3 += words[i+3]
			}
			sums[part] += s0 + s1 + s2 + s3
		})
	}
}

// BenchmarkMatMulBatch multiplies 1, 2, 3, 4, 8 and 16 activation rows
// (batched decode) by one benchOut×benchIn matrix: rows/s at 16 against 1
// is how batched decode scales. name/avx2 runs F16's rows in pairs
// through the AVX2 two-row kernel, Q8_0's and the K-quants' four (Q8_0
// also eight) at a time, two K-quant rows through the two-row kernels and
// three as one four-row call; name/avx512 runs the quantized types' rows
// eight and four at a time.
func BenchmarkMatMulBatch(b *testing.B) {
	pool := newTestPool(benchThreads)
	defer pool.Close()
	rng := rand.New(rand.NewPCG(2, 2))
	for _, typ := range []Type{F16, Q8_0, Q4_K, Q6_K} {
		for _, rows := range []int{1, 2, 3, 4, 8, 16} {
			rs, _ := typ.RowSize(benchIn)
			w := make([]byte, benchOut*rs)
			row := make([]byte, rs)
			if err := Quantize(typ, row, randRow(rng, benchIn)); err != nil {
				b.Fatal(err)
			}
			for o := range benchOut {
				copy(w[o*rs:], row)
			}
			x, dst := randRow(rng, rows*benchIn), make([]float32, rows*benchOut)
			m := NewMultiplier(pool.For)
			benchLevels(b, fmt.Sprintf("%s/rows=%d", typ, rows), func(b *testing.B) {
				for b.Loop() {
					if err := m.MatMul(dst, x, w, typ, rows, benchOut, benchIn); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// BenchmarkMatVecSmall is one decode step's worth of the 110M
// model's projections (dim 768, hidden 2048: Q, K, V, O, gate, up and
// down) through MatMuls as a runner would call it, so the per-call costs
// (quantizing x, the parallel loop's hand-off) show beside the weight
// bytes, which fit in cache here.
func BenchmarkMatVecSmall(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, typ := range []Type{F16, Q8_0, Q4_K} {
		s := newSmallStep(b, rng, typ, 1)
		benchLevels(b, typ.String(), s.run)
	}
}

// BenchmarkMatMulBatchSmall is BenchmarkMatVecSmall for a decode batch
// of 16 sequences, whose rows go eight at a time through the eight-row
// kernels (name/avx512) or two at a time through the two-row ones
// (name/avx2): each of the model's weight rows is only 3 or 8 blocks, so
// the Go around each kernel call counts here as the kernels do.
func BenchmarkMatMulBatchSmall(b *testing.B) {
	rng := rand.New(rand.NewPCG(6, 6))
	for _, typ := range []Type{Q8_0, Q4_K, Q6_K} {
		s := newSmallStep(b, rng, typ, 16)
		benchLevels(b, typ.String(), s.run)
	}
}

// smallStep is one decode step of the 110M model's projections for
// BenchmarkMatVecSmall and BenchmarkMatMulBatchSmall.
type smallStep struct {
	qkv, gateUp []Product
	o, down     Product
	x, h        []float32 // rows×dim and rows×hidden activations
	rows, bytes int
	threads     int // 0: benchThreads
}

func newSmallStep(b *testing.B, rng *rand.Rand, typ Type, rows int) *smallStep {
	const dim, hidden = 768, 2048
	mk := func(out, in int) Product {
		return Product{Dst: make([]float32, rows*out), W: randWeights(b, rng, typ, out, in), Type: typ, Out: out}
	}
	s := &smallStep{rows: rows, x: randRow(rng, rows*dim), h: randRow(rng, rows*hidden)}
	s.qkv = []Product{mk(dim, dim), mk(dim, dim), mk(dim, dim)}
	s.o, s.gateUp, s.down = mk(dim, dim), []Product{mk(hidden, dim), mk(hidden, dim)}, mk(dim, hidden)
	for _, p := range append(append(s.qkv, s.o, s.down), s.gateUp...) {
		s.bytes += len(p.W)
	}
	return s
}

// pack packs the step's Q8_0 weights for the packed kernels.
func (s *smallStep) pack() {
	dim, hidden := len(s.x)/s.rows, len(s.h)/s.rows
	pack := func(p *Product, in int) { p.Packed = PackQ8_0(p.W, p.Out, in) }
	for i := range s.qkv {
		pack(&s.qkv[i], dim)
	}
	for i := range s.gateUp {
		pack(&s.gateUp[i], dim)
	}
	pack(&s.o, dim)
	pack(&s.down, hidden)
}

// run times the step on benchThreads threads; MB/s counts the weight
// bytes, read once per step for all the rows.
func (s *smallStep) run(b *testing.B) {
	var m *Multiplier
	if s.threads == 1 {
		m = NewMultiplier(nil)
	} else {
		pool := newTestPool(benchThreads)
		defer pool.Close()
		m = NewMultiplier(pool.For)
	}
	dim, hidden := len(s.x)/s.rows, len(s.h)/s.rows
	b.SetBytes(int64(s.bytes))
	cpu0 := cpuNanos()
	for b.Loop() {
		if m.MatMuls(s.x, s.rows, dim, s.qkv...) != nil || m.MatMuls(s.x, s.rows, dim, s.o) != nil ||
			m.MatMuls(s.x, s.rows, dim, s.gateUp...) != nil || m.MatMuls(s.h, s.rows, hidden, s.down) != nil {
			b.Fatal("MatMuls failed")
		}
	}
	b.ReportMetric(float64(s.rows*b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(cpuNanos()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkDotRows times the single-row kernels alone (dotRows, the
// decode path) on one thread over 64 weight rows of benchIn values, which
// stay in the L2 cache: MB/s of weights is the kernel's own speed, the
// bound that BenchmarkMatVec approaches when memory is not the limit.
func BenchmarkDotRows(b *testing.B) {
	rng := rand.New(rand.NewPCG(4, 4))
	const rows = 64
	x := randRow(rng, benchIn)
	dst := make([]float32, rows)
	for _, typ := range weightTypes {
		w, rs := randWeights(b, rng, typ, rows, benchIn), rowBytes(typ, benchIn)
		a := testActs(typ, x, 1, benchIn)
		ar := a.row(0, benchIn)
		benchLevels(b, typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				dotRows(typ, w, rs, &ar, dst)
			}
		})
	}
}

// BenchmarkDequantize decodes 64 rows of benchIn values of each type, as
// kernels/cpu does before its GEMM for prompts and batches, in Go or
// the AVX2 kernels of F16, BF16 and Q8_0 (name/avx2) and with the AVX-512
// kernels; MB/s counts the float32s written.
func BenchmarkDequantize(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 5))
	const rows = 64
	dst := make([]float32, benchIn)
	for _, typ := range weightTypes {
		w, rs := randWeights(b, rng, typ, rows, benchIn), rowBytes(typ, benchIn)
		benchLevels(b, typ.String(), func(b *testing.B) {
			b.SetBytes(4 * rows * benchIn)
			for b.Loop() {
				for o := range rows {
					if err := Dequantize(typ, dst, w[o*rs:(o+1)*rs]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// rowBytes is the size of a row of in values of type typ.
func rowBytes(typ Type, in int) int {
	rs, _ := typ.RowSize(in)
	return rs
}

// BenchmarkMatMulQuads times a prompt's worth of rows (64) times a
// 2048×768 weight (a 110M-class model's FFN, in L2 and L3) on one thread
// below AVX-512, through the two-row AVX2 kernels ("pairs"; Q8_0's
// single-row one) and the four-row ones that replace them ("quads";
// eight-row for Q8_0), side by side.
func BenchmarkMatMulQuads(b *testing.B) {
	const rows, out, in = 64, 2048, 768
	saved, saved4 := have512, have4AVX2
	defer func() { have512, have4AVX2 = saved, saved4 }()
	have512 = false
	rng := rand.New(rand.NewPCG(7, 7))
	x, dst := randRow(rng, rows*in), make([]float32, rows*out)
	for _, typ := range []Type{Q8_0, Q4_K, Q5_K, Q6_K} {
		w := randWeights(b, rng, typ, out, in)
		m := NewMultiplier(nil)
		for _, quads := range []bool{false, true} {
			name := map[bool]string{false: "pairs", true: "quads"}[quads]
			b.Run(typ.String()+"/"+name, func(b *testing.B) {
				have4AVX2 = quads && saved4
				for b.Loop() {
					if err := m.MatMul(dst, x, w, typ, rows, out, in); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2*float64(rows*out*in)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkMatMulVerify is BenchmarkMatVecSmall for one sequence's
// speculative verify row of 1 to 17 tokens (the next token and up to 16
// drafts) on one thread, the weights in cache: a step's time at R rows
// against its time at 1 is what a verify row of R tokens costs in
// single-token steps, the figure that bounds speculative decoding's gain.
func BenchmarkMatMulVerify(b *testing.B) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, rows := range []int{1, 2, 4, 5, 8, 9, 12, 16, 17} {
		s := newSmallStep(b, rng, Q8_0, rows)
		s.threads = 1
		benchLevels(b, fmt.Sprintf("Q8_0/rows=%d", rows), s.run)
		if havePacked() {
			s.pack()
			b.Run(fmt.Sprintf("Q8_0/rows=%d/packed", rows), s.run)
		}
	}
}
