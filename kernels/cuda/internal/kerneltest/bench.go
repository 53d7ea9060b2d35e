package kerneltest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
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
// that pick is attn_decode) and copy.
func DecodeAttention(b *testing.B, sh DecodeShape, do func(func(BenchMemory) error) error) {
	lay := launch.KVLayout{Layers: 1, KVHeads: sh.KVHeads, HeadDim: sh.HeadDim, BlockSize: sh.BlockSize,
		NumBlocks: sh.Seqs * sh.Ctx / sh.BlockSize}
	var es int
	var sb launch.StepBuilder
	rng := rand.New(rand.NewPCG(5, 6))
	perm := rng.Perm(lay.NumBlocks)
	per := sh.Ctx / sh.BlockSize
	for s := range sh.Seqs {
		table := make([]blockstore.BlockID, per)
		for i := range table {
			table[i] = blockstore.BlockID(perm[s*per+i])
		}
		if err := sb.Add(table, sh.BlockSize, sh.Ctx-1, 1); err != nil {
			b.Fatal(err)
		}
	}
	// The workspace serves the finest split timed.
	shape := launch.Step{Rows: sh.Seqs, MaxPos: sh.Ctx - 1, KVWork: sh.Seqs * sh.Ctx}
	splits := append([]int{launch.ChooseSplit(shape, lay.KVHeads, sh.SMs)}, sh.Splits...)
	ws := 1
	for _, split := range splits {
		ws = max(ws, launch.AttnWorkspace(shape, lay, sh.NHeads, split))
	}
	var st launch.Step
	var pool, q, out, part, copyDst launch.Ptr
	var kvBytes int
	qBytes := 4 * sh.Seqs * sh.NHeads * sh.HeadDim
	var allocs []launch.Ptr
	err := do(func(m BenchMemory) error {
		es = m.DType().Size()
		kvBytes = sh.Seqs * sh.Ctx * 2 * lay.KVDim() * es
		var err error
		alloc := func(n int) launch.Ptr {
			p, e := m.Alloc(n)
			err = errors.Join(err, e)
			if e == nil {
				allocs = append(allocs, p)
			}
			return p
		}
		pool = alloc(int(lay.BlockElems()) * lay.NumBlocks * es)
		copyDst = alloc(kvBytes)
		q = alloc(qBytes)
		out = alloc(sh.Seqs * sh.NHeads * sh.HeadDim * es)
		part = alloc(4 * ws)
		packed := alloc(4 * len(sb.Packed()))
		if err != nil {
			return err
		}
		st = sb.Step(packed)
		return errors.Join(m.Write(packed, int32Bytes(sb.Packed())), m.Write(q, make([]byte, qBytes)), m.Write(pool, make([]byte, kvBytes)))
	})
	b.Cleanup(func() {
		do(func(m BenchMemory) error {
			for _, p := range allocs {
				m.Free(p)
			}
			return nil
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, bytes int, step func(m BenchMemory) error) {
		err := do(func(m BenchMemory) error {
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
		b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	}
	for i, split := range splits {
		name := fmt.Sprintf("split=%d", split)
		if i == 0 {
			name = fmt.Sprintf("split=auto(%d)", split)
		}
		// The kernel Attention picks, then, where that is attn_decode,
		// attn (a warp per query head) for comparison.
		kernel := launch.AttentionKernel(lay, st, sh.NHeads, split, es)
		for _, warp := range []bool{false, true} {
			if warp && !strings.HasPrefix(kernel, "attn_decode") {
				break
			}
			group := "attention"
			if warp {
				group = "attention-warp"
			}
			b.Run(group+"/"+name, func(b *testing.B) {
				a := launch.Attn{Q: q, LDQ: sh.NHeads * lay.HeadDim, Out: out, NHeads: sh.NHeads, Split: split, Partial: part, Warp: warp}
				run(b, kvBytes, func(m BenchMemory) error { return launch.Attention(m, pool, lay, st, a) })
			})
		}
	}
	b.Run("copy", func(b *testing.B) {
		run(b, 2*kvBytes, func(m BenchMemory) error { return m.Copy(copyDst, pool, kvBytes) })
	})
}
