package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/radix"
)

// TestValidatedRequestsRun sizes requests around a 32-block pool of 16-token
// blocks (512 tokens): every one Validate accepts runs to its length with
// the right output, alone on the engine, and every one it refuses gets
// ErrInvalid naming the pool's size, not operator pins.
func TestValidatedRequestsRun(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 4096), func(c *Config) {
		c.NumBlocks, c.BlockSize, c.MaxBatchTokens, c.PrefillChunk = 32, 16, 512, 512
	})
	ran := 0
	for n := 480; n <= 512; n++ {
		for _, maxTokens := range []int{1, 2, 14, 15, 16, 17, 32} {
			req := Request{Prompt: prompt(n, n), MaxTokens: maxTokens, IgnoreEOS: true}
			if err := e.Validate(&req); err != nil {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "the pool has 32") || strings.Contains(err.Error(), "pinned") {
					t.Fatalf("prompt %d + max_tokens %d: %v", n, maxTokens, err)
				}
				if blockstore.BlocksFor(n+maxTokens, 16) <= 32 {
					t.Fatalf("prompt %d + max_tokens %d fits 32 blocks of 16 but was refused: %v", n, maxTokens, err)
				}
				continue
			}
			res := run(t, e, req)
			if res.Finish != FinishLength {
				t.Fatalf("prompt %d + max_tokens %d: finish %q (%v)", n, maxTokens, res.Finish, res.Err)
			}
			if want := expectGreedy(testVocab, req.Prompt, maxTokens, -1); !slices.Equal(res.Tokens, want) {
				t.Fatalf("prompt %d + max_tokens %d: %v, want %v", n, maxTokens, res.Tokens, want)
			}
			ran++
		}
	}
	if ran == 0 {
		t.Fatal("no request was accepted")
	}
	checkDrained(t, e)
}

// TestOwnCachedBlocksMakeRoom caches a prompt and its output, then runs the
// same prompt with an output that needs 7 of the pool's 8 blocks: the
// blocks the first request cached past the matched prefix must not stand
// in the second's way, whether it generates the same tokens again (it
// shares the cached blocks) or others (they are evicted).
func TestOwnCachedBlocksMakeRoom(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sampling Sampling
	}{
		{"same output", Sampling{}},
		{"other output", Sampling{Temperature: 2, Seed: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEngine(t, newHashModel(testVocab, 4096), func(c *Config) {
				c.NumBlocks, c.BlockSize = 8, 16
			})
			p := prompt(3, 20)
			if res := run(t, e, Request{Prompt: p, MaxTokens: 30, IgnoreEOS: true}); res.Finish != FinishLength {
				t.Fatalf("first: finish %q (%v)", res.Finish, res.Err)
			}
			req := Request{Prompt: p, MaxTokens: 92, IgnoreEOS: true, Sampling: tc.sampling} // 112 tokens: 7 blocks
			res := run(t, e, req)
			if res.Finish != FinishLength || len(res.Tokens) != 92 {
				t.Fatalf("second: finish %q after %d tokens (%v)", res.Finish, len(res.Tokens), res.Err)
			}
			if res.Usage.CachedTokens != 16 {
				t.Fatalf("second: %d cached tokens, want the prompt's whole block", res.Usage.CachedTokens)
			}
			if tc.sampling.Temperature == 0 {
				if want := expectGreedy(testVocab, p, 92, -1); !slices.Equal(res.Tokens, want) {
					t.Fatalf("second: %v, want %v", res.Tokens, want)
				}
			}
			checkDrained(t, e)
		})
	}
}

// TestOneBlockPoolServes: the smallest pool, one block, serves every
// request that fits one block and refuses the rest at submission.
func TestOneBlockPoolServes(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 4096), func(c *Config) {
		c.NumBlocks, c.BlockSize = 1, 16
	})
	for range 2 { // the second run finds the first's prompt cached
		req := Request{Prompt: prompt(5, 3), MaxTokens: 13, IgnoreEOS: true}
		if res := run(t, e, req); res.Finish != FinishLength || !slices.Equal(res.Tokens, expectGreedy(testVocab, req.Prompt, 13, -1)) {
			t.Fatalf("finish %q (%v), tokens %v", res.Finish, res.Err, res.Tokens)
		}
	}
	_, err := e.Submit(context.Background(), Request{Prompt: prompt(5, 3), MaxTokens: 14})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "the pool has 1") {
		t.Fatalf("a request needing 2 blocks of a 1-block pool: %v", err)
	}
	checkDrained(t, e)
}

