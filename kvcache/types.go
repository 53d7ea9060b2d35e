package kvcache

import (
	"errors"
	"time"
)

// Errors callers branch on. Functions wrap them with detail.
var (
	// ErrNotCached means an operator pin named a prefix the cache does not
	// hold in full.
	ErrNotCached = errors.New("eviction: prefix not cached")
	// ErrPinBudget means an operator pin would exceed the pinned budget.
	ErrPinBudget = errors.New("eviction: pin budget exceeded")
	// ErrBadTTL means a requested TTL is negative or above the maximum.
	ErrBadTTL = errors.New("eviction: TTL out of range")
)

// Reason says why blocks left the cache.
type Reason int

// Eviction reasons. Under memory pressure a victim counts as Priority when
// a higher-priority leaf was spared for it and as LRU otherwise; Pressure
// counts blocks a lower tier dropped to stay within its capacity.
const (
	ReasonTTL Reason = iota
	ReasonLRU
	ReasonPriority
	ReasonFlush
	ReasonPressure
	NumReasons // the number of reasons
)

var reasonNames = [NumReasons]string{"ttl", "lru", "priority", "flush", "pressure"}

// String returns the reason's metric label.
func (r Reason) String() string { return reasonNames[r] }

// Reasons lists every Reason in order, for exporting counters.
func Reasons() []Reason {
	out := make([]Reason, NumReasons)
	for r := range out {
		out[r] = Reason(r)
	}
	return out
}

// Tier is where a cached block lives, and so where a hit was served from.
type Tier int

// Cache tiers, fastest first.
const (
	TierDevice Tier = iota // the engine's KV pool, indexed by the radix tree
	TierHost               // host memory
	TierDisk               // files on a local disk; survives restarts
	TierRemote             // a store shared by replicas (Redis or Valkey)
	NumTiers               // the number of tiers
)

var tierNames = [NumTiers]string{"device", "host", "disk", "remote"}

// String returns the tier's metric label.
func (t Tier) String() string { return tierNames[t] }

// Counters is a snapshot of the cache's running totals.
type Counters struct {
	Evicted  [NumReasons]uint64 // blocks that left a cache tier, by Reason
	Demoted  uint64             // blocks copied to a lower tier
	Promoted uint64             // blocks copied back into the device pool
}

// Samples receives per-event measurements, for histograms. Any field may be
// nil. Callbacks run on the cache owner's goroutine and must not call back
// into the cache.
type Samples struct {
	// HitAge is called for each cached node (or lower-tier block) an
	// admitted request hits, with the time since that prefix was last
	// used: the data for choosing a TTL. Each admitted request counts
	// once, however many scheduler steps it waited.
	HitAge func(tier Tier, age time.Duration, tokens int)
	// BlockLifetime is called when cached blocks leave the device tree,
	// with the time since they were inserted.
	BlockLifetime func(life time.Duration, blocks int)
}

// PinInfo describes an operator pin.
type PinInfo struct {
	Namespace string
	Tokens    int // pinned prompt tokens (whole blocks)
}

// Prefix describes one cached prefix: a node of the tree and the path of
// tokens that leads to the end of its edge.
type Prefix struct {
	Namespace string
	Tokens    []int32 // every token from the namespace root, whole blocks
	Hits      uint64  // admitted requests that used the prefix
	LastUsed  time.Time
	TTLLeft   time.Duration // until its deadline; 0 when it is past
	Pinned    bool          // an operator pin holds (at least the start of) it
	InUse     bool          // running sequences' tables hold (the start of) it
}

// TierStats is a lower cache tier's state and running totals, for metrics
// and /v1/stats.
type TierStats struct {
	Blocks    int    // blocks held
	Bytes     int64  // bytes held, as the tier counts them (records on disk)
	Writes    uint64 // blocks written
	Dropped   uint64 // writes dropped because the write queue was full
	Evicted   uint64 // blocks removed to keep the byte budget or their TTL
	Corrupt   uint64 // records that failed a check: each a miss
	Hits      uint64 // blocks read back for a request
	ReadBytes uint64 // bytes read back for those hits
	Scanning  bool   // the start-up scan that rebuilds the index still runs
}
