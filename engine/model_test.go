package engine

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/model"
)

var _ Model = (*model.Runner)(nil)

// realEngine runs a real model.
func realEngine(t *testing.T, m *model.Model, mod func(*Config)) *Engine {
	t.Helper()
	w := cpu.NewWorkers(2)
	t.Cleanup(w.Close)
	return newTestEngine(t, model.NewRunner(m, w), func(c *Config) {
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
// built-in model: greedy outputs must be identical everywhere, and equal to
// each request run alone in the plainest mode.
func TestRealModelsAgreeAcrossModes(t *testing.T) {
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
			ref := realEngine(t, m, func(c *Config) {
				c.DisablePrefixCache, c.Batching, c.KVAlloc = true, Static, Contiguous
			})
			want := make([][]int32, len(reqs))
			for i, r := range reqs {
				want[i] = run(t, ref, r).Tokens
			}
			for _, mc := range modes {
				t.Run(mc.name, func(t *testing.T) {
					e := realEngine(t, m, mc.mod)
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
