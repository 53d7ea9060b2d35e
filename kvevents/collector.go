package kvevents

import (
	"slices"
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/kvcache"
)

// TenantModel returns the lora_name under which namespace ns's blocks are
// published for a replica serving model: the model itself for the default
// namespace "", else "<model>:<ns>".
func TenantModel(model, ns string) string {
	if ns == "" {
		return model
	}
	return model + ":" + ns
}

// tenantLoraID is the lora_id of namespace ns's blocks: a positive int31
// derived from ns (vLLM's LoRA IDs are positive), 0 (nil) for "".
func tenantLoraID(ns string) int64 {
	if ns == "" {
		return 0
	}
	return int64(xxhash.Sum64String(ns)%(1<<31-1)) + 1
}

// hashOf is a block's published hash: the low word of the fingerprint the
// radix tree computed when the block was inserted, never 0 (0 means "no
// parent" on the wire).
func hashOf(fp kvcache.Fingerprint) uint64 {
	if fp.Lo != 0 {
		return fp.Lo
	}
	return fp.Hi | 1
}

// tierBlock counts a lower tier's entries with one hash (a replaced entry
// leaves after its successor arrived) and whether subscribers were told.
type tierBlock struct {
	entries   int
	published bool
}

// tierKey is a block's hash in one lower tier.
type tierKey struct {
	tier kvcache.Tier
	hash uint64
}

// mediumOf is the medium a tier's blocks are published on.
func mediumOf(t kvcache.Tier) string {
	switch t {
	case kvcache.TierHost:
		return MediumCPU
	case kvcache.TierDisk:
		return MediumDisk
	}
	return MediumGPU
}

// CollectorConfig configures a Collector.
type CollectorConfig struct {
	// Model is the served model name, the base of TenantModel. Required.
	Model string
	// BlockSize is the tokens per block, as the engine's. Required.
	BlockSize int
	// Clock stamps batches; default the system clock.
	Clock clock.Clock
	// Emit receives each step's batch from EndStep, on the scheduler
	// goroutine; it must not block and owns the batch. Required.
	Emit func(Batch)
	// Policy chooses what each namespace's events reveal; the zero
	// Policy publishes everything, as vLLM does.
	Policy Policy
}

// Collector turns the cache's observer calls into vLLM KV events, one
// batch per engine step. It implements engine.CacheEvents and is safe for
// concurrent use (the host tier reports removals from its own goroutines).
type Collector struct {
	model  string
	bs     int
	clk    clock.Clock
	emit   func(Batch)
	policy Policy

	mu      sync.Mutex
	devHash map[uint64]int // published device hashes, with multiplicity
	tiers   map[tierKey]tierBlock
	pending []Event
}