// TestLongTTLKeepsCaching sets a TTL long enough that now + TTL passes
// the largest time: the prefix stays cached all the same.
func TestLongTTLKeepsCaching(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 4096), nil)
	const long = 2100000 * time.Hour
	if err := e.SetTTLs(long, long); err != nil {
		t.Fatal(err)
	}
	req := Request{Prompt: prompt(8, 24), MaxTokens: 2, Cache: Cache{TTL: long}}
	run(t, e, req)
	top, err := e.Prefixes(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(top) != 1 || top[0].TTLLeft < 1000000*time.Hour {
		t.Fatalf("after the first run the cache holds %+v", top)
	}
	if res := run(t, e, req); res.Usage.CachedTokens != 20 {
		t.Fatalf("second run: %d cached tokens, want 20", res.Usage.CachedTokens)
	}
	checkDrained(t, e)
}

// TestHitsOnePerRequest: a prefix's hits count the requests that used it,
// one each.
func TestHitsOnePerRequest(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 4096), nil)
	req := Request{Prompt: prompt(9, 24), MaxTokens: 6, IgnoreEOS: true}
	for want := uint64(1); want <= 3; want++ {
		run(t, e, req)
		top, err := e.Prefixes(1)
		if err != nil {
			t.Fatal(err)
		}
		if len(top) != 1 || top[0].Hits != want {
			t.Fatalf("after %d requests: %+v", want, top)
		}
	}
}

// TestCheckRecountsHolders corrupts a running request's holdings behind the
// engine's back: Check, recounting block references from the tables and
// node pins from the sequences, finds each.
func TestCheckRecountsHolders(t *testing.T) {
	m := newHashModel(testVocab, 4096)
	e := newTestEngine(t, m, nil)
	req := Request{Prompt: prompt(10, 24), MaxTokens: 200, IgnoreEOS: true}
	run(t, e, Request{Prompt: req.Prompt, MaxTokens: 2, IgnoreEOS: true}) // cache the prompt
	m.gate = make(chan struct{})
	// onScheduler runs fn between two iterations, letting forward passes
	// through one at a time until it has: the request runs on meanwhile.
	onScheduler := func(fn func()) {
		ran := make(chan struct{})
		e.mu.Lock() // queued before the first pass is let through
		e.calls = append(e.calls, func() { fn(); close(ran) })
		e.mu.Unlock()
		e.poke()
		for {
			select {
			case <-ran:
				return
			case m.gate <- struct{}{}:
			}
		}
	}
	st, err := e.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	m.gate <- struct{}{} // it is running and holds a pinned prefix
	var block blockstore.BlockID
	var leaked radix.Handle
	for _, c := range []struct {
		name       string
		harm, undo func()
		want       string
	}{
		{"extra reference", func() { e.pool.Retain(block) }, func() { e.pool.Release(block) }, "references"},
		{"leaked pin", func() { _, leaked = e.tree.Match("", req.Prompt, nil) }, func() { e.tree.Release(leaked) }, "pins"},
	} {
		var clean, harmed error
		onScheduler(func() {
			block = e.sched.running[0].table.Blocks()[0]
			clean = e.check()
			c.harm()
			harmed = e.check()
			c.undo()
		})
		if clean != nil {
			t.Fatalf("%s: before: %v", c.name, clean)
		}
		if harmed == nil || !strings.Contains(harmed.Error(), c.want) {
			t.Errorf("%s: Check said %v", c.name, harmed)
		}
	}
	close(m.gate)
	if res := st.Result(); res.Finish != FinishLength {
		t.Fatalf("finish %q (%v)", res.Finish, res.Err)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	checkDrained(t, e)
}

// TestCacheWriteTokens: Usage.CacheWriteTokens counts the whole prompt
// blocks a request added to the prefix cache, none it found there, no
// output blocks, and nothing with the cache off.
func TestCacheWriteTokens(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 4096), nil)
	// 24 prompt tokens are 6 blocks of 4; 12 output tokens fill 3 more,
	// which the cache takes but the count leaves out.
	first := Request{Prompt: prompt(8, 24), MaxTokens: 12, IgnoreEOS: true}
	if res := run(t, e, first); res.Usage.CacheWriteTokens != 24 {
		t.Fatalf("cold run wrote %d tokens, want 24", res.Usage.CacheWriteTokens)
	}
	if res := run(t, e, first); res.Usage.CacheWriteTokens != 0 || res.Usage.CachedTokens != 20 {
		t.Fatalf("repeat wrote %d tokens (cached %d), want 0 (20)", res.Usage.CacheWriteTokens, res.Usage.CachedTokens)
	}
	// The first 16 tokens shared, 10 new: blocks 5 and 6 are new, the
	// last 2 tokens fill no block.
	p := append(prompt(8, 16), prompt(9, 10)...)
	if res := run(t, e, Request{Prompt: p, MaxTokens: 2}); res.Usage.CacheWriteTokens != 8 {
		t.Fatalf("a shared prefix plus 10 tokens wrote %d, want 8", res.Usage.CacheWriteTokens)
	}
	off := Request{Prompt: prompt(10, 24), MaxTokens: 2, Cache: Cache{Disabled: true}}
	if res := run(t, e, off); res.Usage.CacheWriteTokens != 0 {
		t.Fatalf("a request with the cache off wrote %d tokens", res.Usage.CacheWriteTokens)
	}
	checkDrained(t, e)
}

