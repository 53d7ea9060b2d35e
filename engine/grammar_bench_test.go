package engine

import (
	"context"
	"os"
	"testing"

	"github.com/prefixd/prefixd/grammar"
	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/model"
)

// BenchmarkConstrainedDecode measures decode throughput with and without
// a JSON Schema constraint: 8 sequences of 96 tokens at temperature 1 on
// the built-in model, or on the model file PREFIXD_BENCH_MODEL names
// (with its own vocabulary). The schema is an unbounded array of strings
// and integers, so every sequence decodes its 96 tokens under the
// grammar; the vocabulary trie is built, and the masks of the first
// iteration cached, outside the timing that matters (b.Loop's warm-up).
func BenchmarkConstrainedDecode(b *testing.B) {
	m := model.Builtin()
	if path := os.Getenv("PREFIXD_BENCH_MODEL"); path != "" {
		var err error
		if m, err = model.Load(path); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { m.Close() })
	}
	if m.Tokenizer == nil {
		b.Skip("the model has no vocabulary")
	}
	g, err := grammar.CompileSchema([]byte(`{"type":"array","items":{"anyOf":[{"type":"string"},{"type":"integer"}]}}`), grammar.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	c := grammar.NewConstraint(g, grammar.NewVocab(m.Tokenizer, []int32{m.Config.EOS}))
	prompt := m.Tokenizer.Encode("A list of things:")
	for _, constrained := range []bool{false, true} {
		b.Run(map[bool]string{false: "schema=none", true: "schema=array"}[constrained], func(b *testing.B) {
			w := cpu.NewWorkers(0)
			defer w.Close()
			e, err := New(Config{Model: model.NewRunner(m, w), EOS: -1, NumBlocks: 1024, BlockSize: 16,
				MaxRunning: 8, MaxBatchTokens: 512, PrefillChunk: 512, DisablePrefixCache: true})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close(context.Background())
			var tokens int
			for b.Loop() {
				var reqs []Request
				for i := range 8 {
					r := Request{Prompt: prompt, MaxTokens: 96, IgnoreEOS: true,
						Sampling: Sampling{Temperature: 1, Seed: uint64(i)}}
					if constrained {
						r.Constraint = c
					}
					reqs = append(reqs, r)
				}
				for _, st := range submitAll(b, e, reqs) {
					tokens += len(st.Result().Tokens)
				}
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
