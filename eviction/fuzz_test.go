package eviction

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/radix"
)

// FuzzManager drives random requests, expiries, pressure, flushes and pins
// through a Manager with a host tier, checking after every step that no
// block is lost or held twice (Check) and that every operator-pinned
// prefix is still cached; at the end everything must come back free.
func FuzzManager(f *testing.F) {
	f.Add([]byte{0, 1, 9, 0, 2, 9, 3, 0, 5, 1, 0, 0, 4, 0, 6})
	f.Add([]byte{0, 0, 40, 6, 0, 0, 0, 1, 41, 2, 0, 3, 5, 0, 1, 7, 0, 0, 0, 0, 40})
	f.Add([]byte{0, 2, 200, 0, 2, 100, 1, 0, 0, 3, 3, 0, 0, 2, 250, 4, 1, 0, 5, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		r := newRig(t, 24, true, func(c *Config) { c.MaxPinnedFraction = 0.25 })
		type pin struct {
			ns     string
			tokens []int32
		}
		var kept []radix.Handle
		var pins []pin
		nss := []string{"a", "b"}
		for i := 0; i+2 < len(ops); i += 3 {
			ns := nss[int(ops[i+1])%2]
			seed := int(ops[i+2])
			p := make([]int32, 1+seed%19)
			for j := range p {
				p[j] = int32((seed >> (j % 5)) % 3)
			}
			switch ops[i] % 8 {
			case 0, 1: // a request; some keep their prefix pinned
				hit, _ := r.m.Admit(Admission{Namespace: ns, Tokens: p, Use: Use{TTL: time.Duration(1+seed%20) * time.Second, Priority: int32(seed % 3)}}, nil)
				tb := r.pool.NewTable()
				if err := tb.Adopt(hit.Blocks); err != nil {
					t.Fatal(err)
				}
				rest := len(p) - tb.Len()
				if err := r.m.Reclaim(tb.BlocksNeeded(rest)); err == nil {
					if err := tb.Append(rest); err != nil {
						t.Fatal(err)
					}
					full := len(p) / bs
					if _, err := r.m.Insert(ns, p[:full*bs], tb.Blocks()[:full], Use{}); err != nil {
						t.Fatal(err)
					}
				} else if !errors.Is(err, ErrNothingEvictable) {
					t.Fatal(err)
				}
				tb.Release()
				if ops[i]%8 == 1 {
					kept = append(kept, hit.Handle)
				} else {
					r.m.Release(hit.Handle)
				}
			case 2: // a long-running request finishes
				if len(kept) > 0 {
					r.m.Release(kept[0])
					kept = kept[1:]
				}
			case 3: // time passes
				r.clk.Advance(time.Duration(seed) * 100 * time.Millisecond)
				r.m.Sweep()
				now := r.clk.Now().UnixNano()
				r.m.tree.Leaves(func(n *radix.Node) bool {
					if n.Pins() == 0 && n.Meta.Deadline <= now {
						t.Fatalf("step %d: an expired, unpinned leaf survived Sweep", i/3)
					}
					return true
				})
			case 4: // pressure
				if err := r.m.Reclaim(seed % 25); err != nil && !errors.Is(err, ErrNothingEvictable) {
					t.Fatal(err)
				}
				r.m.tiers[0].Wait()
			case 5: // flush
				r.m.Flush(ns, seed%4 == 0)
				for j := 0; j < len(pins); j++ {
					if seed%4 == 0 || pins[j].ns == ns {
						pins = append(pins[:j], pins[j+1:]...)
						j--
					}
				}
			case 6: // operator pin
				if _, err := r.m.Pin(ns, p); err == nil {
					np := pin{ns, p[:len(p)/bs*bs]}
					if !slices.ContainsFunc(pins, func(q pin) bool { return q.ns == np.ns && slices.Equal(q.tokens, np.tokens) }) {
						pins = append(pins, np) // pinning a pinned prefix again is a no-op
					}
				} else if !errors.Is(err, kvcache.ErrNotCached) && !errors.Is(err, kvcache.ErrPinBudget) {
					t.Fatal(err)
				}
			case 7: // operator unpin
				if len(pins) > 0 {
					if !r.m.Unpin(pins[0].ns, pins[0].tokens) {
						t.Fatal("Unpin of a live pin failed")
					}
					pins = pins[1:]
				}
			}
			if err := r.m.Check(); err != nil {
				t.Fatalf("step %d (op %d): %v", i/3, ops[i]%8, err)
			}
			for _, pn := range pins {
				if got := r.cached(pn.ns, pn.tokens); got != len(pn.tokens) {
					t.Fatalf("step %d: pinned prefix has %d of %d tokens cached", i/3, got, len(pn.tokens))
				}
			}
		}
		for _, h := range kept {
			r.m.Release(h)
		}
		r.m.Flush("", true)
		if err := r.m.Check(); err != nil {
			t.Fatal(err)
		}
		if r.pool.NumFree() != 24 {
			t.Fatalf("leak: %d of 24 blocks free after releasing everything", r.pool.NumFree())
		}
	})
}
