//go:build unix

package engine

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/prefixd/prefixd/grammar"
	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/model"
)

// BenchmarkConstrainedDecode measures decode throughput with and without
// a JSON Schema constraint: 1 and 8 sequences of 96 tokens at temperature 1 on
// the built-in model, or on the model file PREFIXD_BENCH_MODEL names
// (with its own vocabulary). The schema is an unbounded array of strings
// and integers, so every sequence decodes its 96 tokens under the
// grammar. The vocabulary trie is built, and one constrained batch
// decoded (caching the masks of the states it meets, whose cold cost
// grammar's BenchmarkMask measures), before timing starts.
//
// Each iteration decodes the batch both ways, twice, in the order none,
// schema, schema, none, so the two share the machine's load and neither
// is always first: it reports each way's tokens/s and their ratio
// (schema / none) in wall time and in the process's CPU time (user +
// system), the steadier of the two on a shared machine.
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
	for _, seqs := range []int{1, 8} {
		b.Run(fmt.Sprintf("seqs=%d", seqs), func(b *testing.B) { benchDecodeBoth(b, m, c, prompt, seqs) })
	}
}

// benchDecodeBoth is BenchmarkConstrainedDecode for seqs sequences.
func benchDecodeBoth(b *testing.B, m *model.Model, c *grammar.Constraint, prompt []int32, seqs int) {
	w := cpu.NewWorkers(0)
	defer w.Close()
	e, err := New(Config{Model: model.NewRunner(m, w), EOS: -1, NumBlocks: 1024, BlockSize: 16,
		MaxRunning: 8, MaxBatchTokens: 512, PrefillChunk: 512, DisablePrefixCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(context.Background())
	decode := func(constrained bool) (tokens int, wall, cpu time.Duration) {
		var reqs []Request
		for i := range seqs {
			r := Request{Prompt: prompt, MaxTokens: 96, IgnoreEOS: true, Sampling: Sampling{Temperature: 1, Seed: uint64(i)}}
			if constrained {
				r.Constraint = c
			}
			reqs = append(reqs, r)
		}
		t0, c0 := time.Now(), processCPU(b)
		for _, st := range submitAll(b, e, reqs) {
			tokens += len(st.Result().Tokens)
		}
		return tokens, time.Since(t0), processCPU(b) - c0
	}
	decode(true)
	var tokens [2]int
	var wall, cpuTime [2]time.Duration
	for b.Loop() {
		for _, way := range []int{0, 1, 1, 0} { // 0: none, 1: schema
			n, wt, ct := decode(way == 1)
			tokens[way] += n
			wall[way] += wt
			cpuTime[way] += ct
		}
	}
	rate := func(way int, d time.Duration) float64 { return float64(tokens[way]) / d.Seconds() }
	b.ReportMetric(rate(0, wall[0]), "none-tokens/s")
	b.ReportMetric(rate(1, wall[1]), "schema-tokens/s")
	b.ReportMetric(rate(1, wall[1])/rate(0, wall[0]), "ratio-wall")
	b.ReportMetric(rate(1, cpuTime[1])/rate(0, cpuTime[0]), "ratio-cpu")
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(t testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
