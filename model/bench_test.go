package model

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels"
)

// benchModel is the model the benchmarks run: the GGUF file or folder
// PREFIXD_BENCH_MODEL names (scripts/cpu-vs-llamacpp.sh sets it to the
// files llama-bench reads), or the built-in model. The file is copied
// into huge pages as serve does (Load), or mapped, as serve --mmap
// does, with PREFIXD_BENCH_MMAP=1 (LoadMapped). Their K/V pool is F16,
// as serve's default, or float32 with PREFIXD_BENCH_KV=f32
// (benchHarness).
func benchModel(b *testing.B) *Model {
	path := os.Getenv("PREFIXD_BENCH_MODEL")
	if path == "" {
		return Builtin()
	}
	load := Load
	if os.Getenv("PREFIXD_BENCH_MMAP") == "1" {
		load = LoadMapped
	}
	m, err := load(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

// benchHarness is newHarness with the K/V element type
// PREFIXD_BENCH_KV names: f16 (the default when it is unset, as serve's)
// or f32, so one test binary measures both.
func benchHarness(b *testing.B, m *Model, blocks, blockSize int) *harness {
	typ := kernels.F16
	if s := os.Getenv("PREFIXD_BENCH_KV"); s != "" {
		var err error
		if typ, err = ParseKVType(s); err != nil {
			b.Fatalf("PREFIXD_BENCH_KV: %v", err)
		}
	}
	return newHarnessKV(b, m, blocks, blockSize, typ)
}

// benchToken is a token id for position i of a benchmark's text, valid in
// any vocabulary of 256 tokens or more.
func benchToken(i int) int32 { return int32(i * 7 % 256) }

// benchDecode measures batched decode: batch sequences advance one token
// per Forward, each over a context of ctx to 2·ctx−1 tokens (truncated
// back to ctx on reaching 2·ctx, so the figure does not drift with b.N).
func benchDecode(b *testing.B, batch, ctx int) {
	const blockSize = 16
	maxCtx := 2 * ctx
	m := benchModel(b)
	h := benchHarness(b, m, batch*maxCtx/blockSize, blockSize)
	tables := make([]*blockstore.Table, batch)
	prompt := make([]int32, ctx)
	for i := range prompt {
		prompt[i] = benchToken(i)
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
			toks[i] = benchToken(start + i)
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

func BenchmarkDecodeBatch1(b *testing.B)  { benchDecode(b, 1, 128) }
func BenchmarkDecodeBatch16(b *testing.B) { benchDecode(b, 16, 128) }
func BenchmarkDecodeBatch32(b *testing.B) { benchDecode(b, 32, 128) }

// BenchmarkDecodeCtx1k is one sequence decoding over a context of 1,024 to
// 2,047 tokens, where reading the K/V cache costs a decode step about as
// much as reading the weights of a small model.
func BenchmarkDecodeCtx1k(b *testing.B) { benchDecode(b, 1, 1024) }

// BenchmarkTG128 is llama-bench's tg128: 128 tokens decoded one at a
// time into a fresh sequence, from position 0.
func BenchmarkTG128(b *testing.B) {
	const n, blockSize = 128, 16
	h := benchHarness(b, benchModel(b), n/blockSize, blockSize)
	seq := []Seq{{Tokens: make([]int32, 1), Logits: true}}
	run := func() {
		tb := h.pool.NewTable()
		for i := range n {
			if err := tb.Append(1); err != nil {
				b.Fatal(err)
			}
			seq[0].Tokens[0], seq[0].Start, seq[0].Blocks = benchToken(i), i, tb.Blocks()
			if _, err := h.r.Forward(seq); err != nil {
				b.Fatal(err)
			}
		}
		tb.Release()
	}
	measure(b, n, run)
}

// measure runs run once to warm up, then in the benchmark's loop, and
// reports tokens/s for n tokens a run.
func measure(b *testing.B, n int, run func()) {
	run()
	b.ReportAllocs()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkPrefill512 measures prefilling a 512-token prompt into a fresh
// block table (llama-bench's pp512).
func BenchmarkPrefill512(b *testing.B) {
	const n, blockSize = 512, 16
	h := benchHarness(b, benchModel(b), n/blockSize, blockSize)
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = benchToken(i)
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
	measure(b, n, run)
}

// TestWriteBenchModels writes the random-weight GGUF files of the issue's
// CPU comparison with llama.cpp when PREFIXD_WRITE_BENCH_MODELS names a
// folder (scripts/cpu-vs-llamacpp.sh; skipped otherwise): a 110M Llama
// (dim 768, 12 layers of 12 heads, hidden 2048, vocabulary 32000, tied
// embeddings) as F16 and as Q8_0, and as F32 and BF16 for the batched
// comparison, with tokenizer metadata llama.cpp loads. llama-quantize
// makes the Q4_K_M file from the F16 one.
func TestWriteBenchModels(t *testing.T) {
	dir := os.Getenv("PREFIXD_WRITE_BENCH_MODELS")
	if dir == "" {
		t.Skip("PREFIXD_WRITE_BENCH_MODELS not set")
	}
	c := Config{Dim: 768, Hidden: 2048, Layers: 12, Heads: 12, KVHeads: 12, Vocab: 32000, MaxSeqLen: 2048,
		RopeTheta: 10000, NormEps: 1e-5, BOS: 1, EOS: 2, SharedClassifier: true}
	m := Random(c, 110)
	for _, f := range []struct {
		name string
		file ggufFile
	}{
		{"llama-110m-f16.gguf", ggufFile{arch: "llama", f16: true}},
		{"llama-110m-q8_0.gguf", ggufFile{arch: "llama", types: func(string) kernels.DType { return kernels.Q8_0 }}},
		{"llama-110m-f32.gguf", ggufFile{arch: "llama", types: func(string) kernels.DType { return kernels.F32 }}},
		{"llama-110m-bf16.gguf", ggufFile{arch: "llama", types: func(string) kernels.DType { return kernels.BF16 }}},
	} {
		f.file.extra = llamaCppVocab(c.Vocab)
		data := encodeGGUF(ggufMetaOf(m, f.file), ggufTensors(t, m, f.file))
		if err := os.WriteFile(filepath.Join(dir, f.name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
