package engine

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/model"
)

// BenchmarkSchedulerStep measures one scheduler iteration with 256
// sequences decoding, on a model that does no compute (hashModel writes 8
// bytes per position): retire, sweep, admit, plan, block appends, cache
// inserts as blocks fill, sampling, streaming (with text and a stop string
// in the text case). One op is one iteration.
func BenchmarkSchedulerStep(b *testing.B) {
	for _, bc := range stepCases {
		b.Run(bc.name, func(b *testing.B) {
			const running = 256
			sc, refill := steadyScheduler(b, running, bc)
			b.ReportAllocs()
			b.ResetTimer()
			steps := 0
			for b.Loop() {
				if len(sc.running) < running {
					b.StopTimer()
					refill()
					b.StartTimer()
				}
				sc.step()
				if steps++; steps%64 == 0 {
					b.StopTimer()
					drain(s0(sc))
					b.StartTimer()
				}
			}
		})
	}
}

// stepCases are the scheduler configurations BenchmarkSchedulerStep and
// TestSchedulerStepAllocatesNothing measure.
var stepCases = []stepCase{
	{"cache", true, false, false}, {"nocache", false, false, false}, {"cache+text", true, true, false},
	{"cache+sampled", true, false, true},
}

// stepCase is a steady scheduler's configuration: prefix cache on, text
// decoded (with a stop string), and sampling with penalties and logprobs
// instead of greedy decoding.
type stepCase struct {
	name                 string
	cache, text, sampled bool
}

// steadyScheduler builds an engine, without its goroutine, whose scheduler
// runs n long decoding sequences (4000 tokens each) of short, distinct
// prompts, admitted and past their prefill. refill tops it up to n running
// again and empties the streams.
func steadyScheduler(tb testing.TB, n int, c stepCase) (sc *scheduler, refill func()) {
	tb.Helper()
	cfg := Config{
		Model: newHashModel(32, 1<<20), EOS: -1, NumBlocks: 1 << 16, BlockSize: 16,
		MaxRunning: n, MaxBatchTokens: 4096, DisablePrefixCache: !c.cache,
	}
	var stops []string
	if c.text {
		cfg.Tokenizer, stops = byteTokenizer{}, []string{"\n\n"} // never produced
	}
	e, err := build(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	sc = &e.sched
	made := 0
	refill = func() {
		for len(sc.running)+len(sc.waiting) < n {
			made++
			req := &Request{Namespace: "b", Prompt: []int32{int32(made % 32), int32(made / 32 % 32), 1, 2}, MaxTokens: 4000, IgnoreEOS: true, StopStrings: stops}
			if c.sampled {
				req.Sampling = Sampling{Temperature: 0.8, TopP: 0.9, FrequencyPenalty: 0.5, RepetitionPenalty: 1.1,
					LogitBias: map[int32]float32{3: 1}, Seed: uint64(made)}
				req.Logprobs, req.TopLogprobs = true, 5
			}
			s, err := newSeq(e, req, 0, e.cfg.Clock.Now())
			if err != nil {
				tb.Fatal(err)
			}
			e.queued++
			sc.waiting = append(sc.waiting, s)
		}
		for len(sc.waiting) > 0 {
			sc.step()
		}
		drain(s0(sc))
	}
	refill()
	return sc, refill
}

// s0 returns the running sequences' streams.
func s0(sc *scheduler) []*Stream {
	out := make([]*Stream, 0, len(sc.running))
	for _, s := range sc.running {
		out = append(out, s.stream)
	}
	return out
}

// drain empties streams so their buffers do not grow without bound.
func drain(streams []*Stream) {
	for _, st := range streams {
		for len(st.tokens) > 0 {
			<-st.tokens
		}
	}
}

// BenchmarkSeedWorkload runs the seed workload (output lengths 32, 128, 64,
// 256 repeated; 64 requests) at batch widths 4 and 32, continuous vs
// static, and reports generated tokens/s and slot utilisation: useful
// token-steps / (width x iterations).
func BenchmarkSeedWorkload(b *testing.B) {
	lengths := []int{32, 128, 64, 256}
	for _, width := range []int{4, 32} {
		for _, mode := range []Batching{Continuous, Static} {
			name := map[Batching]string{Continuous: "continuous", Static: "static"}[mode]
			b.Run(name+"/width="+strconv.Itoa(width), func(b *testing.B) {
				var tokens, steps uint64
				for b.Loop() {
					e, err := New(Config{
						Model: newHashModel(32, 4096), EOS: -1, NumBlocks: 4096, BlockSize: 16,
						MaxRunning: width, MaxBatchTokens: 4096, Batching: mode,
					})
					if err != nil {
						b.Fatal(err)
					}
					var reqs []Request
					for i := range 64 {
						reqs = append(reqs, Request{Prompt: []int32{int32(i % 32), 3, 4, 5}, MaxTokens: lengths[i%4], IgnoreEOS: true})
					}
					for _, st := range submitAll(b, e, reqs) { // all at once, in order
						st.Result()
					}
					s := e.Stats()
					tokens += s.GeneratedTokens
					steps += s.Steps
					e.Close(context.Background())
				}
				b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
				b.ReportMetric(float64(tokens)/float64(uint64(width)*steps), "slot-util")
			})
		}
	}
}

// BenchmarkSharedPrefix runs 4 groups of 8 requests on the built-in model:
// each prompt is its group's 448-token system prompt plus a 32-token
// question (93% shared), 16 output tokens. Requests arrive at once,
// groups interleaved, 8 running at a time. It reports generated tokens/s,
// prompt tokens computed per request and time to first token, with the
// prefix cache on and off.
func BenchmarkSharedPrefix(b *testing.B) {
	const groups, perGroup, system, question, output = 4, 8, 448, 32, 16
	var reqs []Request
	for q := range perGroup {
		for g := range groups {
			p := make([]int32, 0, system+question)
			for i := range system {
				p = append(p, int32((g*131+i*7)%256))
			}
			for i := range question {
				p = append(p, int32((q*17+g*5+i*3)%256))
			}
			reqs = append(reqs, Request{Prompt: p, MaxTokens: output, IgnoreEOS: true})
		}
	}
	for _, cache := range []bool{true, false} {
		b.Run(map[bool]string{true: "cache=on", false: "cache=off"}[cache], func(b *testing.B) {
			w := cpu.NewWorkers(0)
			defer w.Close()
			var tokens, prefill uint64
			var ttft time.Duration
			for b.Loop() {
				e, err := New(Config{
					Model: model.NewRunner(model.Builtin(), w), EOS: -1, NumBlocks: 2048, BlockSize: 16,
					MaxRunning: 8, MaxBatchTokens: 512, PrefillChunk: 512, DisablePrefixCache: !cache,
				})
				if err != nil {
					b.Fatal(err)
				}
				for _, st := range submitAll(b, e, reqs) {
					ttft += st.Result().Timing.FirstToken
				}
				s := e.Stats()
				tokens += s.GeneratedTokens
				prefill += s.PrefillTokens
				e.Close(context.Background())
			}
			n := float64(b.N * len(reqs))
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
			b.ReportMetric(float64(prefill)/n, "prefill-tokens/req")
			b.ReportMetric(float64(ttft.Milliseconds())/n, "ttft-ms/req")
		})
	}
}
