package engine

import (
	"testing"
	"time"

	"github.com/prefixd/prefixd/kvcache"
)

// TestWaitingRequestCountsOnce holds a request whose cached prefix is
// found while the pool has no room for the rest of it: it waits through
// every step of a long-running request, looked up at each. Only its
// admission may count: the prefix gains exactly one hit and the hit-age
// histogram exactly one sample per node of the path, however many steps
// it waited. (Before the cache seam each look-up counted: 40 steps of
// waiting made 40 samples and 40 more hits.)
func TestWaitingRequestCountsOnce(t *testing.T) {
	var samples, sampledTokens int
	cfg := Config{
		Model: newHashModel(testVocab, 4096), EOS: -1, NumBlocks: 16, BlockSize: 4,
		MaxRunning: 4, KVAlloc: Contiguous,
		Samples: kvcache.Samples{HitAge: func(_ kvcache.Tier, _ time.Duration, tokens int) {
			samples++
			sampledTokens += tokens
		}},
	}
	e, err := build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sc := &e.sched
	submit := func(req Request) *seq {
		t.Helper()
		if err := e.Validate(&req); err != nil {
			t.Fatal(err)
		}
		s, err := newSeq(e, &req, 0, e.cfg.Clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		e.queued++
		sc.waiting = append(sc.waiting, s)
		return s
	}
	stepUntil := func(done func() bool) int {
		t.Helper()
		steps := 0
		for ; !done(); steps++ {
			if steps > 1000 {
				t.Fatal("no progress in 1000 steps")
			}
			sc.step()
			if err := e.check(); err != nil {
				t.Fatal(err)
			}
		}
		return steps
	}
	idle := func() bool { return len(sc.running) == 0 && len(sc.waiting) == 0 }

	sys := prompt(1, 12) // 3 whole blocks, cached by the first request
	submit(Request{Prompt: sys, MaxTokens: 1, IgnoreEOS: true})
	stepUntil(idle)
	if samples != 0 {
		t.Fatalf("a cold request sampled %d hit ages", samples)
	}
	// The hog reserves 12 of the 16 blocks for its whole length and runs
	// for 40 steps; 1 block is free and the cached prefix holds 3.
	submit(Request{Prompt: prompt(2, 8), MaxTokens: 40, IgnoreEOS: true})
	stepUntil(func() bool { return len(sc.running) == 1 })
	// The waiter needs 6 blocks, 3 of them cached: it cannot run until
	// the hog is done.
	waiter := submit(Request{Prompt: append(append([]int32{}, sys...), prompt(3, 4)...), MaxTokens: 8, IgnoreEOS: true})
	waited := stepUntil(func() bool { return waiter.everAdmitted })
	if waited < 10 {
		t.Fatalf("the waiter was admitted after %d steps: the test no longer makes it wait", waited)
	}
	if samples != 1 || sampledTokens != len(sys) {
		t.Fatalf("after waiting %d steps, the admission sampled %d hit ages over %d tokens, want 1 over %d",
			waited, samples, sampledTokens, len(sys))
	}
	if waiter.usage.CachedTokens != len(sys) {
		t.Fatalf("the waiter was served %d cached tokens, want %d", waiter.usage.CachedTokens, len(sys))
	}
	stepUntil(idle)
	for _, p := range e.cache.TopPrefixes(10) {
		if len(p.Tokens) == len(sys) && p.Hits != 2 {
			t.Fatalf("the shared prefix has %d hits after 2 requests used it (the waiter waited %d steps)", p.Hits, waited)
		}
	}
}
