package eviction

import (
	"testing"
	"time"

	"github.com/prefixd/prefixd/radix"
)

// TestBreakpointTTLs: a Use's breakpoints keep the whole blocks of the
// prefixes they end for their TTLs, longer first, and the blocks after the
// last one for the Use's own TTL, whether the prompt is inserted at once
// or a running sequence grows its leaf block by block past them (the
// leaf is split at each breakpoint, and the blocks grown past one do not
// keep its TTL).
func TestBreakpointTTLs(t *testing.T) {
	use := Use{TTL: 10 * time.Second, Breakpoints: []Breakpoint{{Tokens: 9, TTL: 50 * time.Second}, {Tokens: 12, TTL: 30 * time.Second}}}
	p := seqOf(1, 16) // 4 blocks; the breakpoints end after blocks 2 and 3
	for _, grow := range []bool{false, true} {
		r := newRig(t, 16, false, nil)
		if grow {
			// A running sequence: one block, two, then the rest, growing
			// its own leaf in place.
			tb := r.pool.NewTable()
			if err := tb.Append(len(p)); err != nil {
				t.Fatal(err)
			}
			h := radix.Handle{}
			for _, n := range []int{1, 2, 4} { // the second ends at the first breakpoint
				var err error
				if _, h, err = r.m.Extend("a", h, p[:n*bs], tb.Blocks()[:n], use); err != nil {
					t.Fatal(err)
				}
				r.check()
			}
			r.m.Done(h, use)
			tb.Release()
		} else {
			r.serve("a", p, use, false)
		}
		r.check()
		elapsed := time.Duration(0)
		for _, step := range []struct {
			after  time.Duration
			cached int
		}{{9 * time.Second, 16}, {2 * time.Second, 12}, {20 * time.Second, 8}, {20 * time.Second, 0}} {
			r.clk.Advance(step.after)
			elapsed += step.after
			r.m.Sweep()
			r.check()
			if got := r.cached("a", p); got != step.cached {
				t.Fatalf("grow %v: %d tokens cached %v after the use, want %d", grow, got, elapsed, step.cached)
			}
		}
		if r.pool.NumFree() != 16 {
			t.Fatalf("grow %v: leak: %d free of 16", grow, r.pool.NumFree())
		}
	}
}

// TestBreakpointSpareOthers: a breakpoint never shortens what another
// request gave the blocks after it: a prefix cached with a long TTL keeps
// it when a request with a short TTL and a breakpoint before it reuses it.
func TestBreakpointSpareOthers(t *testing.T) {
	r := newRig(t, 16, false, nil)
	p := seqOf(1, 16)
	r.serve("a", p, Use{TTL: 40 * time.Second}, false)
	r.serve("a", p, Use{TTL: 5 * time.Second, Breakpoints: []Breakpoint{{Tokens: 4, TTL: 20 * time.Second}}}, false)
	r.clk.Advance(30 * time.Second)
	r.m.Sweep()
	r.check()
	if got := r.cached("a", p); got != 16 {
		t.Fatalf("%d tokens cached, want all 16 until the first request's TTL", got)
	}
}
