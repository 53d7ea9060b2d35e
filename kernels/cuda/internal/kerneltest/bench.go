package kerneltest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/sample"
)

// BenchMemory is a device the decode-attention benchmark runs on: it
// copies between device buffers and waits for its work.
type BenchMemory interface {
	Memory
	// Copy copies n bytes between device addresses.
	Copy(dst, src launch.Ptr, n int) error
	// Synchronize waits for everything launched so far.
	Synchronize() error
}

// DecodeShape sizes DecodeAttention: Seqs sequences of Ctx cached tokens
// each decode one token, NHeads query heads over KVHeads K/V heads of
// HeadDim, in blocks of BlockSize; SMs sizes the automatic split (the
// device's multiprocessors) and Splits lists the others timed.
type DecodeShape struct {
	Seqs, Ctx, NHeads, KVHeads, HeadDim, BlockSize, SMs int
	Splits                                              []int
}

// DecodeAttention times one decode step's attention over sh in the
// device's element type (blocks in random order, queries and K/V zero:
// the timing does not depend on the values) at the automatic split and
// each of sh.Splits, and a device-to-device copy of the same bytes. Both
// report GB/s of memory traffic: K and V read for attention, read plus
// write for the copy. do runs a function on the device (the GPU's on its
// thread); the sub-benchmarks are attention/split=N (the kernel
// launch.AttentionKernel picks), attention-warp/split=N (attn, where
// that pick is attn_decode), attention-tc/split=N (attn_decode_tc, where
// that pick is attn_decode, the pool 16-bit and the shape one it takes)
// and copy.
func DecodeAttention(b *testing.B, sh DecodeShape, do func(func(BenchMemory) error) error) {
	lay := launch.KVLayout{Layers: 1, KVHeads: sh.KVHeads, HeadDim: sh.HeadDim, BlockSize: sh.BlockSize,
		NumBlocks: sh.Seqs * sh.Ctx / sh.BlockSize}
	// The workspace serves the finest split timed.
	shape := launch.Step{Rows: sh.Seqs, MaxPos: sh.Ctx - 1, KVWork: sh.Seqs * sh.Ctx}
	splits := append([]int{launch.ChooseSplit(shape, lay.KVHeads, sh.SMs)}, sh.Splits...)
	ws := 1
	for _, split := range splits {
		ws = max(ws, launch.AttnWorkspace(shape, lay, sh.NHeads, split))
	}
	bb := newAttnBench(b, lay, sh.Seqs, sh.Ctx-1, 1, sh.NHeads, ws, do)
	kvBytes := sh.Seqs * sh.Ctx * 2 * lay.KVDim() * bb.es
	for i, split := range splits {
		name := fmt.Sprintf("split=%d", split)
		if i == 0 {
			name = fmt.Sprintf("split=auto(%d)", split)
		}
		// The kernel Attention picks, then, where that is attn_decode,
		// attn (a warp per query head) and attn_decode_tc (tensor cores,
		// on 16-bit pools where it takes the shape) for comparison.
		kernel := launch.AttentionKernel(lay, bb.st, sh.NHeads, split, bb.es)
		for _, group := range []string{"attention", "attention-warp", "attention-tc"} {
			if group != "attention" && !strings.HasPrefix(kernel, "attn_decode") ||
				group == "attention-tc" && (bb.es != 2 || !launch.TensorCoreDecode(lay, sh.NHeads, split)) {
				continue
			}
			b.Run(group+"/"+name, func(b *testing.B) {
				a := launch.Attn{Q: bb.q, LDQ: sh.NHeads * lay.HeadDim, Out: bb.out, NHeads: sh.NHeads, Split: split, Partial: bb.part,
					Counts: bb.counts, Warp: group == "attention-warp", TensorCores: group == "attention-tc"}
				bb.time(b, float64(kvBytes)/1e9, "GB/s", func(m BenchMemory) error { return launch.Attention(m, bb.pool, lay, bb.st, a) })
			})
		}
	}
	b.Run("copy", func(b *testing.B) {
		bb.time(b, 2*float64(kvBytes)/1e9, "GB/s", func(m BenchMemory) error { return m.Copy(bb.copyDst, bb.pool, kvBytes) })
	})
}

// PrefillShape sizes PrefillAttention: Seqs prompts of Prompt tokens each,
// NHeads query heads over KVHeads K/V heads of HeadDim, in blocks of
// BlockSize.
type PrefillShape struct {
	Seqs, Prompt, NHeads, KVHeads, HeadDim, BlockSize int
}

