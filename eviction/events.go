package eviction

import "github.com/prefixd/prefixd/kvcache"

// Observer is told of what the radix tree's own Observer cannot see: the
// lower tiers' entries coming and going, and a flush that emptied the whole
// cache. With a radix.Observer on the tree it mirrors every tier, as an
// event publisher for KV-aware routers needs.
//
// TierRemoved may also come from a tier's own goroutines (entries it
// drops to stay within capacity, or refuses to admit), so an Observer
// must be safe for concurrent use. No method may call back into the
// Manager or a Tier, or retain the slices it is given.
type Observer interface {
	// TierStored reports that the block with fingerprint fp, holding
	// tokens, of namespace ns, entered lower tier t; parent is the
	// fingerprint of the block before it (zero for a namespace's first).
	TierStored(t kvcache.Tier, ns string, parent, fp kvcache.Fingerprint, tokens []int32)
	// TierRemoved reports that the block with fingerprint fp of namespace
	// ns left lower tier t (promoted, flushed or dropped).
	TierRemoved(t kvcache.Tier, ns string, fp kvcache.Fingerprint)
	// Cleared reports a flush of every namespace that left neither the
	// tree nor any lower tier holding a block. The removals it implies
	// have been reported already.
	Cleared()
}

// setObserver makes o the tier's observer. It runs before any Put, so the
// tier's goroutines see it through the channels that carry the Puts.
func (h *HostTier) setObserver(o Observer) { h.obs = o }

// removed reports e's removal to the observer, if any.
func (h *HostTier) removed(e *hostEntry) {
	if h.obs != nil && e != nil {
		h.obs.TierRemoved(kvcache.TierHost, e.ns, e.fp)
	}
}
