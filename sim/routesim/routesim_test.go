package routesim

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prefixd/prefixd/bench"
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/kvevents"
	"github.com/prefixd/prefixd/radix"
	"github.com/prefixd/prefixd/sim/cachesim"
	"github.com/prefixd/prefixd/trace"
)

func synthTrace(t *testing.T, bs int) ([]trace.Record, [][]int32) {
	t.Helper()
	recs, err := bench.Synth(bench.SynthConfig{Seed: 7, Prefixes: 48, Namespaces: 6, Prefix: 128, Suffix: 24,
		MaxTokens: 16, Duration: 3 * time.Minute, PeriodMin: time.Second, PeriodMax: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	prompts, err := cachesim.PromptTokens(recs, bs)
	if err != nil {
		t.Fatal(err)
	}
	return recs, prompts
}

// treeKeys is what a router should hold for a replica: the router key of
// every block its tree holds.
func treeKeys(tree *radix.Tree, bs int) map[uint64]int {
	out := map[uint64]int{}
	tree.Walk(func(n *radix.Node) bool {
		path := n.Path(nil)
		name := kvevents.TenantModel(model, n.Namespace())
		var k uint64
		for i := range len(path) / bs {
			k = routerKey(k, name, path[i*bs:(i+1)*bs])
			if i >= len(path)/bs-len(n.Blocks()) {
				out[k]++
			}
		}
		return true
	})
	return out
}

// TestRouterViewIsTheTrees checks that the router's index, learned from
// the KV events alone, is every replica's tree at the end of a run with
// evictions and expiry, for every policy.
func TestRouterViewIsTheTrees(t *testing.T) {
	const bs = 8
	recs, prompts := synthTrace(t, bs)
	for _, p := range []Policy{RoundRobin, LeastLoaded, PrefixAware} {
		s, err := newSim(recs, prompts, Config{Replicas: 3, BlocksPerReplica: 160, BlockSize: bs, Policy: p, TTL: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		s.run(recs, prompts)
		s.deliver()
		for i, r := range s.replicas {
			if want := treeKeys(r.tree, bs); !maps.Equal(r.view.held, want) {
				t.Errorf("%v: replica %d: the router holds %d keys, the tree %d blocks", p, i, len(r.view.held), len(want))
			}
		}
		res, err := s.result()
		if err != nil {
			t.Fatal(err)
		}
		if c := s.replicas[0].m.Counters(); res.Batches == 0 || c.Evicted[kvcache.ReasonTTL]+c.Evicted[kvcache.ReasonLRU] == 0 {
			t.Errorf("%v: the run evicted nothing or published nothing: %+v, %d batches", p, c, res.Batches)
		}
	}
}

// TestPrefixAwareRouting checks the point of KV events: with prefix-aware
// routing, N replicas come close to one replica with N times the blocks,
// and well above round robin, whose replicas each cache a bit of
// everything.
func TestPrefixAwareRouting(t *testing.T) {
	const bs, n, blocks = 8, 8, 128
	recs, prompts := synthTrace(t, bs)
	results, err := Sweep(recs, prompts, []int{n}, []Policy{RoundRobin, PrefixAware}, Config{BlocksPerReplica: blocks, BlockSize: bs, EventDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ref, rr, pa := results[0], results[1], results[2]
	if ref.Replicas != 1 || ref.BlocksPerReplica != n*blocks || rr.Policy != "round-robin" || pa.Policy != "prefix-aware" {
		t.Fatalf("sweep order: %+v", results)
	}
	if pa.HitRate < ref.HitRate-0.05 || pa.HitRate < rr.HitRate+0.15 {
		t.Errorf("prefix-aware %.3f, one big replica %.3f, round robin %.3f", pa.HitRate, ref.HitRate, rr.HitRate)
	}
	if rr.Imbalance > 1.01 || pa.Imbalance < 1 {
		t.Errorf("imbalance: round robin %.2f, prefix-aware %.2f", rr.Imbalance, pa.Imbalance)
	}
	var b strings.Builder
	if err := WriteTable(&b, results); err != nil || strings.Count(b.String(), "\n") != 5 {
		t.Errorf("table:\n%s(%v)", b.String(), err)
	}
	t.Logf("\n%s", b.String())
}

func TestConfigErrors(t *testing.T) {
	recs, prompts := synthTrace(t, 8)
	for _, c := range []Config{{}, {Replicas: 1}, {Replicas: 1, BlocksPerReplica: 8, EventDelay: -1}} {
		if _, err := Simulate(recs, prompts, c); err == nil {
			t.Errorf("Simulate(%+v) accepted", c)
		}
	}
	if _, err := Simulate(recs, prompts[1:], Config{Replicas: 1, BlocksPerReplica: 8}); err == nil {
		t.Error("a prompt count unlike the records' was accepted")
	}
	if _, err := ParsePolicy("random"); err == nil {
		t.Error("ParsePolicy(random) accepted")
	}
}

// TestSweepProgress: Progress hears of every simulation of a sweep, the
// references included, with the total.
func TestSweepProgress(t *testing.T) {
	recs, prompts := synthTrace(t, 8)
	var calls [][2]int
	results, err := Sweep(recs, prompts, []int{1, 2}, []Policy{RoundRobin, PrefixAware}, Config{BlocksPerReplica: 64, BlockSize: 8,
		Progress: func(done, total int) { calls = append(calls, [2]int{done, total}) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != len(results) || len(calls) != 6 || calls[0] != [2]int{1, 6} || calls[5] != [2]int{6, 6} {
		t.Errorf("progress calls %v for %d results, want 1..6 of 6", calls, len(results))
	}
}