// TestCacheBreakpoints: a request's breakpoints keep the prefixes they
// end for their TTLs and the rest of the prompt for the request's own,
// and breakpoints out of order, too many, beyond the prompt or above the
// maximum TTL are refused.
func TestCacheBreakpoints(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 4096), nil)
	if err := e.SetTTLs(5*time.Minute, time.Hour); err != nil {
		t.Fatal(err)
	}
	p := prompt(8, 24) // 6 blocks of 4
	run(t, e, Request{Prompt: p, MaxTokens: 2, Cache: Cache{Breakpoints: []Breakpoint{{Tokens: 9, TTL: time.Hour}, {Tokens: 16, TTL: 30 * time.Minute}}}})
	top, err := e.Prefixes(10)
	if err != nil {
		t.Fatal(err)
	}
	left := map[int]time.Duration{}
	for _, pr := range top {
		left[len(pr.Tokens)] = pr.TTLLeft
	}
	if l := left[8]; l <= 30*time.Minute || l > time.Hour {
		t.Errorf("the first breakpoint's 8 tokens have %v left, want about 1h (prefixes %v)", l, left)
	}
	if l := left[16]; l <= 5*time.Minute || l > 30*time.Minute {
		t.Errorf("the second breakpoint's 16 tokens have %v left, want about 30m (prefixes %v)", l, left)
	}
	if l, ok := left[24]; !ok || l > 5*time.Minute {
		t.Errorf("the whole prompt has %v left (cached %v), want at most the default 5m (prefixes %v)", l, ok, left)
	}
	for _, bad := range [][]Breakpoint{
		{{4, time.Minute}, {8, time.Hour}},   // longer after shorter
		{{8, time.Minute}, {4, time.Minute}}, // out of order
		{{25, time.Minute}},                  // beyond the prompt
		{{4, 2 * time.Hour}},                 // above the maximum TTL
		{{4, 0}},                             // no TTL
		{{1, time.Hour}, {2, time.Hour}, {3, time.Hour}, {4, time.Hour}, {5, time.Hour}}, // too many
	} {
		_, err := e.Submit(context.Background(), Request{Prompt: p, MaxTokens: 2, Cache: Cache{Breakpoints: bad}})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "breakpoint") {
			t.Errorf("breakpoints %v: %v, want an invalid request", bad, err)
		}
	}
	checkDrained(t, e)
}
