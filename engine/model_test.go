package engine

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/model"
)

var _ Model = (*model.Runner)(nil)

// realEngine runs a real model with float32 K/V.
func realEngine(t *testing.T, m *model.Model, mod func(*Config)) *Engine {
	t.Helper()
	return realEngineKV(t, m, kernels.F32, mod)
}

// realEngineKV is realEngine with K/V of element type kv.
func realEngineKV(t *testing.T, m *model.Model, kv kernels.DType, mod func(*Config)) *Engine {
	t.Helper()
	w := cpu.NewWorkers(2)
	t.Cleanup(w.Close)
	r := model.NewRunner(m, w)
	r.SetKVType(kv)
	return newTestEngine(t, r, func(c *Config) {
		c.EOS = -1
		c.NumBlocks = 512
		c.BlockSize = 8
		c.MaxBatchTokens = 96
		c.PrefillChunk = 24
		if mod != nil {
			mod(c)
		}
	})
}

// TestRealModelsAgreeAcrossModes runs the same requests, concurrently,
// through every batching, allocation and cache mode on stories260K and the
// built-in model, with float32 and with F16 K/V: greedy outputs must be
// identical in every mode, and equal to each request run alone in the
// plainest mode with the same K/V type.
func TestRealModelsAgreeAcrossModes(t *testing.T) {
	for _, kv := range []kernels.DType{kernels.F32, kernels.F16} {
		t.Run(kv.String(), func(t *testing.T) { testRealModelsAgreeAcrossModes(t, kv) })
	}
}

func testRealModelsAgreeAcrossModes(t *testing.T, kv kernels.DType) {
	for _, mc := range []struct {
		name string
		load func(t *testing.T) *model.Model
	}{
		{"builtin", func(*testing.T) *model.Model { return model.Builtin() }},
		{"stories260K", func(t *testing.T) *model.Model {
			m, err := model.Load(sharedModelPath(t, "stories260K.bin"))
			if err != nil {
				t.Fatal(err)
			}
			return m
		}},
	} {
		t.Run(mc.name, func(t *testing.T) {
			m := mc.load(t) // a missing stories260K skips its half alone
			system := make([]int32, 45)
			for i := range system {
				system[i] = int32(3 + (i*29)%200)
			}
			var reqs []Request
			for i := range 6 {
				p := append(slices.Clone(system), int32(10+i), int32(20+i*3), int32(7*i%100))
				if i == 5 {
					p = p[40:] // one unrelated prompt
				}
				reqs = append(reqs, Request{Namespace: "t", Prompt: p, MaxTokens: 12 + 5*i, IgnoreEOS: true})
			}
			// Reference: each request alone, no cache, static, contiguous.
			ref := realEngineKV(t, m, kv, func(c *Config) {
				c.DisablePrefixCache, c.Batching, c.KVAlloc = true, Static, Contiguous
			})
			want := make([][]int32, len(reqs))
			for i, r := range reqs {
				want[i] = run(t, ref, r).Tokens
			}
			for _, mc := range modes {
				t.Run(mc.name, func(t *testing.T) {
					e := realEngineKV(t, m, kv, mc.mod)
					for round := range 2 { // the second round hits the cache
						var wg sync.WaitGroup
						for i, r := range reqs {
							wg.Go(func() {
								if got := run(t, e, r).Tokens; !slices.Equal(got, want[i]) {
									t.Errorf("round %d request %d: %v, want %v", round, i, got, want[i])
								}
							})
						}
						wg.Wait()
					}
					if !mc.cacheOff() && e.Stats().CacheHitDevice == 0 {
						t.Error("the second round never hit the prefix cache")
					}
					checkDrained(t, e)
				})
			}
		})
	}
}

// TestRealModelF16HostTier evicts a cached prompt of a real model with F16
// K/V into the host tier and runs it again: its blocks come back from host
// memory (through ReadBlock and WriteBlock of the F16 cache) and the
// output matches the cold run's.
func TestRealModelF16HostTier(t *testing.T) {
	e := realEngineKV(t, model.Builtin(), kernels.F16, func(c *Config) {
		c.NumBlocks, c.HostTierBytes = 24, 1<<20
	})
	p := prompt(21, 81) // 10 whole blocks of 8
	cold := run(t, e, Request{Prompt: p, MaxTokens: 6, IgnoreEOS: true})
	pushToHost(t, e, 113)
	warm := run(t, e, Request{Prompt: p, MaxTokens: 6, IgnoreEOS: true})
	if warm.Usage.HostCachedTokens == 0 {
		t.Fatalf("usage %+v: want tokens promoted from the host tier", warm.Usage)
	}
	if !slices.Equal(warm.Tokens, cold.Tokens) {
		t.Fatalf("after promotion %v, cold %v", warm.Tokens, cold.Tokens)
	}
	checkDrained(t, e)
}

func TestRealModelBeamAndSampling(t *testing.T) {
	e := realEngine(t, model.Builtin(), nil)
	p := model.ByteTokenizer{}.Encode("Once upon a time")
	a := run(t, e, Request{Prompt: p, MaxTokens: 20, Sampling: Sampling{Temperature: 0.8, TopP: 0.9, Seed: 7}})
	b := run(t, e, Request{Prompt: p, MaxTokens: 20, Sampling: Sampling{Temperature: 0.8, TopP: 0.9, Seed: 7}})
	if !slices.Equal(a.Tokens, b.Tokens) {
		t.Fatalf("same seed, different output: %v vs %v", a.Tokens, b.Tokens)
	}
	beam := run(t, e, Request{Prompt: p, MaxTokens: 10, Beam: Beam{Width: 3, LengthPenalty: 1}})
	if len(beam.Tokens) == 0 {
		t.Fatal("beam search produced nothing")
	}
	if tm := beam.Timing; tm.FirstToken <= 0 || tm.FirstToken > tm.Total {
		t.Fatalf("beam timing %+v: its first token comes with the result", tm)
	}
	st, err := e.Submit(context.Background(), Request{Prompt: p, MaxTokens: 5})
	if err != nil {
		t.Fatal(err)
	}
	st.Result()
	checkDrained(t, e)
}
