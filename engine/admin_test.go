package engine

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prefixd/prefixd/kvcache"
)

func TestAdmin(t *testing.T) {
	// A pin budget of 2 blocks of the 256.
	e := newTestEngine(t, newHashModel(testVocab, 512), func(c *Config) { c.MaxPinnedFraction = 2.5 / 256 })
	// Block size 4: a 13-token prompt caches 3 whole blocks (12 tokens) of
	// the first 12 positions plus what generation fills.
	a, b := prompt(1, 13), prompt(2, 13)
	for range 3 {
		run(t, e, Request{Namespace: "a", Prompt: a, MaxTokens: 2})
	}
	run(t, e, Request{Namespace: "b", Prompt: b, MaxTokens: 2})

	top, err := e.Prefixes(10)
	if err != nil {
		t.Fatal(err)
	}
	if len(top) == 0 || top[0].Namespace != "a" || !slices.Equal(top[0].Tokens, a[:len(top[0].Tokens)]) {
		t.Fatalf("top prefix %+v, want namespace a's prompt", top)
	}
	if top[0].Hits < 3 || top[0].TTLLeft <= 0 || top[0].Pinned || top[0].InUse {
		t.Fatalf("top prefix %+v: want >= 3 hits, TTL left, unpinned, idle", top[0])
	}
	for i := 1; i < len(top); i++ {
		if top[i].Hits > top[i-1].Hits {
			t.Fatalf("prefixes not ordered by hits: %+v", top)
		}
	}

	if _, err := e.Pin("a", prompt(9, 12)); !errors.Is(err, kvcache.ErrNotCached) {
		t.Fatalf("pin of an uncached prefix: %v", err)
	}
	if _, err := e.Pin("a", a[:12]); !errors.Is(err, kvcache.ErrPinBudget) {
		t.Fatalf("pin of 3 blocks over a budget of 2: %v", err)
	}
	info, err := e.Pin("a", a[:8])
	if err != nil || info.Tokens != 8 {
		t.Fatalf("pin of 2 cached blocks: %+v, %v", info, err)
	}
	top, _ = e.Prefixes(10)
	for _, p := range top {
		if want := len(p.Tokens) <= 8; p.Namespace == "a" && p.Pinned != want {
			t.Fatalf("%d-token prefix reported pinned=%v after pinning 8 tokens", len(p.Tokens), p.Pinned)
		}
	}
	if found, err := e.Unpin("a", a[:8]); !found || err != nil {
		t.Fatalf("unpin: %v %v", found, err)
	}
	if found, _ := e.Unpin("a", a[:8]); found {
		t.Fatal("second unpin found a pin")
	}

	if err := e.SetTTLs(time.Minute, time.Second); !errors.Is(err, kvcache.ErrBadTTL) {
		t.Fatalf("default above max: %v", err)
	}
	if err := e.SetTTLs(time.Second, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(t.Context(), Request{Prompt: a, MaxTokens: 1, Cache: Cache{TTL: 3 * time.Second}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a TTL above the new maximum was accepted: %v", err)
	}
	if s := e.Stats(); s.DefaultTTL != time.Second || s.MaxTTL != 2*time.Second {
		t.Fatalf("stats TTLs %v %v", s.DefaultTTL, s.MaxTTL)
	}

	// Flushing b leaves a's cache alone.
	before := e.Stats().Blocks.CachedOnly
	n, err := e.Flush("b", false)
	if err != nil || n == 0 {
		t.Fatalf("flush b: %d blocks, %v", n, err)
	}
	if after := e.Stats().Blocks.CachedOnly; after != before-n {
		t.Fatalf("cached blocks %d -> %d after flushing %d", before, after, n)
	}
	if top, _ := e.Prefixes(100); slices.ContainsFunc(top, func(p kvcache.Prefix) bool { return p.Namespace == "b" }) {
		t.Fatal("namespace b still cached after its flush")
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	checkDrained(t, e)
}

func TestPoolSizedInBytes(t *testing.T) {
	// hashModel keeps 8 bytes per position: a block of 4 is 32 bytes.
	e := newTestEngine(t, newHashModel(testVocab, 64), func(c *Config) { c.NumBlocks, c.KVBytes = 0, 32*100+31 })
	if got := e.Config().NumBlocks; got != 100 || e.KVBlockBytes() != 32 {
		t.Fatalf("KVBytes 3231 gave %d blocks of %d bytes, want 100 of 32", got, e.KVBlockBytes())
	}
	if s := e.Stats(); s.Blocks.Total != 100 {
		t.Fatalf("pool of %d blocks", s.Blocks.Total)
	}
	if _, err := New(Config{Model: newHashModel(testVocab, 64), KVBytes: 31, BlockSize: 4}); err == nil {
		t.Fatal("a pool smaller than one block was accepted")
	}
}
