package eviction

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/internal/minheap"
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/radix"
)

// ErrNothingEvictable means Reclaim freed what it could and the pool is
// still short: the caller must preempt a sequence or reject the request.
var ErrNothingEvictable = errors.New("eviction: not enough evictable blocks")

// Config configures a Manager.
type Config struct {
	// Tree and Pool are the prefix index and block pool the Manager keeps
	// consistent: each block the tree holds carries the pool's cache
	// reference. Required.
	Tree *radix.Tree
	Pool *blockstore.Pool
	// Clock defaults to the system clock.
	Clock clock.Clock
	// DefaultTTL applies to requests that ask for none; default 5 minutes.
	DefaultTTL time.Duration
	// MaxTTL bounds what a request may ask for; default 1 hour.
	MaxTTL time.Duration
	// MaxPinnedFraction caps operator-pinned blocks at this fraction of the
	// pool, in (0, 1]; default 0.5.
	MaxPinnedFraction float64
	// NamespaceShare, in (0, 1], is each namespace's share of the pool:
	// under pressure, the blocks of namespaces that hold more than their
	// share in the tree are evicted first (lowest priority, then least
	// recently used, among them), down to their share, before any other
	// namespace's. 0 (the default) gives namespaces no share: one order
	// for all.
	NamespaceShare float64
	// Tiers, fastest first, are the tiers below the device pool: the first
	// receives blocks evicted under pressure, and Admit promotes from each
	// in turn. Their blocks are read and written through Pool.Storage(),
	// which must then be set. The Manager does not close them.
	Tiers []Tier
	// Samples receives per-event measurements; optional.
	Samples kvcache.Samples
	// Observer is told of full flushes, and of the HostTier's entries
	// (other tiers take their observer in their own configuration);
	// optional. The tree's own changes go to its radix.Observer.
	Observer Observer
}

// Use is what a request says about the cache: how long to keep what it
// uses and how much it matters.
type Use struct {
	TTL      time.Duration // 0 means the default TTL
	Priority int32         // higher is kept longer under pressure, for TTL (see notePriority)
	// Readmit marks the Admit of a request admitted again after it was
	// preempted: it refreshes the prefix but adds no hit, the request's
	// first admission having counted it.
	Readmit bool
	// Breakpoints give the prefixes they end longer TTLs than TTL: each
	// whole block within a breakpoint's first Tokens tokens is kept for
	// the longest TTL of the breakpoints that cover it (each at most the
	// maximum TTL). The tree is split at each breakpoint's last whole
	// block, so the blocks after it keep TTL. Tokens ascend.
	Breakpoints []Breakpoint
}

// Breakpoint gives the prompt's first Tokens tokens a TTL (Anthropic's
// cache_control breakpoints).
type Breakpoint struct {
	Tokens int
	TTL    time.Duration
}

// Manager keeps the prefix tree, the block pool's cache references and the
// host tier consistent, and decides what leaves the cache. See the package
// documentation.
type Manager struct {
	tree  *radix.Tree
	pool  *blockstore.Pool
	clk   clock.Clock
	tiers []Tier
	samp  kvcache.Samples
	obs   Observer
	bsize int

	defaultTTL, maxTTL time.Duration
	pinBudget          int
	nsShare            int // blocks; 0: no per-namespace share

	expiry    minheap.Heap[expiryEntry] // at most one entry per node; see Sweep
	victims   minheap.Heap[*radix.Node] // scratch for Reclaim
	victimsAt int64                     // the time Reclaim ranks victims at
	pins      map[string]*operatorPin
	pinned    map[blockstore.BlockID]int // operator pins holding each block

	evicted  [kvcache.NumReasons]atomic.Uint64
	demoted  atomic.Uint64
	promoted atomic.Uint64

	blockBuf []blockstore.BlockID
	tokenBuf []int32
	dataBuf  []byte
}

// operatorPin keeps its blocks, not its nodes: a later split changes which
// nodes make up the path but never which blocks.
type operatorPin struct {
	ns     string
	tokens []int32
	blocks []blockstore.BlockID
	h      radix.Handle
}

