package kvevents

import (
	"slices"
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/radix"
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

// hashOf is a block's published hash: the low word of its fingerprint,
// never 0 (0 means "no parent" on the wire).
func hashOf(fp eviction.Fingerprint) uint64 {
	if fp.Lo != 0 {
		return fp.Lo
	}
	return fp.Hi | 1
}

// deviceBlock is what the Collector remembers of a block the tree holds.
type deviceBlock struct {
	fp   eviction.Fingerprint
	hash uint64
}

// hostBlock counts the host tier's entries with one hash (a replaced entry
// leaves after its successor arrived) and whether subscribers were told.
type hostBlock struct {
	entries   int
	published bool
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
	device  map[blockstore.BlockID]deviceBlock
	devHash map[uint64]int // published device hashes, with multiplicity
	host    map[uint64]hostBlock
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
		device: map[blockstore.BlockID]deviceBlock{}, devHash: map[uint64]int{}, host: map[uint64]hostBlock{},
	}, nil
}

// published reports whether h is a block subscribers know of now.
func (c *Collector) published(h uint64) bool { return c.devHash[h] > 0 || c.host[h].published }

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
// medium if their parent is known (always, for a Collector attached
// before the engine cached anything).
// A namespace whose detail is None is not remembered, so its removals
// are not published either.
func (c *Collector) Stored(ns string, parent blockstore.BlockID, tokens []int32, blocks []blockstore.BlockID) {
	if c.policy.For(ns) == None {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var fp eviction.Fingerprint
	var parentHash uint64
	if parent != radix.NoParent {
		p, ok := c.device[parent]
		if !ok {
			return
		}
		fp, parentHash = p.fp, p.hash
	}
	salt := eviction.NamespaceSalt(ns)
	hashes := make([]uint64, len(blocks))
	for i, id := range blocks {
		fp = eviction.Chain(fp, salt, tokens[i*c.bs:(i+1)*c.bs])
		h := hashOf(fp)
		c.device[id] = deviceBlock{fp: fp, hash: h}
		c.devHash[h]++
		hashes[i] = h
	}
	c.stored(ns, MediumGPU, parentHash, hashes, tokens)
}

// Removed implements radix.Observer.
func (c *Collector) Removed(ns string, blocks []blockstore.BlockID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hashes := make([]uint64, 0, len(blocks))
	for _, id := range blocks {
		b, ok := c.device[id]
		if !ok {
			continue
		}
		delete(c.device, id)
		if c.devHash[b.hash]--; c.devHash[b.hash] == 0 {
			delete(c.devHash, b.hash)
		}
		hashes = append(hashes, b.hash)
	}
	if len(hashes) > 0 {
		c.removed(MediumGPU, hashes...)
	}
}

// HostStored implements eviction.Observer: the block is published on the
// CPU medium unless the host tier already holds it or its parent is
// unknown to subscribers.
// A namespace whose detail is None is left out, as in Stored.
func (c *Collector) HostStored(ns string, parent, fp eviction.Fingerprint, tokens []int32) {
	if c.policy.For(ns) == None {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := hashOf(fp)
	hb := c.host[h]
	hb.entries++
	var ph uint64
	if parent != (eviction.Fingerprint{}) {
		ph = hashOf(parent)
	}
	if !hb.published && (ph == 0 || c.published(ph)) {
		hb.published = true
		c.stored(ns, MediumCPU, ph, []uint64{h}, tokens)
	}
	c.host[h] = hb
}

// HostRemoved implements eviction.Observer.
func (c *Collector) HostRemoved(ns string, fp eviction.Fingerprint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := hashOf(fp)
	hb, ok := c.host[h]
	switch {
	case !ok: // stored before a Cleared
	case hb.entries > 1:
		hb.entries--
		c.host[h] = hb
	default:
		delete(c.host, h)
		if hb.published {
			c.removed(MediumCPU, h)
		}
	}
}

// Cleared implements eviction.Observer.
func (c *Collector) Cleared() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.device)
	clear(c.devHash)
	clear(c.host)
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
