package disktier

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/eviction"
)

// FuzzTier drives a tier through puts, gets, flushes, clock moves and
// restarts, and compares every answer with a naive model: a list of
// records in order of use, each with its expiry and the use time written
// in its file (what a restart reads back, in the order the scan finds the
// files). The index's checker runs after every step.
func FuzzTier(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 1, 1, 3, 0, 4, 0, 1, 2, 5, 0, 2, 7, 1, 0})
	f.Add([]byte{0, 0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 2, 2, 4, 0, 1, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const capRecords, ttl = 5, time.Hour
		dir := t.TempDir()
		clk := clock.NewFake(time.Unix(1_800_000_000, 0))
		_, _, data := block("a", 0)
		size := int64((&record{ns: "a", tokens: make([]int32, 4), data: data}).size())
		open := func() *Tier {
			d, err := New(Config{Dir: dir, CapacityBytes: capRecords * size, Model: model, Clock: clk, TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			d.WaitScan()
			return d
		}
		d := open()
		defer func() { d.Close() }()
		type key struct {
			ns string
			i  int
		}
		type rec struct {
			key
			expiry, written int64
		}
		var order []rec // most recent first
		find := func(k key) int { return slices.IndexFunc(order, func(r rec) bool { return r.key == k }) }
		front := func(at int) {
			r := order[at]
			order = slices.Insert(slices.Delete(order, at, at+1), 0, r)
		}
		keep := func(now int64) {
			for n := len(order); n > 0 && (n > capRecords || order[n-1].expiry <= now); n = len(order) {
				order = order[:n-1]
			}
		}
		for len(ops) >= 2 {
			op, arg := ops[0]%6, int(ops[1])
			ops = ops[2:]
			now := clk.Now().UnixNano()
			k := key{[]string{"a", "b"}[arg&1], arg >> 1 % 8}
			toks, fp, data := block(k.ns, k.i)
			switch op {
			case 0: // put
				if !d.Put(k.ns, fp, toks, eviction.StoredBlock{Data: data, Expires: now, LastUsed: now}, 0) {
					t.Fatal("a Put was dropped")
				}
				d.Wait()
				at := find(k)
				switch {
				case at >= 0 && order[at].expiry > now:
					order[at].expiry = max(order[at].expiry, now+int64(ttl))
				case at >= 0: // expired: rewritten
					order[at].expiry, order[at].written = max(order[at].expiry, now+int64(ttl)), now
				default:
					order = append(order, rec{k, now + int64(ttl), now})
					at = len(order) - 1
				}
				front(at)
				keep(now)
			case 1, 5: // get, has
				at := find(k)
				want := at >= 0 && order[at].expiry > now
				var got bool
				if op == 1 {
					var b eviction.StoredBlock
					if b, got = d.Get(k.ns, fp, toks, now); got && !slices.Equal(b.Data, data) {
						t.Fatalf("%v read back other bytes", k)
					}
					if got {
						order[at].expiry = max(order[at].expiry, now+int64(ttl))
						front(at)
					}
				} else {
					got = d.Has(k.ns, fp, toks, now)
				}
				if got != want {
					t.Fatalf("op %d of %v: %v, the model says %v", op, k, got, want)
				}
			case 2: // the clock moves
				clk.Advance(time.Duration(arg%4) * ttl / 3)
			case 3: // flush a namespace
				d.FlushNamespace(k.ns)
				order = slices.DeleteFunc(order, func(r rec) bool { return r.ns == k.ns })
			case 4: // restart: the scan finds the files in path order
				d.Close()
				d = open()
				for i := range order {
					order[i].expiry = order[i].written + int64(ttl)
				}
				order = slices.DeleteFunc(order, func(r rec) bool { return r.expiry <= now })
				slices.SortFunc(order, func(a, b rec) int {
					_, fa, _ := block(a.ns, a.i)
					_, fb, _ := block(b.ns, b.i)
					return strings.Compare(d.path(fa), d.path(fb))
				})
				keep(now)
			}
			if err := d.Check(); err != nil {
				t.Fatal(err)
			}
			if s := d.Stats(); s.Blocks != len(order) || s.Corrupt != 0 {
				t.Fatalf("the tier indexes %d records, the model %d (%+v)", s.Blocks, len(order), s)
			}
		}
	})
}
