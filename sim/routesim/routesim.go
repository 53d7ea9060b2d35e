// Package routesim simulates several prefixd replicas behind a router, to
// measure what routing does to the prefix-cache hit rate. Each replica is
// the real prefix tree, block pool and eviction manager on a fake clock,
// with a kvevents.Collector on it; the router learns what each replica
// caches only from those KV events, delivered a configurable delay late,
// and keys blocks as llm-d's index does: its own chained key over the
// model (or tenant LoRA) name and each block's tokens, found through the
// events' parent hashes. No model runs: like the TTL simulator, a request
// looks its prompt up, takes blocks for the rest of its prompt and its
// output, caches its prompt's whole blocks and holds everything for its
// service time.
package routesim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/kvevents"
	"github.com/prefixd/prefixd/radix"
	"github.com/prefixd/prefixd/sim/cachesim"
	"github.com/prefixd/prefixd/trace"
)

// Policy is how the router picks a replica.
type Policy int

// Routing policies.
const (
	// RoundRobin sends each request to the next replica in turn.
	RoundRobin Policy = iota
	// LeastLoaded sends each request to a replica with the fewest running
	// requests.
	LeastLoaded
	// PrefixAware scores replicas as llm-d's endpoint picker configured in
	// deploy/kubernetes does: 3 x the fraction of the prompt's blocks the
	// replica holds as a leading run (learned from its KV events), plus 1 x
	// its queue score and 1 x its free-KV score (each min-max normalised
	// over the replicas), and picks the best.
	PrefixAware
)

var policyNames = []string{"round-robin", "least-loaded", "prefix-aware"}

// String returns the policy's name.
func (p Policy) String() string { return policyNames[p] }