// NewCollector returns a Collector that knows of no block yet: attach it
// to an engine before the engine caches anything.
func NewCollector(cfg CollectorConfig) (*Collector, error) {
	switch {
	case cfg.Model == "":
		return nil, errorf("CollectorConfig.Model is required")
	case cfg.BlockSize <= 0:
		return nil, errorf("CollectorConfig.BlockSize must be positive, got %d", cfg.BlockSize)
	case cfg.Emit == nil:
		return nil, errorf("CollectorConfig.Emit is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	return &Collector{
		model: cfg.Model, bs: cfg.BlockSize, clk: cfg.Clock, emit: cfg.Emit, policy: cfg.Policy,
		devHash: map[uint64]int{}, tiers: map[tierKey]tierBlock{},
	}, nil
}

// published reports whether h is a block subscribers know of now.
func (c *Collector) published(h uint64) bool {
	return c.devHash[h] > 0 || c.tiers[tierKey{kvcache.TierHost, h}].published || c.tiers[tierKey{kvcache.TierDisk, h}].published
}

// stored appends a BlockStored of one chain, merging it into the previous
// event when that one ends where this one starts. Under the Hashes
// detail the event carries no tokens and no lora_name.
func (c *Collector) stored(ns, medium string, parent uint64, hashes []uint64, tokens []int32) {
	full := c.policy.For(ns) == Full
	var loraID int64
	var loraName string
	if ns != "" {
		loraID = tenantLoraID(ns)
		if full {
			loraName = TenantModel(c.model, ns)
		}
	}
	if !full {
		tokens = nil
	}
	if n := len(c.pending); n > 0 {
		last := &c.pending[n-1]
		if last.Kind == BlockStored && last.Medium == medium && parent != 0 &&
			last.Hashes[len(last.Hashes)-1] == parent && last.LoraID == loraID && last.LoraName == loraName {
			last.Hashes = append(last.Hashes, hashes...)
			last.Tokens = append(last.Tokens, tokens...)
			return
		}
	}
	c.pending = append(c.pending, Event{Kind: BlockStored, Hashes: hashes, Parent: parent, Tokens: slices.Clone(tokens),
		BlockSize: c.bs, Medium: medium, LoraID: loraID, LoraName: loraName})
}

// removed appends a BlockRemoved, merging it into the previous event when
// that one is a BlockRemoved of the same medium.
func (c *Collector) removed(medium string, hashes ...uint64) {
	if n := len(c.pending); n > 0 {
		if last := &c.pending[n-1]; last.Kind == BlockRemoved && last.Medium == medium {
			last.Hashes = append(last.Hashes, hashes...)
			return
		}
	}
	c.pending = append(c.pending, Event{Kind: BlockRemoved, Hashes: hashes, Medium: medium})
}

// Stored implements radix.Observer: the blocks are published on the GPU
// medium, under the hashes of the fingerprints the tree computed, if their
// parent is known (always, for a Collector attached before the engine
// cached anything). A namespace whose detail is None is not remembered, so
// its removals are not published either.
func (c *Collector) Stored(ns string, parent kvcache.Fingerprint, tokens []int32, blocks []blockstore.BlockID, fps []kvcache.Fingerprint) {
	if c.policy.For(ns) == None {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var parentHash uint64
	if parent != (kvcache.Fingerprint{}) {
		if parentHash = hashOf(parent); c.devHash[parentHash] == 0 {
			return
		}
	}
	hashes := make([]uint64, len(fps))
	for i, fp := range fps {
		hashes[i] = hashOf(fp)
		c.devHash[hashes[i]]++
	}
	c.stored(ns, MediumGPU, parentHash, hashes, tokens)
}

// Removed implements radix.Observer.
func (c *Collector) Removed(ns string, blocks []blockstore.BlockID, fps []kvcache.Fingerprint) {
	if c.policy.For(ns) == None {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	hashes := make([]uint64, 0, len(fps))
	for _, fp := range fps {
		h := hashOf(fp)
		switch c.devHash[h] {
		case 0: // never published: its parent was unknown
			continue
		case 1:
			delete(c.devHash, h)
		default:
			c.devHash[h]--
		}
		hashes = append(hashes, h)
	}
	if len(hashes) > 0 {
		c.removed(MediumGPU, hashes...)
	}
}

// TierStored implements eviction.Observer: the block is published on the
// tier's medium (CPU for the host tier, DISK for the disk tier) unless
// that tier already holds it or its parent is unknown to subscribers.
// A namespace whose detail is None is left out, as in Stored.
func (c *Collector) TierStored(t kvcache.Tier, ns string, parent, fp kvcache.Fingerprint, tokens []int32) {
	if c.policy.For(ns) == None {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := tierKey{t, hashOf(fp)}
	tb := c.tiers[k]
	tb.entries++
	var ph uint64
	if parent != (kvcache.Fingerprint{}) {
		ph = hashOf(parent)
	}
	if !tb.published && (ph == 0 || c.published(ph)) {
		tb.published = true
		c.stored(ns, mediumOf(t), ph, []uint64{k.hash}, tokens)
	}
	c.tiers[k] = tb
}

// TierRemoved implements eviction.Observer.
func (c *Collector) TierRemoved(t kvcache.Tier, ns string, fp kvcache.Fingerprint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := tierKey{t, hashOf(fp)}
	tb, ok := c.tiers[k]
	switch {
	case !ok: // stored before a Cleared
	case tb.entries > 1:
		tb.entries--
		c.tiers[k] = tb
	default:
		delete(c.tiers, k)
		if tb.published {
			c.removed(mediumOf(t), k.hash)
		}
	}
}

// Cleared implements eviction.Observer.
func (c *Collector) Cleared() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.devHash)
	clear(c.tiers)
	c.pending = append(c.pending, Event{Kind: AllBlocksCleared})
}

// EndStep hands the step's events, if any, to Emit as one batch.
func (c *Collector) EndStep() {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	b := Batch{TS: float64(c.clk.Now().UnixNano()) / 1e9, Events: c.pending}
	c.pending = nil
	c.mu.Unlock()
	c.emit(b)
}
