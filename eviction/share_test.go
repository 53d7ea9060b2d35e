package eviction

import (
	"testing"
	"time"
)

// TestNamespaceShareEvictsTheGreedyFirst: tenant b caches a small prefix,
// then tenant a fills the rest of the pool. Under pressure plain LRU takes
// b's older prefix first; with a namespace share of half the pool, a,
// beyond its share, gives up its own blocks first, down to its share, and
// only then does eviction reach b.
func TestNamespaceShareEvictsTheGreedyFirst(t *testing.T) {
	for _, share := range []float64{0, 0.5} {
		r := newRig(t, 16, false, func(c *Config) { c.NamespaceShare = share })
		r.serve("b", seqOf(1, 8), Use{}, false) // 2 blocks
		r.clk.Advance(time.Second)
		for i := range int32(6) { // 12 blocks, each prompt its own leaf
			r.serve("a", seqOf(100+10*i, 8), Use{}, false)
		}
		r.clk.Advance(time.Second)
		if err := r.m.Reclaim(4); err != nil { // 2 are free
			t.Fatal(err)
		}
		r.check()
		a, b := r.m.tree.Stats("a").Blocks, r.m.tree.Stats("b").Blocks
		switch share {
		case 0:
			if b != 0 || a != 12 {
				t.Fatalf("without shares: a holds %d blocks, b %d; want LRU to take b's 2", a, b)
			}
		default:
			if b != 2 || a != 10 {
				t.Fatalf("with a share of 8 blocks: a holds %d blocks, b %d; want a's own 2 gone", a, b)
			}
		}
	}
}