// ParsePolicy returns the Policy named s.
func ParsePolicy(s string) (Policy, error) {
	for i, n := range policyNames {
		if n == s {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("routesim: unknown policy %q (want round-robin, least-loaded or prefix-aware)", s)
}

// Config configures one simulation. Zero values take the defaults.
type Config struct {
	Replicas         int    // required
	BlocksPerReplica int    // KV pool of each replica, in blocks; required
	BlockSize        int    // tokens per block; default 16
	Policy           Policy // default RoundRobin
	// EventDelay is how long after a replica's step its KV events reach
	// the router.
	EventDelay time.Duration
	// TokenTime is the simulated time per output token, for how long a
	// request holds its blocks; default 20 ms.
	TokenTime time.Duration
	// TTL is the replicas' default cache TTL; default 10 minutes.
	TTL time.Duration
	// Progress, if not nil, is called by Sweep after each simulation with
	// how many of them are done.
	Progress func(done, total int)
	// SharedTierBlocks, if positive, gives the replicas a shared remote
	// tier of that many blocks (see sharedTier), whose blocks expire
	// SharedTierTTL after their last use (default one hour).
	SharedTierBlocks int
	SharedTierTTL    time.Duration
}

// Result is one simulation's outcome.
type Result struct {
	Policy           string        `json:"policy"`
	Replicas         int           `json:"replicas"`
	BlocksPerReplica int           `json:"blocks_per_replica"`
	EventDelay       time.Duration `json:"event_delay"`
	Requests         int           `json:"requests"`
	// Rejected requests found no room even after eviction; they count as
	// misses.
	Rejected    int `json:"rejected"`
	QueryTokens int `json:"query_tokens"` // prompt tokens looked up
	// HitTokens are prompt tokens served from the cache: prefill saved.
	HitTokens int     `json:"hit_tokens"`
	HitRate   float64 `json:"hit_rate"`
	// Imbalance is the busiest replica's requests over the mean.
	Imbalance float64 `json:"imbalance"`
	Batches   int     `json:"event_batches"` // KV event messages the router applied
	// SharedHitTokens are the HitTokens the shared tier served.
	SharedTierBlocks int `json:"shared_tier_blocks,omitempty"`
	SharedHitTokens  int `json:"shared_hit_tokens,omitempty"`
}

const model = "prefixd-sim"

// replica is one simulated prefixd.
type replica struct {
	cache *cachesim.Replica
	// tree and m are the cache's, which the router learns of only through
	// col's events; tests compare them with the view.
	tree   *radix.Tree
	m      *eviction.Manager
	col    *kvevents.Collector
	routed int
	view   view // what the router knows of it
}

// view is the router's index of one replica, as llm-d keeps it: engine
// hash to its own key, and the keys held on the GPU.
type view struct {
	keys map[uint64]uint64
	held map[uint64]int
}

// delivery is a batch of events on its way to the router.
type delivery struct {
	at time.Duration
	r  int
	b  kvevents.Batch
}

// sim is one simulation's state.
type sim struct {
	c        Config
	clk      *clock.Fake
	now      time.Duration
	replicas []*replica
	inbox    []delivery // in delivery order: the delay is constant
	rr       int
	res      Result
	keyBuf   []uint64
	shared   *sharedTier // nil without one
	fpBuf    []kvcache.Fingerprint
}

// Simulate routes records (prompts[i] is record i's prompt, as
// cachesim.PromptTokens gives) over c.Replicas replicas.
func Simulate(records []trace.Record, prompts [][]int32, c Config) (Result, error) {
	s, err := newSim(records, prompts, c)
	if err != nil {
		return Result{}, err
	}
	if err := s.run(records, prompts); err != nil {
		return Result{}, err
	}
	return s.result()
}

// newSim checks c and builds the replicas.
func newSim(records []trace.Record, prompts [][]int32, c Config) (*sim, error) {
	if c.BlockSize == 0 {
		c.BlockSize = blockstore.DefaultBlockSize
	}
	if c.TTL == 0 {
		c.TTL = 10 * time.Minute
	}
	switch {
	case c.Replicas < 1 || c.BlocksPerReplica < 1:
		return nil, fmt.Errorf("routesim: need at least one replica (%d) of at least one block (%d)", c.Replicas, c.BlocksPerReplica)
	case c.EventDelay < 0 || c.TokenTime < 0 || c.TTL < 0:
		return nil, errors.New("routesim: EventDelay, TokenTime and TTL must not be negative")
	case len(prompts) != len(records):
		return nil, errors.New("routesim: one prompt per record")
	}
	s := &sim{c: c, clk: clock.NewFake(time.Unix(1_000_000_000, 0))}
	s.res = Result{Policy: c.Policy.String(), Replicas: c.Replicas, BlocksPerReplica: c.BlocksPerReplica, EventDelay: c.EventDelay}
	if c.SharedTierBlocks > 0 {
		if c.SharedTierTTL <= 0 {
			c.SharedTierTTL = time.Hour
		}
		s.shared = newSharedTier(c.SharedTierBlocks, c.SharedTierTTL)
		s.res.Policy += sharedSuffix
		s.res.SharedTierBlocks = c.SharedTierBlocks
	}
	maxTTL := cachesim.MaxTTL(c.TTL, records)
	for i := range c.Replicas {
		rep, err := s.newReplica(i, maxTTL)
		if err != nil {
			return nil, err
		}
		s.replicas = append(s.replicas, rep)
	}
	return s, nil
}

// run routes and serves every record, then lets every request finish.
func (s *sim) run(records []trace.Record, prompts [][]int32) error {
	for i := range records {
		at := records[i].Arrival()
		for s.finish(at) {
		}
		s.advance(at)
		if err := s.request(&records[i], prompts[i]); err != nil {
			return err
		}
	}
	for s.finish(math.MaxInt64) {
	}
	return nil
}

func (s *sim) newReplica(i int, maxTTL time.Duration) (*replica, error) {
	c := s.c
	col, err := kvevents.NewCollector(kvevents.CollectorConfig{Model: model, BlockSize: c.BlockSize, Clock: s.clk,
		Emit: func(b kvevents.Batch) { s.inbox = append(s.inbox, delivery{at: s.now + c.EventDelay, r: i, b: b}) }})
	if err != nil {
		return nil, err
	}
	cache, err := cachesim.New(cachesim.Config{Blocks: c.BlocksPerReplica, BlockSize: c.BlockSize, TokenTime: c.TokenTime,
		DefaultTTL: c.TTL, MaxTTL: maxTTL, Clock: s.clk, Observer: col})
	if err != nil {
		return nil, err
	}
	return &replica{cache: cache, tree: cache.Tree(), m: cache.Manager(), col: col,
		view: view{keys: map[uint64]uint64{}, held: map[uint64]int{}}}, nil
}

// advance moves the clock to t, expiring what the replicas' TTLs end.
func (s *sim) advance(t time.Duration) {
	s.now = max(s.now, t)
	for _, r := range s.replicas {
		r.cache.Advance(t)
		r.col.EndStep()
	}
}

// finish ends the earliest running request of all the replicas if it ends
// by t, and reports whether there was one.
func (s *sim) finish(t time.Duration) bool {
	var first *replica
	for _, r := range s.replicas {
		if d, ok := r.cache.NextDone(); ok && d <= t && (first == nil || d < t) {
			first, t = r, d
		}
	}
	if first == nil {
		return false
	}
	s.advance(t)
	first.cache.Finish()
	first.col.EndStep()
	return true
}

// request routes one request and runs it on the chosen replica.
func (s *sim) request(rec *trace.Record, p []int32) error {
	s.deliver()
	r := s.replicas[s.route(rec.Namespace, p)]
	r.routed++
	defer r.col.EndStep()
	before := r.cache.Counters()
	if err := r.cache.Serve(rec, p); err != nil {
		return err
	}
	after := r.cache.Counters()
	if s.shared != nil && !rec.CacheOff && after.Rejected == before.Rejected {
		bs := s.c.BlockSize
		s.fpBuf = kvcache.AppendChain(s.fpBuf[:0], kvcache.Fingerprint{}, kvcache.NamespaceSalt(rec.Namespace), p[:len(p)-1], bs)
		local := (after.HitTokens - before.HitTokens) / bs
		s.res.SharedHitTokens += bs * s.shared.serve(s.fpBuf, local, len(p)/bs, s.now)
	}
	return nil
}

// deliver applies the event batches that have reached the router.
func (s *sim) deliver() {
	n := 0
	for ; n < len(s.inbox) && s.inbox[n].at <= s.now; n++ {
		s.replicas[s.inbox[n].r].view.apply(s.inbox[n].b)
		s.res.Batches++
	}
	s.inbox = s.inbox[n:]
}

// routerKey is the router's own key of a block: a chain over the model
// name and each block's tokens, as llm-d's token processor computes.
func routerKey(parent uint64, model string, tokens []int32) uint64 {
	var d xxhash.Digest
	d.Reset()
	var p [8]byte
	binary.LittleEndian.PutUint64(p[:], parent)
	d.Write(p[:])
	d.WriteString(model)
	if len(tokens) > 0 {
		d.Write(unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), 4*len(tokens)))
	}
	return d.Sum64()
}