// New returns a Manager over cfg's tree and pool.
func New(cfg Config) (*Manager, error) {
	if cfg.Tree == nil || cfg.Pool == nil {
		return nil, errors.New("eviction: Config.Tree and Config.Pool are required")
	}
	if cfg.Tree.BlockSize() != cfg.Pool.BlockSize() {
		return nil, fmt.Errorf("eviction: tree block size %d != pool block size %d", cfg.Tree.BlockSize(), cfg.Pool.BlockSize())
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.DefaultTTL == 0 {
		cfg.DefaultTTL = 5 * time.Minute
	}
	if cfg.MaxTTL == 0 {
		cfg.MaxTTL = time.Hour
	}
	if cfg.MaxPinnedFraction == 0 {
		cfg.MaxPinnedFraction = 0.5
	}
	if cfg.MaxPinnedFraction < 0 || cfg.MaxPinnedFraction > 1 {
		return nil, fmt.Errorf("eviction: Config.MaxPinnedFraction must be in (0, 1], got %v", cfg.MaxPinnedFraction)
	}
	if cfg.NamespaceShare < 0 || cfg.NamespaceShare > 1 {
		return nil, fmt.Errorf("eviction: Config.NamespaceShare must be in [0, 1], got %v", cfg.NamespaceShare)
	}
	if len(cfg.Tiers) > 0 && cfg.Pool.Storage() == nil {
		return nil, errors.New("eviction: a cache tier needs a pool with Storage")
	}
	m := &Manager{
		tree:      cfg.Tree,
		pool:      cfg.Pool,
		clk:       cfg.Clock,
		tiers:     cfg.Tiers,
		samp:      cfg.Samples,
		obs:       cfg.Observer,
		bsize:     cfg.Pool.BlockSize(),
		pinBudget: int(cfg.MaxPinnedFraction * float64(cfg.Pool.NumBlocks())),
		nsShare:   int(cfg.NamespaceShare * float64(cfg.Pool.NumBlocks())),
		pins:      map[string]*operatorPin{},
		pinned:    map[blockstore.BlockID]int{},
	}
	for _, t := range cfg.Tiers {
		if h, ok := t.(*HostTier); ok && cfg.Observer != nil {
			h.setObserver(cfg.Observer)
		}
	}
	m.expiry.Less = func(a, b expiryEntry) bool { return a.deadline < b.deadline }
	m.victims.Less = func(a, b *radix.Node) bool {
		if pa, pb := priority(a, m.victimsAt), priority(b, m.victimsAt); pa != pb {
			return pa < pb
		}
		return a.Meta.LastAccess < b.Meta.LastAccess
	}
	if err := m.SetTTLs(cfg.DefaultTTL, cfg.MaxTTL); err != nil {
		return nil, err
	}
	return m, nil
}

// Counters returns the Manager's running totals. It is safe to call from
// any goroutine.
func (m *Manager) Counters() kvcache.Counters {
	var c kvcache.Counters
	for r := range c.Evicted {
		c.Evicted[r] = m.evicted[r].Load()
	}
	for _, t := range m.tiers {
		c.Evicted[kvcache.ReasonPressure] += t.Dropped()
	}
	c.Demoted = m.demoted.Load()
	c.Promoted = m.promoted.Load()
	return c
}

// TTLs returns the default and maximum TTL.
func (m *Manager) TTLs() (def, maxTTL time.Duration) { return m.defaultTTL, m.maxTTL }

// SetTTLs changes the default and maximum TTL for requests from now on.
func (m *Manager) SetTTLs(def, maxTTL time.Duration) error {
	if def <= 0 || maxTTL <= 0 || def > maxTTL {
		return fmt.Errorf("%w: need 0 < default (%v) <= max (%v)", kvcache.ErrBadTTL, def, maxTTL)
	}
	m.defaultTTL, m.maxTTL = def, maxTTL
	return nil
}

// ResolveTTL returns the TTL a request gets: the default for 0, the value
// itself within (0, max], an error otherwise.
func (m *Manager) ResolveTTL(d time.Duration) (time.Duration, error) {
	switch {
	case d < 0:
		return 0, fmt.Errorf("%w: %v is negative", kvcache.ErrBadTTL, d)
	case d > m.maxTTL:
		return 0, fmt.Errorf("%w: %v is above the maximum %v", kvcache.ErrBadTTL, d, m.maxTTL)
	}
	return m.ttlFor(d), nil
}

// ttlFor is the TTL a use gets: the default for 0 (or less), and at most
// the maximum, which may have been lowered since the request was accepted.
func (m *Manager) ttlFor(d time.Duration) time.Duration {
	if d <= 0 {
		return m.defaultTTL
	}
	return min(d, m.maxTTL)
}

func (m *Manager) now() int64 { return m.clk.Now().UnixNano() }
