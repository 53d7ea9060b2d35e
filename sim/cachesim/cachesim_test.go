package cachesim

import (
	"testing"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/trace"
)

const bs = 4

// prompt returns n tokens from first on: prompts with different firsts
// share no block.
func prompt(first int32, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = first + int32(i)
	}
	return p
}

func newReplica(t *testing.T, c Config) *Replica {
	t.Helper()
	c.BlockSize = bs
	r, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// serve serves rec and checks the cache after it.
func serve(t *testing.T, r *Replica, rec trace.Record) {
	t.Helper()
	if err := r.Serve(&rec, rec.Tokens); err != nil {
		t.Fatal(err)
	}
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
}

// finish ends the earliest running request and checks the cache after it.
func finish(t *testing.T, r *Replica) {
	t.Helper()
	r.Finish()
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
}

func wantCounters(t *testing.T, r *Replica, want Counters) {
	t.Helper()
	if got := r.Counters(); got != want {
		t.Errorf("counters %+v, want %+v", got, want)
	}
}

// TestRepeatHits checks that a prompt served again hits the whole blocks
// of its first 9 tokens (its lookup leaves the last token out), while the
// first request still runs and after it finished; and that a cache-off
// request neither looks up nor caches.
func TestRepeatHits(t *testing.T) {
	r := newReplica(t, Config{Blocks: 16, TokenTime: 10 * time.Millisecond})
	p := prompt(100, 10) // 2 whole blocks and a partial one
	serve(t, r, trace.Record{Tokens: p, MaxTokens: 2})
	wantCounters(t, r, Counters{Requests: 1, QueryTokens: 9})
	// 10 prompt + 2 output tokens: 3 blocks, the first 2 also cached.
	if st := r.Stats(); st.Free != 13 || st.InUse != 3 {
		t.Errorf("while running: %+v, want 13 free, 3 in use", st)
	}
	serve(t, r, trace.Record{Tokens: p, OutputTokens: 6, MaxTokens: 64})
	wantCounters(t, r, Counters{Requests: 2, QueryTokens: 18, HitTokens: 8})
	// The hit shares 2 blocks; 10+6 tokens need 2 more of its own.
	if st := r.Stats(); st.Free != 11 || r.Running() != 2 {
		t.Errorf("two running: %+v, %d running, want 11 free, 2 running", st, r.Running())
	}
	if d, ok := r.NextDone(); !ok || d != 20*time.Millisecond {
		t.Errorf("NextDone = %v, %v, want 20ms (2 output tokens)", d, ok)
	}
	finish(t, r)
	if d, ok := r.NextDone(); r.Now() != 20*time.Millisecond || !ok || d != 60*time.Millisecond {
		t.Errorf("after the first finished: now %v, next done %v %v, want 20ms and 60ms (OutputTokens, not MaxTokens)", r.Now(), d, ok)
	}
	finish(t, r)
	if st := r.Stats(); st.Free != 14 || st.CachedOnly != 2 || r.Running() != 0 {
		t.Errorf("all finished: %+v, %d running, want the 2 prompt blocks cached", st, r.Running())
	}
	if _, ok := r.NextDone(); ok {
		t.Error("NextDone with nothing running")
	}
	serve(t, r, trace.Record{Tokens: p, MaxTokens: 1})
	wantCounters(t, r, Counters{Requests: 3, QueryTokens: 27, HitTokens: 16})
	finish(t, r)

	off := prompt(500, 10)
	serve(t, r, trace.Record{Tokens: off, MaxTokens: 1, CacheOff: true})
	finish(t, r)
	serve(t, r, trace.Record{Tokens: off, MaxTokens: 1})
	wantCounters(t, r, Counters{Requests: 5, QueryTokens: 36, HitTokens: 16})
}

// TestPressure checks that a request short of free blocks evicts the least
// recently used cached prompt, and that one that cannot fit even in an
// emptied pool is rejected without leaking a block.
func TestPressure(t *testing.T) {
	r := newReplica(t, Config{Blocks: 4})
	a, b := prompt(100, 8), prompt(200, 8)
	for _, p := range [][]int32{a, b} { // 8+4 tokens: 3 blocks, 2 left cached
		serve(t, r, trace.Record{Tokens: p, MaxTokens: 4})
		finish(t, r)
	}
	if st := r.Stats(); st.CachedOnly != 2 || st.Free != 2 {
		t.Fatalf("%+v, want only b's 2 blocks cached (a's made room for b)", st)
	}
	serve(t, r, trace.Record{Tokens: a, MaxTokens: 4})
	wantCounters(t, r, Counters{Requests: 3, QueryTokens: 21}) // b was evicted for a again: no hit
	if c := r.Manager().Counters(); c.Evicted[kvcache.ReasonLRU] != 4 {
		t.Errorf("LRU evictions %d blocks, want 4", c.Evicted[kvcache.ReasonLRU])
	}
	before := r.Stats()
	serve(t, r, trace.Record{Tokens: prompt(300, 20), MaxTokens: 4}) // 6 blocks > 4
	wantCounters(t, r, Counters{Requests: 4, QueryTokens: 40, Rejected: 1})
	if after := r.Stats(); after != before || r.Running() != 1 {
		t.Errorf("a rejection changed the pool: %+v, then %+v; %d running", before, after, r.Running())
	}
	finish(t, r)
	if st := r.Stats(); st.Free+st.CachedOnly != st.Total {
		t.Errorf("blocks leaked: %+v", st)
	}
}

// TestTTLExpiry checks that a finished prompt stays cached for its TTL on
// the fake clock, the default or the one its record names, and not longer.
func TestTTLExpiry(t *testing.T) {
	recs := []trace.Record{
		{Tokens: prompt(100, 8), MaxTokens: 1},
		{Tokens: prompt(200, 8), MaxTokens: 1, TTLms: 5000},
	}
	maxTTL := MaxTTL(time.Second, recs)
	if maxTTL != 5*time.Second {
		t.Fatalf("MaxTTL = %v, want the record's 5s", maxTTL)
	}
	r := newReplica(t, Config{Blocks: 16, TokenTime: 100 * time.Millisecond, DefaultTTL: time.Second, MaxTTL: maxTTL})
	for _, rec := range recs {
		serve(t, r, rec)
	}
	finish(t, r)
	finish(t, r) // both at 100ms
	// NextExpiry may name a deadline since moved later (1s, from the
	// lookup at 0), never one past the first real expiry.
	if d, ok := r.NextExpiry(); !ok || d <= r.Now() || d > 1100*time.Millisecond {
		t.Errorf("NextExpiry = %v, %v, want in (100ms, 1.1s]", d, ok)
	}
	steps := []struct {
		at     time.Duration
		cached int
	}{
		{1099 * time.Millisecond, 4},
		{1100 * time.Millisecond, 2}, // the default TTL ends
		{5099 * time.Millisecond, 2},
		{5100 * time.Millisecond, 0}, // the record's ends
	}
	for _, s := range steps {
		r.Advance(s.at)
		if got := r.Stats().CachedOnly; got != s.cached || r.Now() != s.at {
			t.Errorf("at %v (now %v): %d blocks cached, want %d", s.at, r.Now(), got, s.cached)
		}
	}
	if _, ok := r.NextExpiry(); ok {
		t.Error("NextExpiry with nothing cached")
	}
	if c := r.Manager().Counters(); c.Evicted[kvcache.ReasonTTL] != 4 {
		t.Errorf("TTL evictions %d blocks, want 4", c.Evicted[kvcache.ReasonTTL])
	}
}

// TestSharedClock checks that replicas on one clock move it once and share
// the time zero it had when they were made.
func TestSharedClock(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000_000, 0))
	a := newReplica(t, Config{Blocks: 4, Clock: clk})
	b := newReplica(t, Config{Blocks: 4, Clock: clk})
	a.Advance(2 * time.Second)
	b.Advance(time.Second) // already past: does not move the clock
	if a.Now() != 2*time.Second || b.Now() != 2*time.Second || clk.Now() != time.Unix(1_000_000_002, 0) {
		t.Errorf("now %v and %v, clock %v; want both 2s", a.Now(), b.Now(), clk.Now())
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{{}, {Blocks: 4, BlockSize: -1}, {Blocks: 4, TokenTime: -time.Second}} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	if r, err := New(Config{Blocks: 4}); err != nil || r.bs != blockstore.DefaultBlockSize || r.tokenTime != 20*time.Millisecond {
		t.Errorf("defaults: %v", err)
	}
}
