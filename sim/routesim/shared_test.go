package routesim

import (
	"testing"
	"time"

	"github.com/prefixd/prefixd/kvcache"
)

// TestSharedTier: on the synthetic trace, a shared tier under round-robin
// serves hits the replicas alone miss, and never lowers the hit rate; the
// tier's blocks leave by capacity and by expiry.
func TestSharedTier(t *testing.T) {
	const bs = 8
	recs, prompts := synthTrace(t, bs)
	base := Config{Replicas: 8, BlocksPerReplica: 160, BlockSize: bs, Policy: RoundRobin, TTL: 20 * time.Second}
	alone, err := Simulate(recs, prompts, base)
	if err != nil {
		t.Fatal(err)
	}
	base.SharedTierBlocks = 8 * 160
	shared, err := Simulate(recs, prompts, base)
	if err != nil {
		t.Fatal(err)
	}
	if shared.SharedHitTokens == 0 || shared.HitRate <= alone.HitRate || shared.Policy != "round-robin + shared tier" {
		t.Fatalf("alone %.3f, with the shared tier %.3f (%d tokens from it, %q)", alone.HitRate, shared.HitRate,
			shared.SharedHitTokens, shared.Policy)
	}

	tier := newSharedTier(2, time.Minute)
	fp := func(i uint64) kvcache.Fingerprint { return kvcache.Fingerprint{Lo: i} }
	if n := tier.serve([]kvcache.Fingerprint{fp(1), fp(2), fp(3)}, 0, 3, 0); n != 0 || tier.lru.Len() != 2 {
		t.Fatalf("an empty tier served %d blocks, holds %d of capacity 2", n, tier.lru.Len())
	}
	// Block 1 left for capacity, so a chain from it finds nothing; from
	// block 2 on (the replica held block 1) it finds two.
	if n := tier.serve([]kvcache.Fingerprint{fp(1), fp(2), fp(3)}, 0, 0, time.Second); n != 0 {
		t.Fatalf("served %d blocks past an evicted first", n)
	}
	if n := tier.serve([]kvcache.Fingerprint{fp(1), fp(2), fp(3)}, 1, 0, time.Second); n != 2 {
		t.Fatalf("served %d blocks, want 2", n)
	}
	if n := tier.serve([]kvcache.Fingerprint{fp(2)}, 0, 0, time.Second+time.Minute); n != 0 {
		t.Fatal("an expired block was served")
	}
}
