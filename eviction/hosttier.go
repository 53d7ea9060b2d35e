package eviction

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/prefixd/prefixd/kvcache"
)

// HostTierConfig configures the host-memory tier.
type HostTierConfig struct {
	// CapacityBytes bounds the bytes held: each entry costs its K/V bytes
	// plus its token IDs. Required when the tier is enabled.
	CapacityBytes int64
	// BlockBytes is the size of one block's K/V, used to size the admission
	// counters (ten per block that fits). Required.
	BlockBytes int
	// Next, if set, receives the blocks the tier drops to stay within its
	// capacity or refuses to admit (a disk tier), with what is left of
	// their TTL.
	Next Tier
}

// HostTier is the Tier in host memory: it keeps demoted blocks' K/V
// bytes in a ristretto cache keyed by fingerprint. Like ristretto, a Put
// may be dropped under contention or by the admission policy; a Get never
// returns bytes of a block other than the one asked for: it compares the
// namespace, the block's tokens and the full 128-bit fingerprint. It is
// safe for concurrent use.
type HostTier struct {
	cache *ristretto.Cache[uint64, *hostEntry]
	key   func(kvcache.Fingerprint) uint64 // the ristretto key; tests force collisions
	obs   Observer                         // told of entries coming and going; see setObserver
	next  Tier                             // receives capacity evictions; may be nil

	capacityEvicted atomic.Uint64 // entries dropped to stay within capacity
}

type hostEntry struct {
	ns     string
	fp     kvcache.Fingerprint
	tokens []int32
	StoredBlock
}

func (e *hostEntry) cost() int64 { return int64(len(e.Data) + 4*len(e.tokens)) }

// NewHostTier returns an empty host tier.
func NewHostTier(cfg HostTierConfig) (*HostTier, error) {
	if cfg.CapacityBytes <= 0 {
		return nil, fmt.Errorf("eviction: HostTierConfig.CapacityBytes must be positive, got %d", cfg.CapacityBytes)
	}
	if cfg.BlockBytes <= 0 {
		return nil, fmt.Errorf("eviction: HostTierConfig.BlockBytes must be positive, got %d", cfg.BlockBytes)
	}
	h := &HostTier{key: func(fp kvcache.Fingerprint) uint64 { return fp.Lo }, next: cfg.Next}
	c, err := ristretto.NewCache(&ristretto.Config[uint64, *hostEntry]{
		NumCounters:        max(1000, 10*cfg.CapacityBytes/int64(cfg.BlockBytes)),
		MaxCost:            cfg.CapacityBytes,
		BufferItems:        64,
		IgnoreInternalCost: true,
		OnEvict: func(it *ristretto.Item[*hostEntry]) {
			if it.Expiration.IsZero() || time.Now().Before(it.Expiration) {
				h.capacityEvicted.Add(1)
				h.spill(it)
			}
		},
		// A block the admission policy refuses never entered, but it left
		// the device for good: it goes on down too.
		OnReject: h.spill,
		// Every entry that was stored or refused leaves through OnExit
		// exactly once (Del, replacement, eviction, expiry, refusal).
		OnExit: h.removed,
	})
	if err != nil {
		return nil, fmt.Errorf("eviction: host tier: %w", err)
	}
	h.cache = c
	return h, nil
}

// spill hands a block leaving the tier (or refused by it) to the next
// tier, if any, with what is left of its TTL.
func (h *HostTier) spill(it *ristretto.Item[*hostEntry]) {
	if h.next == nil || it.Value == nil {
		return
	}
	ttl := time.Duration(0)
	if !it.Expiration.IsZero() {
		ttl = time.Until(it.Expiration)
	}
	e := it.Value
	h.next.Put(e.ns, e.fp, e.tokens, e.StoredBlock, ttl)
}

// Medium implements Tier.
func (h *HostTier) Medium() kvcache.Tier { return kvcache.TierHost }

// Put implements Tier: the copy is kept at most ttl of real time; an
// accepted Put is visible after Wait.
func (h *HostTier) Put(ns string, fp kvcache.Fingerprint, tokens []int32, b StoredBlock, ttl time.Duration) bool {
	b.Data = slices.Clone(b.Data)
	e := &hostEntry{ns: ns, fp: fp, tokens: slices.Clone(tokens), StoredBlock: b}
	if h.obs == nil {
		return h.cache.SetWithTTL(h.key(fp), e, e.cost(), ttl)
	}
	// Reported before the Set: ristretto may refuse the entry (and report
	// its exit) on its own goroutine before SetWithTTL returns.
	h.obs.TierStored(kvcache.TierHost, ns, b.Parent, fp, tokens)
	ok := h.cache.SetWithTTL(h.key(fp), e, e.cost(), ttl)
	if !ok { // dropped before ristretto saw it: no OnExit will come
		h.removed(e)
	}
	return ok
}

// Has implements Tier.
func (h *HostTier) Has(ns string, fp kvcache.Fingerprint, tokens []int32, now int64) bool {
	_, ok := h.Get(ns, fp, tokens, now)
	return ok
}

// Get implements Tier. The returned Data stays valid: the tier never
// reuses it.
func (h *HostTier) Get(ns string, fp kvcache.Fingerprint, tokens []int32, now int64) (StoredBlock, bool) {
	e, ok := h.cache.Get(h.key(fp))
	if !ok || e.fp != fp || e.ns != ns || e.Expires <= now || !slices.Equal(e.tokens, tokens) {
		return StoredBlock{}, false
	}
	return e.StoredBlock, true
}

// Delete implements Tier.
func (h *HostTier) Delete(ns string, fp kvcache.Fingerprint, tokens []int32) {
	if e, ok := h.cache.Get(h.key(fp)); ok && e.fp == fp && e.ns == ns && slices.Equal(e.tokens, tokens) {
		h.cache.Del(h.key(fp))
	}
}

// FlushNamespace implements Tier.
func (h *HostTier) FlushNamespace(ns string) { h.flush(func(e *hostEntry) bool { return e.ns == ns }) }

// flush deletes the entries drop selects. Deletes, unlike ristretto's
// Clear, do not count as capacity evictions.
func (h *HostTier) flush(drop func(*hostEntry) bool) {
	var keys []uint64
	h.cache.IterValues(func(e *hostEntry) bool {
		if drop(e) {
			keys = append(keys, h.key(e.fp))
		}
		return false
	})
	for _, k := range keys {
		h.cache.Del(k)
	}
}

// Clear implements Tier.
func (h *HostTier) Clear() { h.flush(func(*hostEntry) bool { return true }) }

// Wait blocks until every earlier Put and Delete is visible.
func (h *HostTier) Wait() { h.cache.Wait() }

// Bytes implements Tier: K/V plus token IDs, as of the last processed Put
// or Delete.
func (h *HostTier) Bytes() int64 { return h.cache.MaxCost() - h.cache.RemainingCost() }

// Dropped implements Tier.
func (h *HostTier) Dropped() uint64 { return h.capacityEvicted.Load() }

// Close stops the tier's background goroutines.
func (h *HostTier) Close() { h.cache.Close() }
