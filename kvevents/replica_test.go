package kvevents_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/kvevents"
	"github.com/prefixd/prefixd/radix"
)

const (
	bs        = 4
	modelName = "m"
	pod       = "10.0.0.7:8000"
)

// ttlUnit is the workload's unit of TTLs and clock advances. The host
// tier bounds each entry by the rest of its TTL in real time too (ristretto
// expires by the wall clock, not the Manager's), and reports the expiry
// from its own goroutine whenever its cleaner runs: with TTLs of seconds, a
// test slowed to seconds by load or -race would see the tier drop entries
// that the fake clock still keeps, after the last batch was published. In
// hours no entry can expire while a test runs (go test stops one after 10
// minutes), so the tier changes only through the test's own operations.
const ttlUnit = time.Hour

// replica is a prefix cache as the engine keeps it (tree, pool with K/V
// storage, eviction manager, host tier) on a fake clock, with a publisher.
type replica struct {
	t    *testing.T
	clk  *clock.Fake
	pool *blockstore.Pool
	tree *radix.Tree
	host *eviction.HostTier
	m    *eviction.Manager
	pub  *kvevents.Publisher
}

func newReplica(t *testing.T, blocks int) *replica {
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
	host, err := eviction.NewHostTier(eviction.HostTierConfig{CapacityBytes: int64(blocks/2) * int64(st.BlockBytes()+4*bs), BlockBytes: st.BlockBytes()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(host.Close)
	clk := clock.NewFake(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	pub, err := kvevents.New(kvevents.Config{
		Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
		PodID: pod, Model: modelName, BlockSize: bs, Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pub.Close(); err != nil {
			t.Error(err)
		}
	})
	tree.SetObserver(pub)
	m, err := eviction.New(eviction.Config{Tree: tree, Pool: pool, Clock: clk, Tiers: []eviction.Tier{host}, Observer: pub,
		DefaultTTL: 20 * ttlUnit, MaxTTL: 60 * ttlUnit})
	if err != nil {
		t.Fatal(err)
	}
	return &replica{t: t, clk: clk, pool: pool, tree: tree, host: host, m: m, pub: pub}
}

// serve runs one request through the cache as the engine does: admit it
// (the cached prefix, and room for the rest, evicting under pressure),
// adopt the hit, allocate the rest, insert the full blocks, finish. It
// reports false when the pool could not make room.
func (r *replica) serve(ns string, prompt []int32, use eviction.Use) bool {
	r.t.Helper()
	hit, short := r.m.Admit(eviction.Admission{Namespace: ns, Tokens: prompt, Use: use, Blocks: blockstore.BlocksFor(len(prompt), bs)}, nil)
	if short > 0 {
		return false
	}
	defer r.m.Release(hit.Handle)
	tb := r.pool.NewTable()
	defer tb.Release()
	if err := tb.Adopt(hit.Blocks); err != nil {
		r.t.Fatal(err)
	}
	rest := len(prompt) - tb.Len()
	if err := tb.Append(rest); err != nil {
		r.t.Fatal(err)
	}
	full := len(prompt) / bs
	if _, err := r.m.Insert(ns, prompt[:full*bs], tb.Blocks()[:full], use); err != nil {
		r.t.Fatal(err)
	}
	return true
}

// wantKeys is the router's view the tree implies: every block the tree
// holds, keyed by its tenant's model name and its whole token path.
func (r *replica) wantKeys() map[string]bool {
	out := map[string]bool{}
	r.tree.Walk(func(n *radix.Node) bool {
		path := n.Path(nil)
		first := len(path)/bs - len(n.Blocks())
		for i := range n.Blocks() {
			out[prefixKey(kvevents.TenantModel(modelName, n.Namespace()), path[:(first+i+1)*bs])] = true
		}
		return true
	})
	return out
}

func sameKeys(t *testing.T, what string, got, want map[string]bool) {
	t.Helper()
	for k := range want {
		if !got[k] {
			t.Errorf("%s: the router misses %q", what, k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("%s: the router believes %q, which the replica does not hold", what, k)
		}
	}
}

// TestRouterMirrorsReplica drives a random multi-tenant workload with
// pressure evictions, host-tier demotion and promotion, TTL expiry and
// flushes, and checks that a subscriber that joined first and one that
// joined halfway (replaying what it missed) both rebuild exactly the
// blocks the tree holds, and host-tier blocks the tier holds.
func TestRouterMirrorsReplica(t *testing.T) {
	r := newReplica(t, 96)
	topic := kvevents.Topic(pod, modelName)
	early := subscribe(t, r.pub.Addr(), r.pub.ReplayAddr(), topic, modelName)
	var late *subscriber

	rng := rand.New(rand.NewPCG(15, 2026))
	tenants := []string{"", "acme", "globex"}
	systems := make([][]int32, 4)
	for i := range systems {
		systems[i] = make([]int32, bs*(2+i))
		for j := range systems[i] {
			systems[i][j] = int32(100*i + j%7) // tenants share these exact tokens
		}
	}
	const ops = 1500
	for op := range ops {
		if op == ops/2 {
			late = subscribe(t, r.pub.Addr(), r.pub.ReplayAddr(), topic, modelName)
		}
		switch x := rng.IntN(100); {
		case x < 70:
			prompt := append([]int32(nil), systems[rng.IntN(len(systems))]...)
			for range rng.IntN(3 * bs) {
				prompt = append(prompt, int32(rng.IntN(5)))
			}
			use := eviction.Use{TTL: time.Duration(1+rng.IntN(40)) * ttlUnit, Priority: int32(rng.IntN(3))}
			r.serve(tenants[rng.IntN(len(tenants))], prompt, use)
		case x < 85:
			r.clk.Advance(time.Duration(rng.IntN(15)) * ttlUnit)
			r.m.Sweep()
		case x < 93:
			if err := r.m.Reclaim(r.pool.NumBlocks()); err != nil && !errors.Is(err, eviction.ErrNothingEvictable) {
				t.Fatal(err)
			}
		case x < 98:
			r.m.Flush(tenants[rng.IntN(len(tenants))], false)
		default:
			r.m.Flush("", true)
		}
		if op%4 == 0 {
			r.host.Wait() // let the tier's own drops arrive within the step
		}
		r.pub.EndStep()
		if err := r.m.Check(); err != nil {
			t.Fatalf("op %d: %v", op, err)
		}
	}
	// A last request in a fresh namespace marks the end of the stream. Its
	// own demotions may make the tier drop entries: those reports arrive on
	// the tier's goroutine and must be in the last batch, so wait for them.
	end := append([]int32{9, 9, 9, 9}, systems[0]...)
	if !r.serve("end", end, eviction.Use{}) {
		t.Fatal("no room for the last request")
	}
	r.host.Wait()
	r.pub.EndStep()
	endKey := prefixKey(kvevents.TenantModel(modelName, "end"), end)

	for name, s := range map[string]*subscriber{"early": early, "late": late} {
		s.until(func() bool { return s.r.keys("GPU")[endKey] })
		sameKeys(t, name+" GPU", s.r.keys("GPU"), r.wantKeys())
		if got, want := len(s.r.media["GPU"]), r.tree.Total().Blocks; got != want {
			t.Errorf("%s: the router holds %d GPU blocks, the tree %d", name, got, want)
		}
		// Every host-tier block the router believes in is in the tier.
		for h := range s.r.media["CPU"] {
			b := s.r.blocks[h]
			ns := ""
			if b.lora != "" {
				ns = b.lora[len(modelName)+1:]
			}
			path := s.r.path(h)
			fp := kvcache.ChainPrefix(kvcache.NamespaceSalt(ns), path, bs, len(path)/bs)
			if _, ok := r.host.Get(ns, fp, b.tokens, 0); !ok {
				t.Errorf("%s: the router believes host block %#x (%q), which the tier does not hold", name, h, prefixKey(ns, path))
			}
		}
		for _, tag := range []string{"BlockStored", "BlockRemoved", "AllBlocksCleared"} {
			if s.r.seen[tag] == 0 {
				t.Errorf("%s: the workload produced no %s", name, tag)
			}
		}
		if len(s.r.loras) != len(tenants) { // "acme", "globex", "end"
			t.Errorf("%s: lora names %v, want one per named tenant", name, s.r.loras)
		}
	}
	if c := r.m.Counters(); c.Demoted == 0 || c.Promoted == 0 || c.Evicted[kvcache.ReasonTTL] == 0 {
		t.Errorf("the workload missed a move: %+v", c)
	}
}
