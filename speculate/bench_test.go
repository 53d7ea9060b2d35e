package speculate

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// phrases returns n tokens of synthetic text that repeats: phrases of 8
// tokens drawn from a pool of 64, each followed by a random token of a
// 512-token vocabulary.
func phrases(seed uint64, n int) []int32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	pool := make([][]int32, 64)
	for i := range pool {
		for range 8 {
			pool[i] = append(pool[i], int32(rng.IntN(512)))
		}
	}
	var out []int32
	for len(out) < n {
		out = append(out, pool[rng.IntN(len(pool))]...)
		out = append(out, int32(rng.IntN(512)))
	}
	return out[:n]
}

// benchDrafter returns a drafter over a 2048-token prompt, with the text
// that follows it as the prediction if withPrediction; in Suffix mode its
// namespace holds 16 finished sequences of 1024 tokens of the same kind of
// text first.
func benchDrafter(tb testing.TB, mode Mode, withPrediction bool) (*Speculator, Drafter) {
	s := mustNew(tb, Config{Mode: mode, K: 8})
	for i := range 16 {
		s.Finished("ns", phrases(uint64(100+i), 1024))
	}
	text := phrases(1, 4096)
	var pred []int32
	if withPrediction {
		pred = text[2048:]
	}
	return s, s.NewDrafter("ns", text[:2048], pred)
}

var benchModes = []struct {
	name string
	mode Mode
	pred bool
}{{"prediction", Off, true}, {"ngram", Ngram, false}, {"suffix", Suffix, false}}

// BenchmarkDraft measures one Draft of up to 8 tokens with nothing new to
// index; BenchmarkStep one Accept of one token and the Draft after it,
// which indexes that token, in sequences of a 2048-token prompt and up to
// 4096 tokens of output: the drafter's cost per decoded token.
func BenchmarkDraft(b *testing.B) {
	for _, bm := range benchModes {
		b.Run(bm.name, func(b *testing.B) {
			_, d := benchDrafter(b, bm.mode, bm.pred)
			dst := make([]int32, 0, 8)
			d.Draft(dst, 8) // index the prompt
			drafted := 0
			b.ReportAllocs()
			for b.Loop() {
				out, _ := d.Draft(dst[:0], 8)
				drafted += len(out)
			}
			b.ReportMetric(float64(drafted)/float64(b.N), "tokens/op")
		})
	}
}

func BenchmarkStep(b *testing.B) {
	for _, bm := range benchModes {
		b.Run(bm.name, func(b *testing.B) {
			text := phrases(3, 4096)
			dst := make([]int32, 0, 8)
			var d Drafter
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%len(text) == 0 { // a new sequence every 4096 tokens, as long as real ones
					b.StopTimer()
					_, d = benchDrafter(b, bm.mode, bm.pred)
					d.Draft(dst, 8)
					b.StartTimer()
				}
				d.Accept(text[i%len(text) : i%len(text)+1])
				d.Draft(dst[:0], 8)
				i++
			}
		})
	}
}

// BenchmarkNewDrafter measures a drafter's set-up over a 2048-token prompt
// (and a 2048-token prediction): NewDrafter and the Drafts that index the
// prompt, reporting the time to the end of the first Draft too (the longest
// stall of the caller).
func BenchmarkNewDrafter(b *testing.B) {
	prompt, pred := phrases(1, 2048), phrases(7, 2048)
	for _, bm := range benchModes {
		b.Run(bm.name, func(b *testing.B) {
			s := mustNew(b, Config{Mode: bm.mode})
			var p []int32
			if bm.pred {
				p = pred
			}
			dst := make([]int32, 0, 8)
			var first time.Duration
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				d := s.NewDrafter("ns", prompt, p)
				d.Draft(dst[:0], 8)
				first += time.Since(t0)
				for range len(prompt) / indexChunk {
					d.Draft(dst[:0], 8)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(prompt)), "ns/token")
			b.ReportMetric(float64(first.Nanoseconds())/float64(b.N), "first-ns")
		})
	}
}

// BenchmarkFinished measures recording finished sequences of 512 tokens
// into a namespace at its quota, so that each evicts an older one, and
// reports the trie's size per token kept.
func BenchmarkFinished(b *testing.B) {
	for _, depth := range []int{8, 24} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			s := mustNew(b, Config{Mode: Suffix, MaxDepth: depth, MaxNamespaceTokens: 1 << 15})
			seqs := make([][]int32, 128)
			for i := range seqs {
				seqs[i] = phrases(uint64(i), 512)
			}
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for i := range 64 { // fill the quota
				s.Finished("ns", seqs[i])
			}
			var after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&after)
			st := s.Stats()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.Finished("ns", seqs[i%len(seqs)])
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*512), "ns/token")
			b.ReportMetric(float64(st.Nodes)/float64(st.Tokens), "nodes/token")
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(st.Tokens), "heapB/token")
		})
	}
}

// TestDraftAllocatesNothing pins the claim that drafting, the per-step
// path, allocates nothing once dst has room.
func TestDraftAllocatesNothing(t *testing.T) {
	for _, bm := range benchModes {
		_, d := benchDrafter(t, bm.mode, bm.pred)
		dst := make([]int32, 0, 8)
		if n := testing.AllocsPerRun(100, func() { d.Draft(dst[:0], 8) }); n != 0 {
			t.Errorf("%s: Draft allocates %v times", bm.name, n)
		}
		if out, _ := d.Draft(dst[:0], 8); len(out) == 0 {
			t.Errorf("%s: nothing drafted", bm.name)
		}
	}
	// A prediction the output has left, with no tail to resume at: every
	// Draft searches again.
	_, d := benchDrafter(t, Off, true)
	d.Accept([]int32{600, 601, 602})
	for range 3 {
		d.Draft(nil, 8) // index the prediction
	}
	if n := testing.AllocsPerRun(100, func() { d.Draft(nil, 8) }); n != 0 {
		t.Errorf("resynchronizing: Draft allocates %v times", n)
	}
}

// BenchmarkDraftBesideNamespace measures a Suffix Draft in namespace a
// while namespace b is empty and while b holds its whole quota of text:
// the times should be equal within noise, as a lookup reads a's trie alone.
func BenchmarkDraftBesideNamespace(b *testing.B) {
	for _, full := range []bool{false, true} {
		b.Run(fmt.Sprintf("b-full=%v", full), func(b *testing.B) {
			s, d := benchDrafter(b, Suffix, false)
			for i := 0; full && s.Stats().Tokens < 16*1024+DefaultMaxNamespaceTokens-1024; i++ {
				s.Finished("b", phrases(uint64(100+i%16), 1024)) // a's very text
			}
			dst := make([]int32, 0, 8)
			for b.Loop() {
				d.Draft(dst[:0], 8)
			}
		})
	}
}
