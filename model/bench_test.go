package model

import (
	"testing"

	"github.com/prefixd/prefixd/blockstore"
)

// benchDecode measures batched decode on the built-in model: batch
// sequences advance one token per Forward, each over a context of 128 to
// 255 tokens (truncated back to 128 on reaching 256, so the figure does not
// drift with b.N).
func benchDecode(b *testing.B, batch int) {
	const ctx, maxCtx, blockSize = 128, 256, 16
	m := Builtin()
	h := newHarness(b, m, batch*maxCtx/blockSize, blockSize)
	tables := make([]*blockstore.Table, batch)
	prompt := make([]int32, ctx)
	for i := range prompt {
		prompt[i] = int32(i % 256)
	}
	for i := range tables {
		tables[i] = h.pool.NewTable()
		h.prefill(b, tables[i], prompt)
	}
	seqs := make([]Seq, batch)
	toks := make([]int32, batch)
	step := func() {
		for i, tb := range tables {
			if tb.Len() == maxCtx {
				tb.Truncate(ctx)
			}
			start := tb.Len()
			if err := tb.Append(1); err != nil {
				b.Fatal(err)
			}
			toks[i] = int32((start + i) % 256)
			seqs[i] = Seq{Tokens: toks[i : i+1], Start: start, Blocks: tb.Blocks(), Logits: true}
		}
		if _, err := h.r.Forward(seqs); err != nil {
			b.Fatal(err)
		}
	}
	step()
	b.ReportAllocs()
	for b.Loop() {
		step()
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "tokens/s")
}

func BenchmarkDecodeBatch1(b *testing.B)  { benchDecode(b, 1) }
func BenchmarkDecodeBatch32(b *testing.B) { benchDecode(b, 32) }

// BenchmarkPrefill512 measures prefilling a 512-token prompt into a fresh
// block table on the built-in model.
func BenchmarkPrefill512(b *testing.B) {
	const n, blockSize = 512, 16
	m := Builtin()
	h := newHarness(b, m, n/blockSize, blockSize)
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = int32(i * 7 % 256)
	}
	seq := []Seq{{Tokens: prompt, Logits: true}}
	run := func() {
		tb := h.pool.NewTable()
		if err := tb.Append(n); err != nil {
			b.Fatal(err)
		}
		seq[0].Blocks = tb.Blocks()
		if _, err := h.r.Forward(seq); err != nil {
			b.Fatal(err)
		}
		tb.Release()
	}
	run()
	b.ReportAllocs()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tokens/s")
}
