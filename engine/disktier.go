package engine

import (
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/kvcache"
)

// DiskTier is what the engine needs of a persistent cache tier: package
// disktier's Tier. It must be safe for concurrent use.
type DiskTier interface {
	eviction.Tier
	// Save stores a block synchronously: Close saves the whole cache.
	Save(ns string, fp kvcache.Fingerprint, tokens []int32, b eviction.StoredBlock) error
	// Stats returns the tier's state and running totals, for Stats.
	Stats() kvcache.TierStats
	// ReadAhead reads a block now, off the scheduler goroutine, for a Get
	// to come, and reports whether it could (see prefetch).
	ReadAhead(ns string, fp kvcache.Fingerprint, tokens []int32, now int64) bool
}