// apply updates the router's index of a replica from one batch, GPU
// medium only (the simulated replicas have no host tier).
func (v *view) apply(b kvevents.Batch) {
	for _, ev := range b.Events {
		switch ev.Kind {
		case kvevents.BlockStored:
			if ev.Medium != kvevents.MediumGPU {
				continue
			}
			var parent uint64
			if ev.Parent != 0 {
				k, ok := v.keys[ev.Parent]
				if !ok {
					continue // as llm-d: a chain it cannot place is dropped
				}
				parent = k
			}
			name := ev.LoraName
			if name == "" {
				name = model
			}
			for i, h := range ev.Hashes {
				parent = routerKey(parent, name, ev.Tokens[i*ev.BlockSize:(i+1)*ev.BlockSize])
				v.keys[h] = parent
				v.held[parent]++
			}
		case kvevents.BlockRemoved:
			if ev.Medium != kvevents.MediumGPU {
				continue
			}
			for _, h := range ev.Hashes {
				if k, ok := v.keys[h]; ok {
					delete(v.keys, h)
					if v.held[k]--; v.held[k] <= 0 {
						delete(v.held, k)
					}
				}
			}
		case kvevents.AllBlocksCleared:
			clear(v.keys)
			clear(v.held)
		}
	}
}

// route picks a replica for a prompt of namespace ns.
func (s *sim) route(ns string, p []int32) int {
	n := len(s.replicas)
	start := s.rr % n
	s.rr++
	switch s.c.Policy {
	case LeastLoaded:
		best := start
		for j := range n {
			if i := (start + j) % n; s.replicas[i].cache.Running() < s.replicas[best].cache.Running() {
				best = i
			}
		}
		return best
	case PrefixAware:
		return s.prefixAware(ns, p, start)
	}
	return start
}

