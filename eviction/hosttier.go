package eviction

import (
	"fmt"
	"slices"
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
}

type hostEntry struct {
	ns      string
	fp      Fingerprint
	tokens  []int32
	data    []byte
	expires int64 // deadline on the manager's clock, Unix nanoseconds
}

func (e *hostEntry) cost() int64 { return int64(len(e.data) + 4*len(e.tokens)) }

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
	})
	if err != nil {
		return nil, fmt.Errorf("eviction: host tier: %w", err)
	}
	h.cache = c
	return h, nil
}

// Put stores a copy of data as the K/V of the block with fingerprint fp
// (namespace ns, its own tokens), kept until expires (Unix nanoseconds on
// the caller's clock) and at most ttl of real time. It reports whether the
// entry was accepted; an accepted Put is visible after Wait.
func (h *HostTier) Put(ns string, fp Fingerprint, tokens []int32, data []byte, expires int64, ttl time.Duration) bool {
	e := &hostEntry{ns: ns, fp: fp, tokens: slices.Clone(tokens), data: slices.Clone(data), expires: expires}
	return h.cache.SetWithTTL(h.key(fp), e, e.cost(), ttl)
}

// Get returns the K/V bytes of the block with fingerprint fp, namespace ns
// and tokens, with the entry's deadline, if held and not expired at now.
// The returned slice must not be modified.
func (h *HostTier) Get(ns string, fp Fingerprint, tokens []int32, now int64) (data []byte, expires int64, ok bool) {
	e, ok := h.cache.Get(h.key(fp))
	if !ok || e.fp != fp || e.ns != ns || e.expires <= now || !slices.Equal(e.tokens, tokens) {
		return nil, 0, false
	}
	return e.data, e.expires, true
}

// Delete drops the entry for fp if it is the one for ns and tokens.
func (h *HostTier) Delete(ns string, fp Fingerprint, tokens []int32) {
	if e, ok := h.cache.Get(h.key(fp)); ok && e.fp == fp && e.ns == ns && slices.Equal(e.tokens, tokens) {
		h.cache.Del(h.key(fp))
	}
}

// FlushNamespace drops every entry of namespace ns.
func (h *HostTier) FlushNamespace(ns string) {
	var keys []uint64
	h.cache.IterValues(func(e *hostEntry) bool {
		if e.ns == ns {
			keys = append(keys, h.key(e.fp))
		}
		return false
	})
	for _, k := range keys {
		h.cache.Del(k)
	}
}

// Clear drops every entry.
func (h *HostTier) Clear() { h.cache.Clear() }

// Wait blocks until every earlier Put and Delete is visible.
func (h *HostTier) Wait() { h.cache.Wait() }

// Bytes is the number of bytes the tier holds (K/V plus token IDs), as of
// the last processed Put or Delete.
func (h *HostTier) Bytes() int64 { return h.cache.MaxCost() - h.cache.RemainingCost() }

// Close stops the tier's background goroutines.
func (h *HostTier) Close() { h.cache.Close() }
