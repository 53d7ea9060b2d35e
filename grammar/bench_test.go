//go:build linux

package grammar_test

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/prefixd/prefixd/grammar"
)

// synthetic200k is Llama 3's vocabulary grown to 200,000 tokens with
// concatenations of random pairs of its tokens, the size of the largest
// vocabularies served (o200k-style).
type synthetic200k struct {
	base  vocabSource
	pairs [][2]int32
}

func (s *synthetic200k) VocabSize() int { return s.base.VocabSize() + len(s.pairs) }
func (s *synthetic200k) EOS() int32     { return s.base.EOS() }
func (s *synthetic200k) AppendPiece(dst []byte, id int32) []byte {
	n := int32(s.base.VocabSize())
	if id < n {
		return s.base.AppendPiece(dst, id)
	}
	p := s.pairs[id-n]
	return s.base.AppendPiece(s.base.AppendPiece(dst, p[0]), p[1])
}

func benchVocabs(b testing.TB) []struct {
	name string
	src  vocabSource
} {
	vs := testVocabs(b)
	var out []struct {
		name string
		src  vocabSource
	}
	for _, name := range []string{"llama2-32k", "llama3-128k"} {
		if v, ok := vs[name]; ok {
			out = append(out, struct {
				name string
				src  vocabSource
			}{name, v})
		}
	}
	if l3, ok := vs["llama3-128k"]; ok {
		rng := rand.New(rand.NewPCG(5, 5))
		s := &synthetic200k{base: l3}
		for s.VocabSize() < 200_000 {
			s.pairs = append(s.pairs, [2]int32{int32(rng.IntN(100_000)), int32(rng.IntN(100_000))})
		}
		out = append(out, struct {
			name string
			src  vocabSource
		}{"synthetic-200k", s})
	}
	return out
}

// trajectory walks random allowed tokens through g, preferring to end
// when it may, and returns the tokens.
func trajectory(c *grammar.Constraint, eos int32, seed uint64) []int32 {
	rng := rand.New(rand.NewPCG(seed, 0))
	m := c.NewMatcher()
	var toks []int32
	for len(toks) < 300 {
		ids := allowedIDs(m.Mask())
		id := ids[rng.IntN(len(ids))]
		if m.Allowed(eos) {
			id = eos
		}
		m.AcceptToken(id)
		toks = append(toks, id)
		if id == eos {
			break
		}
	}
	return toks
}

// threadCPU is the CPU time the calling thread has used: on a machine
// shared with other jobs it leaves out the time the thread waited for a
// core, which wall-clock percentiles of millisecond-long steps mostly
// measure there.
func threadCPU(b testing.TB) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

func pct(d []time.Duration, p float64) float64 {
	slices.Sort(d)
	return float64(d[int(p*float64(len(d)-1))].Nanoseconds()) / 1e3
}

// BenchmarkMask measures the per-token cost of constraining a nested
// schema at 32k, 128k and 200k vocabularies over seeded trajectories of
// random allowed tokens:
//   - cold-*: computing each step's full mask with an empty cache (the
//     first request with a new schema), in wall time and (cold-cpu-*) in
//     the thread's CPU time;
//   - step-*: a decode step as the engine runs it with a warm cache:
//     check a token sampled without the mask (uniformly, so usually
//     refused), and only when refused take the cached mask, then advance.
func BenchmarkMask(b *testing.B) {
	g, err := grammar.CompileSchema([]byte(nestedSchema), grammar.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	for _, bv := range benchVocabs(b) {
		b.Run(bv.name, func(b *testing.B) {
			v := grammar.NewVocab(bv.src, []int32{bv.src.EOS()})
			eos := bv.src.EOS()
			var trajs [][]int32
			for seed := range uint64(4) {
				trajs = append(trajs, trajectory(grammar.NewConstraint(g, v), eos, seed))
			}
			var cold, coldCPU, step []time.Duration
			rng := rand.New(rand.NewPCG(9, 9))
			runtime.LockOSThread() // threadCPU reads this thread's clock
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			for b.Loop() {
				c := grammar.NewConstraint(g, v)
				for _, tr := range trajs {
					m := c.NewMatcher()
					for _, id := range tr {
						t0, c0 := time.Now(), threadCPU(b)
						m.Mask()
						coldCPU = append(coldCPU, threadCPU(b)-c0)
						cold = append(cold, time.Since(t0))
						m.AcceptToken(id)
					}
				}
				for _, tr := range trajs {
					m := c.NewMatcher()
					for _, id := range tr {
						sampled := int32(rng.IntN(v.Size()))
						t0 := time.Now()
						if !m.Allowed(sampled) {
							m.Mask()
						}
						m.AcceptToken(id)
						step = append(step, time.Since(t0))
					}
				}
			}
			b.ReportMetric(pct(cold, 0.5), "cold-median-µs")
			b.ReportMetric(pct(cold, 0.99), "cold-p99-µs")
			b.ReportMetric(pct(coldCPU, 0.5), "cold-cpu-median-µs")
			b.ReportMetric(pct(coldCPU, 0.99), "cold-cpu-p99-µs")
			b.ReportMetric(pct(step, 0.5), "step-median-µs")
			b.ReportMetric(pct(step, 0.99), "step-p99-µs")
			b.ReportMetric(float64(v.Nodes()), "trie-nodes")
		})
	}
}

// BenchmarkCompileSchema measures compiling the nested schema.
func BenchmarkCompileSchema(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := grammar.CompileSchema([]byte(nestedSchema), grammar.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewVocab measures building the trie of Llama 3's vocabulary.
func BenchmarkNewVocab(b *testing.B) {
	tk, ok := testVocabs(b)["llama3-128k"]
	if !ok {
		b.Skip("no Llama 3 vocabulary")
	}
	b.ReportAllocs()
	for b.Loop() {
		grammar.NewVocab(tk, []int32{tk.EOS()})
	}
}