func (s *sim) prefixAware(ns string, p []int32, start int) int {
	bs := s.c.BlockSize
	name := kvevents.TenantModel(model, ns)
	s.keyBuf = s.keyBuf[:0]
	var k uint64
	for i := 0; (i+1)*bs < len(p); i++ { // the blocks a lookup can hit
		k = routerKey(k, name, p[i*bs:(i+1)*bs])
		s.keyBuf = append(s.keyBuf, k)
	}
	minQ, maxQ, minU, maxU := math.MaxInt, 0, math.MaxInt, 0
	for _, r := range s.replicas {
		q, u := r.cache.Running(), r.cache.Stats().InUse
		minQ, maxQ = min(minQ, q), max(maxQ, q)
		minU, maxU = min(minU, u), max(maxU, u)
	}
	norm := func(v, lo, hi int) float64 { // 1 for the least, 0 for the most
		if hi == lo {
			return 1
		}
		return float64(hi-v) / float64(hi-lo)
	}
	best, bestScore := start, math.Inf(-1)
	for j := range s.replicas {
		i := (start + j) % len(s.replicas)
		r := s.replicas[i]
		matched := 0
		for _, key := range s.keyBuf {
			if r.view.held[key] == 0 {
				break
			}
			matched++
		}
		score := norm(r.cache.Running(), minQ, maxQ) + norm(r.cache.Stats().InUse, minU, maxU)
		if len(s.keyBuf) > 0 {
			score += 3 * float64(matched) / float64(len(s.keyBuf))
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}

func (s *sim) result() (Result, error) {
	res := s.res
	most := 0
	for _, r := range s.replicas {
		most = max(most, r.routed)
		n := r.cache.Counters()
		res.Requests += n.Requests
		res.Rejected += n.Rejected
		res.QueryTokens += n.QueryTokens
		res.HitTokens += n.HitTokens
		if err := r.cache.Check(); err != nil {
			return res, fmt.Errorf("routesim: cache invariants after the simulation: %w", err)
		}
	}
	res.HitTokens += res.SharedHitTokens
	if res.QueryTokens > 0 {
		res.HitRate = float64(res.HitTokens) / float64(res.QueryTokens)
	}
	if res.Requests > 0 {
		res.Imbalance = float64(most) * float64(len(s.replicas)) / float64(res.Requests)
	}
	return res, nil
}

// referenceName is the Policy of Sweep's reference results.
const referenceName = "one replica, all blocks"

// sharedSuffix follows the Policy of results with a shared tier.
const sharedSuffix = " + shared tier"

// Sweep runs every policy for every replica count, and for each count the
// reference: one replica with the blocks of all of them together. With
// base.SharedTierBlocks, every policy on more than one replica runs again
// with the shared tier.
func Sweep(records []trace.Record, prompts [][]int32, replicas []int, policies []Policy, base Config) ([]Result, error) {
	var out []Result
	total := len(replicas) * (1 + len(policies))
	if base.SharedTierBlocks > 0 {
		for _, n := range replicas {
			if n > 1 {
				total += len(policies)
			}
		}
	}
	done := func() {
		if base.Progress != nil {
			base.Progress(len(out), total)
		}
	}
	for _, n := range replicas {
		ref := base
		ref.Replicas, ref.BlocksPerReplica, ref.Policy = 1, n*base.BlocksPerReplica, RoundRobin
		r, err := Simulate(records, prompts, ref)
		if err != nil {
			return nil, err
		}
		r.Policy = referenceName
		out = append(out, r)
		done()
		for _, p := range policies {
			c := base
			c.Replicas, c.Policy, c.SharedTierBlocks = n, p, 0
			if r, err = Simulate(records, prompts, c); err != nil {
				return nil, err
			}
			out = append(out, r)
			done()
			if base.SharedTierBlocks > 0 && n > 1 {
				c.SharedTierBlocks = base.SharedTierBlocks
				if r, err = Simulate(records, prompts, c); err != nil {
					return nil, err
				}
				out = append(out, r)
				done()
			}
		}
	}
	return out, nil
}

// WriteTable writes results as a Markdown table.
func WriteTable(w io.Writer, results []Result) error {
	var b strings.Builder
	b.WriteString("| replicas | blocks each | routing | hit rate | prefill tokens saved | load imbalance (max/mean) | rejected |\n")
	b.WriteString("|---:|---:|---|---:|---:|---:|---:|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %d | %d | %s | %.1f%% | %d | %.2f | %d |\n", r.Replicas, r.BlocksPerReplica, r.Policy,
			100*r.HitRate, r.HitTokens, r.Imbalance, r.Rejected)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
