package engine

import (
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kvcache"
)

// Stats is a snapshot of the engine, taken after its latest iteration.
type Stats struct {
	Running, Waiting int
	Blocks           blockstore.Stats
	CachedNodes      int // radix tree nodes, all namespaces
	Cache            kvcache.Counters
	Disk             kvcache.TierStats       // now, not at the iteration; zero without a disk tier
	Remote           kvcache.RemoteTierStats // now, not at the iteration; zero without a remote tier
	PinnedBlocks     int
	PinBudget        int
	DefaultTTL       time.Duration
	MaxTTL           time.Duration

	// Running totals, in tokens unless named otherwise.
	PromptTokens     uint64 // prompt tokens of admitted requests
	GeneratedTokens  uint64
	PrefillTokens    uint64 // prompt tokens computed by forward passes
	CacheQueryTokens uint64 // prompt tokens looked up in the prefix cache
	CacheHitDevice   uint64 // of those, served from device blocks
	CacheHitHost     uint64 // of those, promoted from the host tier
	CacheHitDisk     uint64 // of those, promoted from the disk tier
	CacheHitRemote   uint64 // of those, promoted from the remote tier
	Preemptions      uint64 // sequences preempted (recomputed later)
	Steps            uint64 // forward passes
	Requests         uint64 // finished requests
	NonFiniteLogits  uint64 // requests failed for a NaN or infinite logit (ErrNonFinite)

	// Speculative decoding, as vLLM counts it: decode rows that verified
	// drafts, the tokens drafted, those accepted, and the accepted ones by
	// position (index i: the (i+1)th draft of a row).
	SpecDrafts         uint64
	SpecDraftTokens    uint64
	SpecAcceptedTokens uint64
	SpecAcceptedPerPos [MaxSpecTokens]uint64
}

// Stats returns the latest snapshot, with the disk and remote tiers' state
// as of now: their start-up scan, writers and fetches change it while the
// scheduler idles. It is safe for concurrent use.
func (e *Engine) Stats() Stats {
	e.statsMu.Lock()
	s := e.stats
	e.statsMu.Unlock()
	if e.disk != nil {
		s.Disk = e.disk.Stats()
	}
	if r := e.cfg.RemoteTier; r != nil {
		s.Remote = r.Stats()
	}
	return s
}

// publish copies the scheduler's state into the snapshot. It runs on the
// scheduler goroutine.
func (e *Engine) publish() {
	sc := &e.sched
	s := sc.totals
	s.Running = len(sc.running)
	s.Waiting = len(sc.waiting)
	s.Blocks = e.pool.Stats()
	s.CachedNodes = e.tree.Total().Nodes
	s.Cache = e.cache.Counters()
	s.PinnedBlocks, s.PinBudget = e.cache.PinnedBlocks()
	e.pinned.Store(int64(s.PinnedBlocks))
	s.DefaultTTL, s.MaxTTL = e.cache.TTLs()
	e.statsMu.Lock()
	e.stats = s
	e.statsMu.Unlock()
	e.endStep()
}
