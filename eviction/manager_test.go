package eviction

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/radix"
)

const bs = 4 // block size in these tests

type rig struct {
	t    testing.TB
	clk  *clock.Fake
	st   *blockstore.MemStorage
	pool *blockstore.Pool
	m    *Manager
	next byte
}

func newRig(t testing.TB, blocks int, host bool, mod func(*Config)) *rig {
	t.Helper()
	st, err := blockstore.NewMemStorage(blocks, bs, 2)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := blockstore.New(blockstore.Config{NumBlocks: blocks, BlockSize: bs, Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := radix.New(bs)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	cfg := Config{Tree: tree, Pool: pool, Clock: clk, DefaultTTL: 10 * time.Second, MaxTTL: time.Minute}
	if host {
		h, err := NewHostTier(HostTierConfig{CapacityBytes: 1 << 16, BlockBytes: st.BlockBytes()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Close)
		cfg.Tiers = []Tier{h}
	}
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, clk: clk, st: st, pool: pool, m: m, next: 1}
}

func (r *rig) check() {
	r.t.Helper()
	if err := r.m.Check(); err != nil {
		r.t.Fatal(err)
	}
}

// serve runs a request through the cache as the engine will: look up the
// prompt, adopt the hit, "prefill" the rest (writing distinct bytes),
// insert the full blocks, and finish. It returns the hit and the blocks
// the prompt ended in. If keep is set the prefix stays pinned and the
// handle is returned for the caller to Release.
func (r *rig) serve(ns string, prompt []int32, use Use, keep bool) (Hit, []blockstore.BlockID) {
	r.t.Helper()
	hit, _ := r.m.Admit(Admission{Namespace: ns, Tokens: prompt, Use: use}, nil)
	tb := r.pool.NewTable()
	if err := tb.Adopt(hit.Blocks); err != nil {
		r.t.Fatal(err)
	}
	start := tb.Len()
	if err := tb.Append(len(prompt) - start); err != nil {
		r.t.Fatal(err)
	}
	for pos := start; pos < len(prompt); pos++ {
		id, off := tb.Slot(pos)
		copy(r.st.Slot(id, off), []byte{byte(prompt[pos]), r.next})
		r.next++
	}
	full := len(prompt) / bs
	if _, err := r.m.Insert(ns, prompt[:full*bs], tb.Blocks()[:full], use); err != nil {
		r.t.Fatal(err)
	}
	blocks := slices.Clone(tb.Blocks())
	tb.Release()
	if !keep {
		r.m.Release(hit.Handle)
		hit.Handle = radix.Handle{}
	}
	r.check()
	return hit, blocks
}

// cached returns how many tokens of prompt the device tree holds, without
// refreshing anything.
func (r *rig) cached(ns string, prompt []int32) int {
	blocks, h := r.m.tree.Match(ns, prompt, nil)
	r.m.tree.Release(h)
	return len(blocks) * bs
}

func toks(vals ...int32) []int32 { return vals }

func seqOf(start, n int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = start + int32(i)
	}
	return out
}

func TestTTLRefreshedOnHit(t *testing.T) {
	r := newRig(t, 16, false, nil)
	p := seqOf(1, 8)
	r.serve("a", p, Use{TTL: 10 * time.Second}, false)
	r.clk.Advance(8 * time.Second)
	if hit, _ := r.serve("a", p, Use{TTL: 10 * time.Second}, false); hit.Tokens[kvcache.TierDevice] != 8 {
		t.Fatalf("second request hit %d tokens, want 8", hit.Tokens[kvcache.TierDevice])
	}
	r.clk.Advance(9500 * time.Millisecond) // 17.5s after the first use, 9.5s after the second
	if n := r.m.Sweep(); n != 0 || r.cached("a", p) != 8 {
		t.Fatalf("refreshed prefix swept: removed %d, cached %d", n, r.cached("a", p))
	}
	r.clk.Advance(500 * time.Millisecond) // exactly at the deadline
	if n := r.m.Sweep(); n != 2 || r.cached("a", p) != 0 {
		t.Fatalf("expired prefix: removed %d, cached %d; want 2 blocks gone", n, r.cached("a", p))
	}
	r.check()
	if got := r.m.Counters().Evicted[kvcache.ReasonTTL]; got != 2 {
		t.Fatalf("ttl evictions %d, want 2", got)
	}
	if r.pool.NumFree() != 16 {
		t.Fatalf("leak: %d free of 16", r.pool.NumFree())
	}
}

func TestTTLIsLatestOverRequests(t *testing.T) {
	r := newRig(t, 16, false, nil)
	p := seqOf(1, 4)
	r.serve("a", p, Use{TTL: 50 * time.Second}, false)
	r.clk.Advance(time.Second)
	r.serve("a", p, Use{TTL: 5 * time.Second}, false) // a shorter TTL never shortens
	r.clk.Advance(20 * time.Second)
	if r.m.Sweep(); r.cached("a", p) != 4 {
		t.Fatal("a later short-TTL use cut the earlier long TTL")
	}
}

func TestExpiryOrderAndCascade(t *testing.T) {
	r := newRig(t, 32, false, nil)
	sys := seqOf(100, 8)                        // shared system prompt, 2 blocks
	q1 := append(slices.Clone(sys), 1, 2, 3, 4) // 3 blocks
	q2 := append(slices.Clone(sys), 5, 6, 7, 8)
	other := seqOf(500, 4)
	r.serve("a", sys, Use{TTL: 30 * time.Second}, false)
	r.serve("a", q1, Use{TTL: 5 * time.Second}, false)
	r.serve("a", q2, Use{TTL: 10 * time.Second}, false)
	r.serve("a", other, Use{TTL: 20 * time.Second}, false)

	steps := []struct {
		advance time.Duration
		removed int
		cached  map[string]int
	}{
		{6 * time.Second, 1, map[string]int{"q1": 8, "q2": 12, "other": 4}},
		{5 * time.Second, 1, map[string]int{"q1": 8, "q2": 8, "other": 4}},
		{10 * time.Second, 1, map[string]int{"q1": 8, "q2": 8, "other": 0}},
		// The system prompt's own deadline (30s) came from its own request
		// and the questions refreshed it to at most 11s: it goes at 30s.
		{10 * time.Second, 2, map[string]int{"q1": 0, "q2": 0, "other": 0}},
	}
	prompts := map[string][]int32{"q1": q1, "q2": q2, "other": other}
	for i, s := range steps {
		r.clk.Advance(s.advance)
		if got := r.m.Sweep(); got != s.removed {
			t.Fatalf("step %d: swept %d blocks, want %d", i, got, s.removed)
		}
		for name, want := range s.cached {
			if got := r.cached("a", prompts[name]); got != want {
				t.Fatalf("step %d: %s cached %d tokens, want %d", i, name, got, want)
			}
		}
		r.check()
	}
	if _, ok := r.m.NextDeadline(); ok {
		t.Fatal("expiry heap not empty after everything expired")
	}
}

func TestPinnedByRequestSurvivesExpiry(t *testing.T) {
	r := newRig(t, 16, false, nil)
	p := seqOf(1, 8)
	r.serve("a", p, Use{}, false)
	hit, _ := r.serve("a", p, Use{}, true) // a long-running request holds it
	r.clk.Advance(time.Minute)
	if r.m.Sweep(); r.cached("a", p) != 8 {
		t.Fatal("a prefix pinned by a running request expired")
	}
	r.m.Release(hit.Handle)
	if r.cached("a", p) != 0 {
		t.Fatal("an expired prefix stayed after its last pin was released")
	}
	r.check()
}

func TestOperatorPins(t *testing.T) {
	r := newRig(t, 8, false, func(c *Config) { c.MaxPinnedFraction = 0.5 }) // budget 4 blocks
	sys := seqOf(1, 12)
	r.serve("a", sys, Use{}, false)
	if _, err := r.m.Pin("a", seqOf(1000, 4)); !errors.Is(err, kvcache.ErrNotCached) {
		t.Fatalf("pin of an uncached prefix: %v", err)
	}
	if _, err := r.m.Pin("b", sys); !errors.Is(err, kvcache.ErrNotCached) {
		t.Fatalf("pin in another namespace: %v", err)
	}
	if _, err := r.m.Pin("a", sys[:2]); !errors.Is(err, kvcache.ErrNotCached) {
		t.Fatalf("pin shorter than a block: %v", err)
	}
	info, err := r.m.Pin("a", sys[:9]) // two whole blocks; the partial one is ignored
	if err != nil || info.Tokens != 8 {
		t.Fatalf("Pin = %+v, %v", info, err)
	}
	r.check()
	if p, b := r.m.PinnedBlocks(); p != 2 || b != 4 {
		t.Fatalf("pinned %d budget %d, want 2 and 4", p, b)
	}
	other := seqOf(50, 12)
	r.serve("a", other, Use{}, false)
	if _, err := r.m.Pin("a", other); !errors.Is(err, kvcache.ErrPinBudget) {
		t.Fatalf("pin over budget: %v", err)
	}
	r.check()
	// Pinned blocks survive expiry and pressure; the rest goes.
	r.clk.Advance(time.Hour)
	r.m.Sweep()
	if err := r.m.Reclaim(8); !errors.Is(err, ErrNothingEvictable) {
		t.Fatalf("Reclaim of everything with a pin: %v", err)
	}
	if r.cached("a", sys) != 8 || r.cached("a", other) != 0 {
		t.Fatalf("after expiry: sys %d other %d cached, want 8 and 0", r.cached("a", sys), r.cached("a", other))
	}
	r.check()
	if !r.m.Unpin("a", sys[:8]) || r.m.Unpin("a", sys[:8]) {
		t.Fatal("Unpin should succeed once")
	}
	if r.cached("a", sys) != 0 || r.pool.NumFree() != 8 {
		t.Fatalf("expired prefix stayed after unpin: cached %d free %d", r.cached("a", sys), r.pool.NumFree())
	}
	r.check()
}

func TestPressureOrder(t *testing.T) {
	r := newRig(t, 12, false, nil)
	low1, low2, high := seqOf(10, 4), seqOf(20, 4), seqOf(30, 4)
	r.serve("a", high, Use{Priority: 5}, false)
	r.clk.Advance(time.Second)
	r.serve("a", low1, Use{}, false)
	r.clk.Advance(time.Second)
	r.serve("a", low2, Use{}, false)
	r.clk.Advance(time.Second)
	r.serve("a", low1, Use{}, false) // low1 now more recent than low2
	busy := r.pool.NewTable()
	if err := busy.Append(8 * bs); err != nil { // 8 of 12 blocks in use
		t.Fatal(err)
	}
	// Need 2 free: 1 is free, so one victim: the low-priority, least recent.
	if err := r.m.Reclaim(2); err != nil {
		t.Fatal(err)
	}
	if r.cached("a", low2) != 0 || r.cached("a", low1) != 4 || r.cached("a", high) != 4 {
		t.Fatalf("first victim wrong: low1 %d low2 %d high %d", r.cached("a", low1), r.cached("a", low2), r.cached("a", high))
	}
	if err := r.m.Reclaim(3); err != nil {
		t.Fatal(err)
	}
	if r.cached("a", low1) != 0 || r.cached("a", high) != 4 {
		t.Fatal("second victim should be low1, the other low-priority leaf")
	}
	if err := r.m.Reclaim(4); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Reclaim(5); !errors.Is(err, ErrNothingEvictable) {
		t.Fatalf("Reclaim past what is evictable: %v", err)
	}
	c := r.m.Counters()
	if c.Evicted[kvcache.ReasonPriority] != 2 || c.Evicted[kvcache.ReasonLRU] != 1 {
		t.Fatalf("evictions priority %d lru %d, want 2 and 1", c.Evicted[kvcache.ReasonPriority], c.Evicted[kvcache.ReasonLRU])
	}
	busy.Release()
	r.check()
}

func TestReclaimSparesBlocksInUse(t *testing.T) {
	r := newRig(t, 4, false, nil)
	p := seqOf(1, 8)
	hit, _ := r.serve("a", p, Use{}, false)
	_ = hit
	tb := r.pool.NewTable()
	h, _ := r.m.Admit(Admission{Namespace: "a", Tokens: p, Use: Use{}}, nil)
	if err := tb.Adopt(h.Blocks); err != nil {
		t.Fatal(err)
	}
	r.m.Release(h.Handle) // unpinned, but the table still reads the blocks
	if err := r.m.Reclaim(4); !errors.Is(err, ErrNothingEvictable) {
		t.Fatalf("Reclaim with every cached block in use: %v", err)
	}
	if r.cached("a", p) != 8 {
		t.Fatal("Reclaim dropped blocks a sequence still reads: nothing was freed by it")
	}
	tb.Release()
	if err := r.m.Reclaim(4); err != nil {
		t.Fatal(err)
	}
	r.check()
}

func TestFlushNamespace(t *testing.T) {
	r := newRig(t, 16, true, nil)
	p := seqOf(1, 8)
	r.serve("a", p, Use{}, false)
	r.serve("b", p, Use{}, false)
	if _, err := r.m.Pin("a", p); err != nil {
		t.Fatal(err)
	}
	if n := r.m.Flush("a", false); n != 2 {
		t.Fatalf("flush of a removed %d blocks, want 2", n)
	}
	if r.cached("a", p) != 0 || r.cached("b", p) != 8 {
		t.Fatalf("flush of a: a %d b %d cached", r.cached("a", p), r.cached("b", p))
	}
	if len(r.m.Pins()) != 0 {
		t.Fatal("flush kept the namespace's operator pin")
	}
	r.check()
	r.m.Flush("", true)
	if r.pool.NumFree() != 16 {
		t.Fatalf("flush all left %d of 16 free", r.pool.NumFree())
	}
	if got := r.m.Counters().Evicted[kvcache.ReasonFlush]; got != 4 {
		t.Fatalf("flush evictions %d, want 4", got)
	}
	r.check()
}

func TestNamespacesNeverShare(t *testing.T) {
	r := newRig(t, 16, true, nil)
	p := seqOf(1, 8)
	r.serve("a", p, Use{}, false)
	if err := r.m.Reclaim(16); err != nil { // demote a's blocks to the host tier
		t.Fatal(err)
	}
	r.m.tiers[0].Wait()
	if hit, _ := r.serve("b", p, Use{}, false); hit.Tokens[kvcache.TierDevice]+hit.Tokens[kvcache.TierHost] != 0 {
		t.Fatalf("tenant b hit tenant a's prefix: %+v", hit)
	}
}

func TestDemotePromoteRoundTrip(t *testing.T) {
	r := newRig(t, 8, true, nil)
	p := seqOf(1, 14) // 3 whole blocks and a partial one
	_, blocks := r.serve("a", p, Use{TTL: 30 * time.Second}, false)
	want := make([][]byte, 3)
	for i := range want {
		want[i] = make([]byte, r.st.BlockBytes())
		if err := r.st.ReadBlock(blocks[i], want[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.m.Reclaim(8); err != nil {
		t.Fatal(err)
	}
	r.m.tiers[0].Wait()
	if r.cached("a", p) != 0 || r.m.Counters().Demoted != 3 {
		t.Fatalf("after pressure: cached %d demoted %d, want 0 and 3", r.cached("a", p), r.m.Counters().Demoted)
	}
	// Scribble over the freed device blocks so stale bytes cannot pass.
	for id := range 8 {
		if err := r.st.WriteBlock(blockstore.BlockID(id), make([]byte, r.st.BlockBytes())); err != nil {
			t.Fatal(err)
		}
	}
	r.clk.Advance(5 * time.Second)
	hit, _ := r.m.Admit(Admission{Namespace: "a", Tokens: p, Use: Use{}}, nil)
	if hit.Tokens[kvcache.TierHost] != 12 || hit.Tokens[kvcache.TierDevice] != 0 || len(hit.Blocks) != 3 {
		t.Fatalf("promotion hit %+v, want 12 host tokens in 3 blocks", hit)
	}
	for i, id := range hit.Blocks {
		got := make([]byte, r.st.BlockBytes())
		if err := r.st.ReadBlock(id, got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want[i]) {
			t.Fatalf("promoted block %d bytes %v, want %v", i, got, want[i])
		}
	}
	r.check()
	r.m.Release(hit.Handle)
	if r.cached("a", p) != 12 || r.m.Counters().Promoted != 3 {
		t.Fatalf("promoted blocks not back in the tree: cached %d", r.cached("a", p))
	}
	// A second lookup is a device hit now.
	hit, _ = r.serve("a", p, Use{}, false)
	if hit.Tokens[kvcache.TierDevice] != 12 {
		t.Fatalf("after promotion, device hit %d, want 12", hit.Tokens[kvcache.TierDevice])
	}
}

func TestPromotionSurvivesKeyCollisions(t *testing.T) {
	r := newRig(t, 8, true, nil)
	r.m.tiers[0].(*HostTier).key = func(kvcache.Fingerprint) uint64 { return 7 } // every block on one key
	a := toks(1, 2, 3, 4)
	b := toks(9, 9, 9, 9)
	r.serve("a", a, Use{}, false)
	if err := r.m.Reclaim(8); err != nil {
		t.Fatal(err)
	}
	r.m.tiers[0].Wait()
	if hit, _ := r.serve("a", b, Use{}, false); hit.Tokens[kvcache.TierHost] != 0 {
		t.Fatalf("a colliding key served block a for prompt b: %+v", hit)
	}
	r.check()
}

func TestTTLValidationAndLiveTuning(t *testing.T) {
	r := newRig(t, 8, false, nil)
	for _, tc := range []struct {
		in   time.Duration
		want time.Duration
		ok   bool
	}{
		{0, 10 * time.Second, true},
		{time.Second, time.Second, true},
		{time.Minute, time.Minute, true},
		{time.Minute + 1, 0, false},
		{-time.Second, 0, false},
	} {
		got, err := r.m.ResolveTTL(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ResolveTTL(%v) = %v, %v", tc.in, got, err)
		}
		if err != nil && !errors.Is(err, kvcache.ErrBadTTL) {
			t.Errorf("ResolveTTL(%v) error %v is not kvcache.ErrBadTTL", tc.in, err)
		}
	}
	// A use over the maximum (lowered after the request was accepted) is
	// cut to it.
	r.serve("a", seqOf(1, 4), Use{TTL: time.Hour}, false)
	r.clk.Advance(time.Minute + time.Second)
	if r.m.Sweep(); r.cached("a", seqOf(1, 4)) != 0 {
		t.Fatal("a prefix used with a TTL over the maximum outlived the maximum")
	}
	if err := r.m.SetTTLs(time.Hour, time.Minute); err == nil {
		t.Fatal("default above max accepted")
	}
	if err := r.m.SetTTLs(time.Minute, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.m.ResolveTTL(0); got != time.Minute {
		t.Fatalf("default after SetTTLs = %v", got)
	}
}

func TestSamples(t *testing.T) {
	var ages []time.Duration
	var lifetimes []time.Duration
	r := newRig(t, 8, false, func(c *Config) {
		c.Samples.HitAge = func(_ kvcache.Tier, age time.Duration, _ int) { ages = append(ages, age) }
		c.Samples.BlockLifetime = func(d time.Duration, _ int) { lifetimes = append(lifetimes, d) }
	})
	p := seqOf(1, 4)
	r.serve("a", p, Use{}, false)
	r.clk.Advance(3 * time.Second)
	r.serve("a", p, Use{}, false)
	if len(ages) != 1 || ages[0] != 3*time.Second {
		t.Fatalf("hit ages %v, want [3s]", ages)
	}
	r.clk.Advance(4 * time.Second)
	r.m.Flush("", true)
	if len(lifetimes) != 1 || lifetimes[0] != 7*time.Second {
		t.Fatalf("lifetimes %v, want [7s]", lifetimes)
	}
}

// TestSplitNodeExpires checks that the upper half of a node split by a
// shorter prompt is swept by its own deadline: the split must not leave it
// marked as queued with no entry in the expiry heap.
func TestSplitNodeExpires(t *testing.T) {
	r := newRig(t, 16, false, nil)
	long := seqOf(7, 8) // 2 blocks in one node
	r.serve("a", long, Use{TTL: 5 * time.Second}, false)
	r.clk.Advance(time.Second)
	r.serve("a", long[:4], Use{TTL: 10 * time.Second}, false) // splits it
	r.clk.Advance(5 * time.Second)
	if got := r.m.Sweep(); got != 1 {
		t.Fatalf("swept %d blocks at 6s, want the lower block", got)
	}
	r.clk.Advance(5 * time.Second)
	if got := r.m.Sweep(); got != 1 {
		t.Fatalf("swept %d blocks at 11s, want the split-off upper block", got)
	}
	if got := r.cached("a", long); got != 0 {
		t.Fatalf("%d tokens still cached after every deadline", got)
	}
	r.check()
}
