package eviction

import (
	"testing"
	"time"

	"github.com/prefixd/prefixd/kvcache"
)

// TestAdmitWithoutRoomRecordsNothing: an Admit the pool cannot make room
// for, however often it is retried, leaves the prefix as it was (hits,
// last use, deadline, pins) and samples no hit age; Peek never records
// anything; the Admit that succeeds counts once, with one sample per node
// and one per promoted block.
func TestAdmitWithoutRoomRecordsNothing(t *testing.T) {
	var samples [kvcache.NumTiers]int
	r := newRig(t, 8, true, func(c *Config) {
		c.Samples.HitAge = func(tier kvcache.Tier, _ time.Duration, _ int) { samples[tier]++ }
	})
	p := seqOf(1, 12) // 3 blocks
	r.serve("a", p[:8], Use{}, false)
	r.serve("a", p, Use{}, false)
	// Demote the last block: it is served by the host tier from now on.
	if err := r.m.Reclaim(6); err != nil {
		t.Fatal(err)
	}
	r.m.tiers[0].Wait()
	r.check()
	samples = [kvcache.NumTiers]int{} // the second serve's
	before := r.m.TopPrefixes(10)
	hog := r.pool.NewTable()
	if err := hog.Append(len(p)); err != nil { // takes 3 free blocks
		t.Fatal(err)
	}
	r.clk.Advance(time.Second)
	for range 5 {
		if got := r.m.Peek("a", p).Tokens; got[kvcache.TierDevice] != 8 || got[kvcache.TierHost] != 4 {
			t.Fatalf("Peek found %v", got)
		}
		hit, short := r.m.Admit(Admission{Namespace: "a", Tokens: p, Blocks: 8}, nil)
		if short == 0 || len(hit.Blocks) != 0 || hit.Handle.Node() != nil {
			t.Fatalf("an Admit without room returned %d blocks, short %d", len(hit.Blocks), short)
		}
		r.check()
		if err := r.m.CheckPins(nil); err != nil {
			t.Fatal(err)
		}
	}
	if after := r.m.TopPrefixes(10); len(after) != len(before) || after[0].Hits != before[0].Hits || !after[0].LastUsed.Equal(before[0].LastUsed) {
		t.Fatalf("failed Admits changed the prefix: %+v, was %+v", after, before)
	}
	if samples != [kvcache.NumTiers]int{} {
		t.Fatalf("failed Admits sampled hit ages %v", samples)
	}
	hog.Release()
	hit, short := r.m.Admit(Admission{Namespace: "a", Tokens: p, Blocks: 4}, nil)
	if short != 0 || hit.Tokens[kvcache.TierDevice] != 8 || hit.Tokens[kvcache.TierHost] != 4 {
		t.Fatalf("the admitted request hit %v (short %d)", hit.Tokens, short)
	}
	if samples != [kvcache.NumTiers]int{kvcache.TierDevice: 1, kvcache.TierHost: 1} {
		t.Fatalf("one admission sampled %v hit ages, want one per node and per promoted block", samples)
	}
	r.m.Release(hit.Handle)
	if top := r.m.TopPrefixes(1)[0]; top.Hits != before[0].Hits+1 {
		t.Fatalf("%d hits after one more admission, were %d", top.Hits, before[0].Hits)
	}
	r.check()
}