// PrefillAttention times one prefill step's causal attention over sh in
// the device's element type (whole prompts from position 0, blocks in
// random order, zero queries and K/V) through the kernel
// launch.AttentionKernel picks (attention: attn_prefill on 16-bit
// devices) and through attn, a warp per query head (attention-warp), and
// reports TFLOP/s: 4·headDim multiply-adds per (query head, row, position
// it attends to), the causal half only.
func PrefillAttention(b *testing.B, sh PrefillShape, do func(func(BenchMemory) error) error) {
	lay := launch.KVLayout{Layers: 1, KVHeads: sh.KVHeads, HeadDim: sh.HeadDim, BlockSize: sh.BlockSize,
		NumBlocks: sh.Seqs * ((sh.Prompt + sh.BlockSize - 1) / sh.BlockSize)}
	bb := newAttnBench(b, lay, sh.Seqs, 0, sh.Prompt, sh.NHeads, 1, do)
	flops := 4 * float64(sh.HeadDim) * float64(sh.NHeads) * float64(sh.Seqs) * float64(sh.Prompt) * float64(sh.Prompt+1) / 2
	for _, warp := range []bool{false, true} {
		name := "attention"
		if warp {
			name = "attention-warp"
		}
		b.Run(name, func(b *testing.B) {
			a := launch.Attn{Q: bb.q, LDQ: sh.NHeads * lay.HeadDim, Out: bb.out, NHeads: sh.NHeads, Warp: warp}
			bb.time(b, flops/1e12, "TFLOP/s", func(m BenchMemory) error { return launch.Attention(m, bb.pool, lay, bb.st, a) })
		})
	}
}

// attnBench is a kernel benchmark's device state; for attention
// (newAttnBench), a step of seqs sequences of rows rows from position
// start, over lay's blocks in random order, with its pool, queries,
// output, a float32 workspace, the splits' counts and a copy
// destination the size of the pool's K/V.
type attnBench struct {
	do                                  func(func(BenchMemory) error) error
	es                                  int
	st                                  launch.Step
	pool, q, out, part, counts, copyDst launch.Ptr
}

func newAttnBench(b *testing.B, lay launch.KVLayout, seqs, start, rows, nHeads, workspace int, do func(func(BenchMemory) error) error) *attnBench {
	var sb launch.StepBuilder
	rng := rand.New(rand.NewPCG(5, 6))
	perm := rng.Perm(lay.NumBlocks)
	per := lay.NumBlocks / seqs
	for s := range seqs {
		table := make([]blockstore.BlockID, per)
		for i := range table {
			table[i] = blockstore.BlockID(perm[s*per+i])
		}
		if err := sb.Add(table, lay.BlockSize, start, rows); err != nil {
			b.Fatal(err)
		}
	}
	bb := &attnBench{do: do}
	bb.setup(b, func(m BenchMemory, alloc func(int) launch.Ptr) error {
		bb.es = m.DType().Size()
		kvBytes := int(lay.BlockElems()) * lay.NumBlocks * bb.es
		qBytes := 4 * sb.Rows() * nHeads * lay.HeadDim
		bb.pool = alloc(kvBytes)
		bb.copyDst = alloc(kvBytes)
		bb.q = alloc(qBytes)
		bb.out = alloc(sb.Rows() * nHeads * lay.HeadDim * bb.es)
		bb.part = alloc(4 * workspace)
		counts := 4 * sb.Rows() * lay.KVHeads // every split's, zeroed once: each launch leaves them zero
		bb.counts = alloc(counts)
		packed := alloc(4 * len(sb.Packed()))
		if packed == 0 || bb.q == 0 || bb.pool == 0 || bb.counts == 0 {
			return nil // setup reports the failed allocation
		}
		bb.st = sb.Step(packed)
		return errors.Join(m.Write(packed, int32Bytes(sb.Packed())), m.Write(bb.q, make([]byte, qBytes)), m.Write(bb.pool, make([]byte, kvBytes)),
			m.Write(bb.counts, make([]byte, counts)))
	})
	return bb
}

