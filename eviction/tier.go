package eviction

import (
	"time"

	"github.com/prefixd/prefixd/kvcache"
)

// Tier is a cache tier below the device pool: host memory (HostTier), a
// local disk (package disktier), later a remote store. The Manager demotes
// the device's evicted blocks into the first of its tiers and promotes
// from each in order; a tier may pass what it drops on to the next (see
// HostTierConfig.Next). A tier keeps blocks' K/V bytes by fingerprint and
// answers only for the exact block asked: it compares the namespace, the
// full fingerprint and the block's own tokens. Implementations must be
// safe for concurrent use.
type Tier interface {
	// Medium names the tier, for metrics, hit-age samples and KV events.
	Medium() kvcache.Tier
	// Put offers a copy of b as the block with fingerprint fp (namespace
	// ns, its own tokens), kept until b.Expires and at most ttl. It
	// reports whether the tier took it; a tier may drop a Put (capacity,
	// admission, a full write queue). Put does not retain b.Data or
	// tokens and must not block on I/O.
	Put(ns string, fp kvcache.Fingerprint, tokens []int32, b StoredBlock, ttl time.Duration) bool
	// Has reports whether Get would likely find the block, without
	// reading its bytes: what Peek counts.
	Has(ns string, fp kvcache.Fingerprint, tokens []int32, now int64) bool
	// Get returns the block with fingerprint fp, namespace ns and tokens,
	// if held and not expired at now. The returned Data must not be
	// modified and is valid until the next call into the tier.
	Get(ns string, fp kvcache.Fingerprint, tokens []int32, now int64) (StoredBlock, bool)
	// Delete drops the entry for fp if it is the one for ns and tokens.
	Delete(ns string, fp kvcache.Fingerprint, tokens []int32)
	// FlushNamespace drops every entry of namespace ns; Clear every entry.
	FlushNamespace(ns string)
	Clear()
	// Wait blocks until every earlier Put and Delete is visible.
	Wait()
	// Bytes is the number of bytes the tier holds.
	Bytes() int64
	// Dropped is the number of blocks the tier dropped to stay within its
	// capacity (counted as kvcache.ReasonPressure).
	Dropped() uint64
}

// StoredBlock is what a lower tier keeps of a demoted block.
type StoredBlock struct {
	Data     []byte // the block's K/V bytes, as Storage.ReadBlock wrote them
	Expires  int64  // TTL deadline, Unix nanoseconds on the Manager's clock
	LastUsed int64  // when a request last used the block, same clock
	// Parent is the fingerprint of the block before this one (zero for a
	// namespace's first), for an Observer told of the entry.
	Parent kvcache.Fingerprint
}
