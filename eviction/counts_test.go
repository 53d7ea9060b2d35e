package eviction

import (
	"math"
	"testing"
	"time"

	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/radix"
)

// TestHitsCountEachRequestOnce runs requests through the cache the way the
// engine does (Lookup at admission, Extend as blocks fill, Done at the
// end): each adds exactly one to the hits of every prefix it used.
func TestHitsCountEachRequestOnce(t *testing.T) {
	r := newRig(t, 16, false, nil)
	prompt := seqOf(1, 13) // 3 whole blocks
	for want := uint64(1); want <= 3; want++ {
		hit, _ := r.m.Admit(Admission{Namespace: "a", Tokens: prompt[:len(prompt)-1], Use: Use{}}, nil)
		tb := r.pool.NewTable()
		if err := tb.Adopt(hit.Blocks); err != nil {
			t.Fatal(err)
		}
		if err := tb.Append(len(prompt) - tb.Len()); err != nil {
			t.Fatal(err)
		}
		h := hit.Handle
		for full := len(hit.Blocks) + 1; full <= 3; full++ { // one Extend per filled block
			var err error
			if _, h, err = r.m.Extend("a", h, prompt[:full*bs], tb.Blocks()[:full], Use{}); err != nil {
				t.Fatal(err)
			}
		}
		r.m.Done(h, Use{})
		tb.Release()
		// A preempted request admitted again counts no second hit.
		again, _ := r.m.Admit(Admission{Namespace: "a", Tokens: prompt[:len(prompt)-1], Use: Use{Readmit: true}}, nil)
		r.m.Done(again.Handle, Use{Readmit: true})
		r.check()
		for _, p := range r.m.TopPrefixes(10) {
			if p.Hits != want {
				t.Fatalf("after %d requests a %d-token prefix has %d hits", want, len(p.Tokens), p.Hits)
			}
		}
	}
}

// TestFlushCountsExpiredPinnedBlocks pins a prefix until it is past its
// TTL, then flushes: the flush removes it and says so, as ReasonFlush.
func TestFlushCountsExpiredPinnedBlocks(t *testing.T) {
	r := newRig(t, 8, false, nil)
	sys := seqOf(1, 8)
	r.serve("a", sys, Use{}, false)
	if _, err := r.m.Pin("a", sys); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(time.Hour)
	r.m.Sweep()
	if got := r.m.Flush("a", false); got != 2 {
		t.Fatalf("Flush removed %d blocks by its count, want 2", got)
	}
	if c := r.m.Counters(); c.Evicted[kvcache.ReasonFlush] != 2 || c.Evicted[kvcache.ReasonTTL] != 0 {
		t.Fatalf("evictions flush %d ttl %d, want 2 and 0", c.Evicted[kvcache.ReasonFlush], c.Evicted[kvcache.ReasonTTL])
	}
	if r.pool.NumFree() != 8 {
		t.Fatalf("%d of 8 blocks free after the flush", r.pool.NumFree())
	}
	r.check()
}

// TestLongTTLsKeepCaching sets TTLs so long that now + TTL passes the
// largest time a deadline can hold: deadlines saturate instead of
// wrapping into the past, so the prefix stays cached.
func TestLongTTLsKeepCaching(t *testing.T) {
	for _, ttl := range []time.Duration{2100000 * time.Hour, math.MaxInt64} {
		r := newRig(t, 8, false, nil)
		if err := r.m.SetTTLs(ttl, ttl); err != nil {
			t.Fatal(err)
		}
		p := seqOf(1, 8)
		r.serve("a", p, Use{}, false)
		r.serve("a", p, Use{TTL: ttl}, false)
		r.clk.Advance(24 * time.Hour)
		r.m.Sweep()
		if got := r.cached("a", p); got != 8 {
			t.Fatalf("TTL %v: %d of 8 tokens cached a day later", ttl, got)
		}
		if at, ok := r.m.NextDeadline(); !ok || at.Before(r.clk.Now()) {
			t.Fatalf("TTL %v: next deadline %v, %v: in the past", ttl, at, ok)
		}
	}
}

