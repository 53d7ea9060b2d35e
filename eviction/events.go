package eviction

// Observer is told of what the radix tree's own Observer cannot see: the
// host tier's entries coming and going, and a flush that emptied the whole
// cache. With a radix.Observer on the tree it mirrors every tier, as an
// event publisher for KV-aware routers needs.
//
// HostRemoved may also come from the host tier's own goroutines (entries
// it drops to stay within capacity, or refuses to admit), so an Observer
// must be safe for concurrent use. No method may call back into the
// Manager or the HostTier, or retain the slices it is given.
type Observer interface {
	// HostStored reports that the block with fingerprint fp, holding
	// tokens, of namespace ns, entered the host tier; parent is the
	// fingerprint of the block before it (zero for a namespace's first).
	HostStored(ns string, parent, fp Fingerprint, tokens []int32)
	// HostRemoved reports that the block with fingerprint fp of namespace
	// ns left the host tier (promoted, flushed or dropped).
	HostRemoved(ns string, fp Fingerprint)
	// Cleared reports a flush of every namespace that left neither the
	// tree nor the host tier holding a block. The removals it implies
	// have been reported already.
	Cleared()
}

// setObserver makes o the tier's observer. It runs before any Put, so the
// tier's goroutines see it through the channels that carry the Puts.
func (h *HostTier) setObserver(o Observer) { h.obs = o }

// removed reports e's removal to the observer, if any.
func (h *HostTier) removed(e *hostEntry) {
	if h.obs != nil && e != nil {
		h.obs.HostRemoved(e.ns, e.fp)
	}
}