// setup runs f on the device with an alloc whose allocations are freed
// when b ends, and fails b if f or an allocation failed.
func (bb *attnBench) setup(b *testing.B, f func(m BenchMemory, alloc func(int) launch.Ptr) error) {
	var allocs []launch.Ptr
	err := bb.do(func(m BenchMemory) error {
		var err error
		alloc := func(n int) launch.Ptr {
			p, e := m.Alloc(n)
			err = errors.Join(err, e)
			if e == nil {
				allocs = append(allocs, p)
			}
			return p
		}
		return errors.Join(f(m, alloc), err)
	})
	b.Cleanup(func() {
		bb.do(func(m BenchMemory) error {
			for _, p := range allocs {
				m.Free(p)
			}
			return nil
		})
	})
	if err != nil {
		b.Fatal(err)
	}
}

// time runs step b.N times after one warm-up and reports work (in the
// unit's numerator) per second as unit.
func (bb *attnBench) time(b *testing.B, work float64, unit string, step func(m BenchMemory) error) {
	err := bb.do(func(m BenchMemory) error {
		if err := step(m); err != nil { // warm up
			return err
		}
		if err := m.Synchronize(); err != nil {
			return err
		}
		b.ResetTimer()
		for range b.N {
			if err := step(m); err != nil {
				return err
			}
		}
		err := m.Synchronize()
		b.StopTimer()
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(work*float64(b.N)/b.Elapsed().Seconds(), unit)
}

// SampleShape sizes DeviceSampling: Rows rows of Vocab logits.
type SampleShape struct{ Rows, Vocab int }

// DeviceSampling times sample_rows over sh at three settings (temperature
// alone, top-p 0.95, top-k 50 with top-p 0.9; random logits, a prompt's
// worth of penalty entries a row) beside what it saves: reading the
// logits back to the host (read-logits). The logits are restored before
// each launch (sample_rows overwrites them), by a device copy the
// sub-benchmarks include: copy-logits times it alone.
func DeviceSampling(b *testing.B, sh SampleShape, do func(func(BenchMemory) error) error) {
	rng := rand.New(rand.NewPCG(7, 8))
	logits := make([]float32, sh.Rows*sh.Vocab)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	n := 4 * len(logits)
	var src, work, out launch.Ptr
	bb := &attnBench{do: do}
	bb.setup(b, func(m BenchMemory, alloc func(int) launch.Ptr) error {
		src, work, out = alloc(n), alloc(n), alloc(4*sh.Rows)
		if src == 0 {
			return nil // setup reports the failed allocation
		}
		b := make([]byte, n)
		launch.Encode(launch.F32, b, logits)
		return m.Write(src, b)
	})
	var entries []sample.Entry
	for t := range 256 {
		entries = append(entries, sample.Entry{Token: int32(t * (sh.Vocab / 256)), Count: int32(t % 3), InPrompt: true})
	}
	for _, c := range []struct {
		name string
		r    launch.SampleRow
	}{
		{"temperature", launch.SampleRow{Draw: sample.Draw{Temperature: 0.8}}},
		{"top-p", launch.SampleRow{Draw: sample.Draw{Temperature: 0.8, TopP: 0.95, Repetition: 1.1, Entries: entries}}},
		{"top-k-top-p", launch.SampleRow{Draw: sample.Draw{Temperature: 0.8, TopK: 50, TopP: 0.9, Frequency: 0.5, Entries: entries}}},
	} {
		b.Run("sample/"+c.name, func(b *testing.B) {
			var sb launch.SampleBuilder
			for r := range sh.Rows {
				row := c.r
				row.Row, row.U = r, rng.Float64()
				if err := sb.Add(row, sh.Vocab); err != nil {
					b.Fatal(err)
				}
			}
			var packed launch.Ptr
			err := do(func(m BenchMemory) error {
				var err error
				if packed, err = m.Alloc(4 * len(sb.Packed())); err != nil {
					return err
				}
				return m.Write(packed, int32Bytes(sb.Packed()))
			})
			if err != nil {
				b.Fatal(err)
			}
			defer do(func(m BenchMemory) error { return m.Free(packed) })
			bb.time(b, float64(sh.Rows), "rows/s", func(m BenchMemory) error {
				return errors.Join(m.Copy(work, src, n), launch.Sample(m, out, work, packed, &sb, sh.Vocab))
			})
		})
	}
	b.Run("copy-logits", func(b *testing.B) {
		bb.time(b, float64(sh.Rows), "rows/s", func(m BenchMemory) error { return m.Copy(work, src, n) })
	})
	host := make([]byte, n)
	b.Run("read-logits", func(b *testing.B) {
		bb.time(b, float64(sh.Rows), "rows/s", func(m BenchMemory) error { return m.Read(host, src) })
	})
}
