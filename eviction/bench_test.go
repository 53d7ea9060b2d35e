package eviction

import (
	"testing"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/radix"
)

// benchRig is a Manager over a pool of n blocks of 16 tokens with
// slotBytes of K/V per token, without tests' per-step checks.
func benchRig(b *testing.B, n, slotBytes int, host bool) (*Manager, *blockstore.Pool, *clock.Fake) {
	st, err := blockstore.NewMemStorage(n, 16, slotBytes)
	if err != nil {
		b.Fatal(err)
	}
	pool, err := blockstore.New(blockstore.Config{NumBlocks: n, BlockSize: 16, Storage: st})
	if err != nil {
		b.Fatal(err)
	}
	tree, _ := radix.New(16)
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	cfg := Config{Tree: tree, Pool: pool, Clock: clk}
	if host {
		h, err := NewHostTier(HostTierConfig{CapacityBytes: 1 << 30, BlockBytes: st.BlockBytes()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(h.Close)
		cfg.Tiers = []Tier{h}
	}
	m, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return m, pool, clk
}

// fillLeaves caches n one-block prompts, each its own leaf.
func fillLeaves(b *testing.B, m *Manager, pool *blockstore.Pool, n int, use Use) {
	toks := make([]int32, 16)
	for i := range n {
		toks[0] = int32(i)
		id, err := pool.Alloc()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Insert("t", toks, []blockstore.BlockID{id}, use); err != nil {
			b.Fatal(err)
		}
		pool.Release(id)
	}
}

// BenchmarkReclaim10K evicts 10,000 cached leaves under pressure; ns/op is
// for all of them (see ns/leaf).
func BenchmarkReclaim10K(b *testing.B) {
	const n = 10_000
	m, pool, _ := benchRig(b, n, 1, false)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		fillLeaves(b, m, pool, n, Use{})
		b.StartTimer()
		if err := m.Reclaim(n); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/leaf")
}

// BenchmarkSweep10K expires 10,000 leaves in one sweep; see ns/expiry.
func BenchmarkSweep10K(b *testing.B) {
	const n = 10_000
	m, pool, clk := benchRig(b, n, 1, false)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		fillLeaves(b, m, pool, n, Use{TTL: time.Minute})
		clk.Advance(2 * time.Minute)
		b.StartTimer()
		if got := m.Sweep(); got != n {
			b.Fatalf("swept %d", got)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/expiry")
}

// BenchmarkDemotePromote moves one 16-token block of 64 KiB of K/V (4 KiB
// per token, e.g. 8 layers x 8 KV heads x 64 dims x K and V x fp32) to the
// host tier under pressure and back on the next lookup. Bytes counted are
// both copies.
func BenchmarkDemotePromote(b *testing.B) {
	const slotBytes = 4096
	m, pool, _ := benchRig(b, 4, slotBytes, true)
	toks := make([]int32, 16)
	id, _ := pool.Alloc()
	if _, err := m.Insert("t", toks, []blockstore.BlockID{id}, Use{}); err != nil {
		b.Fatal(err)
	}
	pool.Release(id)
	dst := make([]blockstore.BlockID, 0, 1)
	b.SetBytes(2 * 16 * slotBytes)
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Reclaim(4); err != nil { // demote
			b.Fatal(err)
		}
		m.tiers[0].Wait()
		hit, _ := m.Admit(Admission{Namespace: "t", Tokens: toks, Use: Use{}}, dst) // promote
		if hit.Tokens[kvcache.TierHost] != 16 {
			b.Fatalf("promotion hit %d tokens", hit.Tokens[kvcache.TierHost])
		}
		m.Release(hit.Handle)
	}
}
