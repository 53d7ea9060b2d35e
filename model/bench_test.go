package model

import (
	"testing"

	"prefixd/blockstore"
)

// benchDecode measures batched decode on the built-in model: batch
// sequences, each with a 128-token context, advance one token per Forward.
func benchDecode(b *testing.B, batch int) {
	const ctx, blockSize = 128, 16
	m := Builtin()
	// Room for the context plus the positions the timed loop adds.
	perSeq := (m.Config.MaxSeqLen + blockSize - 1) / blockSize
	h := newHarness(b, m, batch*perSeq, blockSize)
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
			if tb.Len() == m.Config.MaxSeqLen {
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