// TestPriorityLastsForItsTTL: a use's priority protects a prefix for as
// long as that use's TTL, then the prefix falls back to the priority of its
// latest use, so one high-priority touch does not shield it for good.
func TestPriorityLastsForItsTTL(t *testing.T) {
	r := newRig(t, 12, false, nil) // TTLs: default 10s, max 1m
	vip, plain := seqOf(10, 4), seqOf(20, 4)
	r.serve("a", vip, Use{Priority: 5, TTL: 20 * time.Second}, false)
	r.clk.Advance(time.Second)
	r.serve("a", vip, Use{TTL: time.Minute}, false) // keeps it cached a minute at priority 0
	r.clk.Advance(time.Second)
	r.serve("a", plain, Use{TTL: time.Minute}, false) // more recent than vip
	busy := r.pool.NewTable()
	if err := busy.Append(10 * bs); err != nil { // 10 of 12 blocks in use
		t.Fatal(err)
	}
	defer busy.Release()
	// Within the priority-5 use's TTL, the plain prefix goes first.
	if err := r.m.Reclaim(1); err != nil {
		t.Fatal(err)
	}
	if r.cached("a", plain) != 0 || r.cached("a", vip) != 4 {
		t.Fatalf("within the high-priority TTL: plain %d vip %d cached", r.cached("a", plain), r.cached("a", vip))
	}
	r.serve("a", plain, Use{TTL: time.Minute}, false)
	r.clk.Advance(30 * time.Second) // the priority-5 use has lapsed; both are live
	if err := r.m.Reclaim(1); err != nil {
		t.Fatal(err)
	}
	if r.cached("a", vip) != 0 || r.cached("a", plain) != 4 {
		t.Fatalf("after the high-priority TTL: vip %d plain %d cached, want vip evicted (least recent, priority 0)",
			r.cached("a", vip), r.cached("a", plain))
	}
	if c := r.m.Counters(); c.Evicted[kvcache.ReasonPriority] != 1 || c.Evicted[kvcache.ReasonLRU] != 1 {
		t.Fatalf("evictions priority %d lru %d, want 1 and 1", c.Evicted[kvcache.ReasonPriority], c.Evicted[kvcache.ReasonLRU])
	}
	r.check()
}

// TestCheckPinsRecountsHandles checks CheckPins against the handles a
// caller holds: the right set passes, a missing or extra one fails.
func TestCheckPinsRecountsHandles(t *testing.T) {
	r := newRig(t, 16, false, nil)
	sys := seqOf(1, 12)
	r.serve("a", sys, Use{}, false)
	if _, err := r.m.Pin("a", sys[:4]); err != nil {
		t.Fatal(err)
	}
	hit, _ := r.m.Admit(Admission{Namespace: "a", Tokens: sys[:8], Use: Use{}}, nil)
	defer r.m.Release(hit.Handle)
	if err := r.m.CheckPins([]radix.Handle{hit.Handle}); err != nil {
		t.Fatal(err)
	}
	if err := r.m.CheckPins(nil); err == nil {
		t.Fatal("CheckPins missed a handle it was not told about")
	}
	if err := r.m.CheckPins([]radix.Handle{hit.Handle, hit.Handle}); err == nil {
		t.Fatal("CheckPins accepted a handle counted twice")
	}
}

// TestReasonsCoverEveryReason: Reasons lists each Reason once, in order,
// each with its own label.
func TestReasonsCoverEveryReason(t *testing.T) {
	seen := map[string]bool{}
	for i, r := range kvcache.Reasons() {
		if int(r) != i || r.String() == "" || seen[r.String()] {
			t.Fatalf("kvcache.Reasons()[%d] = %d %q", i, r, r.String())
		}
		seen[r.String()] = true
	}
	if len(seen) != int(kvcache.NumReasons) {
		t.Fatalf("kvcache.Reasons lists %d of %d", len(seen), kvcache.NumReasons)
	}
}
