package eviction

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
)

// HostTierConfig configures the host-memory tier.
type HostTierConfig struct {
	// CapacityBytes bounds the bytes held: each entry costs its K/V bytes
	// plus its token IDs. Required when the tier is enabled.
	CapacityBytes int64
	// BlockBytes is the size of one block's K/V, used to size the admission
	// counters (ten per block that fits). Required.
	BlockBytes int
}

// HostTier keeps demoted blocks' K/V bytes in host memory, in a ristretto
// cache keyed by fingerprint. Like ristretto, a Put may be dropped under
// contention or by the admission policy; a Get never returns bytes of a
// block other than the one asked for: it compares the namespace, the
// block's tokens and the full 128-bit fingerprint. It is safe for
// concurrent use.
type HostTier struct {
	cache *ristretto.Cache[uint64, *hostEntry]
	key   func(Fingerprint) uint64 // the ristretto key; tests force collisions
	obs   Observer                 // told of entries coming and going; see setObserver

	capacityEvicted atomic.Uint64 // entries dropped to stay within capacity
}

type hostEntry struct {
	ns     string
	fp     Fingerprint
	tokens []int32
	HostBlock
}

// HostBlock is what the host tier keeps of a demoted block.
type HostBlock struct {
	Data     []byte // the block's K/V bytes, as Storage.ReadBlock wrote them
	Expires  int64  // TTL deadline, Unix nanoseconds on the Manager's clock
	LastUsed int64  // when a request last used the block, same clock
	// Parent is the fingerprint of the block before this one (zero for a
	// namespace's first), for an Observer told of the entry.
	Parent Fingerprint
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
	h := &HostTier{key: func(fp Fingerprint) uint64 { return fp.Lo }}
	c, err := ristretto.NewCache(&ristretto.Config[uint64, *hostEntry]{
		NumCounters:        max(1000, 10*cfg.CapacityBytes/int64(cfg.BlockBytes)),
		MaxCost:            cfg.CapacityBytes,
		BufferItems:        64,
		IgnoreInternalCost: true,
		OnEvict: func(it *ristretto.Item[*hostEntry]) {
			if it.Expiration.IsZero() || time.Now().Before(it.Expiration) {
				h.capacityEvicted.Add(1)
			}
		},
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

// Put stores a copy of b as the block with fingerprint fp (namespace ns,
// its own tokens), kept until b.Expires and at most ttl of real time. It
// reports whether the entry was accepted; an accepted Put is visible after
// Wait. Put does not retain b.Data or tokens.
func (h *HostTier) Put(ns string, fp Fingerprint, tokens []int32, b HostBlock, ttl time.Duration) bool {
	b.Data = slices.Clone(b.Data)
	e := &hostEntry{ns: ns, fp: fp, tokens: slices.Clone(tokens), HostBlock: b}
	if h.obs == nil {
		return h.cache.SetWithTTL(h.key(fp), e, e.cost(), ttl)
	}
	// Reported before the Set: ristretto may refuse the entry (and report
	// its exit) on its own goroutine before SetWithTTL returns.
	h.obs.HostStored(ns, b.Parent, fp, tokens)
	ok := h.cache.SetWithTTL(h.key(fp), e, e.cost(), ttl)
	if !ok { // dropped before ristretto saw it: no OnExit will come
		h.removed(e)
	}
	return ok
}

// Get returns the block with fingerprint fp, namespace ns and tokens, if
// held and not expired at now. The returned Data must not be modified.
func (h *HostTier) Get(ns string, fp Fingerprint, tokens []int32, now int64) (HostBlock, bool) {
	e, ok := h.cache.Get(h.key(fp))
	if !ok || e.fp != fp || e.ns != ns || e.Expires <= now || !slices.Equal(e.tokens, tokens) {
		return HostBlock{}, false
	}
	return e.HostBlock, true
}

// Delete drops the entry for fp if it is the one for ns and tokens.
func (h *HostTier) Delete(ns string, fp Fingerprint, tokens []int32) {
	if e, ok := h.cache.Get(h.key(fp)); ok && e.fp == fp && e.ns == ns && slices.Equal(e.tokens, tokens) {
		h.cache.Del(h.key(fp))
	}
}

// FlushNamespace drops every entry of namespace ns.
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

// Clear drops every entry.
func (h *HostTier) Clear() { h.flush(func(*hostEntry) bool { return true }) }

// Wait blocks until every earlier Put and Delete is visible.
func (h *HostTier) Wait() { h.cache.Wait() }

// Bytes is the number of bytes the tier holds (K/V plus token IDs), as of
// the last processed Put or Delete.
func (h *HostTier) Bytes() int64 { return h.cache.MaxCost() - h.cache.RemainingCost() }

// Close stops the tier's background goroutines.
func (h *HostTier) Close() { h.cache.Close() }
