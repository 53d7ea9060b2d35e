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
	"container/heap"
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
	"github.com/prefixd/prefixd/kvevents"
	"github.com/prefixd/prefixd/radix"
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
}

const model = "prefixd-sim"

// replica is one simulated prefixd.
type replica struct {
	pool    *blockstore.Pool
	tree    *radix.Tree
	m       *eviction.Manager
	col     *kvevents.Collector
	running int
	routed  int
	view    view // what the router knows of it
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

type run struct {
	done  time.Duration
	r     int
	table *blockstore.Table
	h     radix.Handle
	use   eviction.Use
}

type runHeap []*run

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return h[i].done < h[j].done }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*run)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// sim is one simulation's state.
type sim struct {
	c        Config
	clk      *clock.Fake
	epoch    time.Time
	now      time.Duration
	replicas []*replica
	inbox    []delivery // in delivery order: the delay is constant
	runs     runHeap
	rr       int
	res      Result
	keyBuf   []uint64
}

// Simulate routes records (prompts[i] is record i's prompt, as
// bench.PromptTokens gives) over c.Replicas replicas.
func Simulate(records []trace.Record, prompts [][]int32, c Config) (Result, error) {
	s, err := newSim(records, prompts, c)
	if err != nil {
		return Result{}, err
	}
	s.run(records, prompts)
	return s.result()
}

// newSim checks c and builds the replicas.
func newSim(records []trace.Record, prompts [][]int32, c Config) (*sim, error) {
	if c.BlockSize == 0 {
		c.BlockSize = blockstore.DefaultBlockSize
	}
	if c.TokenTime == 0 {
		c.TokenTime = 20 * time.Millisecond
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
	s := &sim{c: c, epoch: time.Unix(1_000_000_000, 0)}
	s.clk = clock.NewFake(s.epoch)
	s.res = Result{Policy: c.Policy.String(), Replicas: c.Replicas, BlocksPerReplica: c.BlocksPerReplica, EventDelay: c.EventDelay}
	maxTTL := c.TTL
	for _, r := range records {
		maxTTL = max(maxTTL, r.TTL())
	}
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
func (s *sim) run(records []trace.Record, prompts [][]int32) {
	for i := range records {
		at := records[i].Arrival()
		for len(s.runs) > 0 && s.runs[0].done <= at {
			s.finish()
		}
		s.advance(at)
		s.request(&records[i], prompts[i])
	}
	for len(s.runs) > 0 {
		s.finish()
	}
}

func (s *sim) newReplica(i int, maxTTL time.Duration) (*replica, error) {
	c := s.c
	pool, err := blockstore.New(blockstore.Config{NumBlocks: c.BlocksPerReplica, BlockSize: c.BlockSize})
	if err != nil {
		return nil, err
	}
	tree, err := radix.New(c.BlockSize)
	if err != nil {
		return nil, err
	}
	col, err := kvevents.NewCollector(kvevents.CollectorConfig{Model: model, BlockSize: c.BlockSize, Clock: s.clk,
		Emit: func(b kvevents.Batch) { s.inbox = append(s.inbox, delivery{at: s.now + c.EventDelay, r: i, b: b}) }})
	if err != nil {
		return nil, err
	}
	tree.SetObserver(col)
	m, err := eviction.New(eviction.Config{Tree: tree, Pool: pool, Clock: s.clk, DefaultTTL: c.TTL, MaxTTL: maxTTL, Observer: col})
	if err != nil {
		return nil, err
	}
	return &replica{pool: pool, tree: tree, m: m, col: col,
		view: view{keys: map[uint64]uint64{}, held: map[uint64]int{}}}, nil
}

// advance moves the clock to t, expiring what the replicas' TTLs end.
func (s *sim) advance(t time.Duration) {
	if t > s.now {
		s.clk.Advance(t - s.now)
		s.now = t
	}
	for _, r := range s.replicas {
		r.m.Sweep()
		r.col.EndStep()
	}
}

// finish ends the earliest running request.
func (s *sim) finish() {
	run := heap.Pop(&s.runs).(*run)
	s.advance(run.done)
	r := s.replicas[run.r]
	run.table.Release()
	r.m.Done(run.h, run.use)
	r.running--
	r.col.EndStep()
}

// request routes one request and runs it on the chosen replica.
func (s *sim) request(rec *trace.Record, p []int32) {
	s.deliver()
	ri := s.route(rec.Namespace, p)
	r := s.replicas[ri]
	r.routed++
	s.res.Requests++
	bs := s.c.BlockSize
	use := eviction.Use{TTL: rec.TTL(), Priority: rec.Priority}
	var hit eviction.Hit
	if !rec.CacheOff {
		s.res.QueryTokens += len(p) - 1
		hit = r.m.Lookup(rec.Namespace, p[:len(p)-1], use, nil)
	}
	out := rec.OutputTokens
	if out == 0 {
		out = rec.MaxTokens
	}
	tb := r.pool.NewTable()
	defer r.col.EndStep()
	if err := tb.Adopt(hit.Blocks); err != nil {
		panic("routesim: adopting a hit: " + err.Error())
	}
	need := blockstore.BlocksFor(len(p)+out, bs) - len(hit.Blocks)
	if r.pool.NumFree() < need && r.m.Reclaim(need) != nil {
		tb.Release()
		r.m.Release(hit.Handle)
		s.res.Rejected++
		return
	}
	s.res.HitTokens += hit.DeviceTokens
	if err := tb.Append(len(p) - tb.Len()); err != nil {
		panic("routesim: " + err.Error())
	}
	h := hit.Handle
	if !rec.CacheOff {
		full := len(p) / bs
		var err error
		if _, h, err = r.m.Extend(rec.Namespace, h, p[:full*bs], tb.Blocks()[:full], use); err != nil {
			panic("routesim: " + err.Error())
		}
	}
	if err := tb.Append(out); err != nil {
		panic("routesim: " + err.Error())
	}
	r.running++
	heap.Push(&s.runs, &run{done: s.now + time.Duration(out)*s.c.TokenTime, r: ri, table: tb, h: h, use: use})
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
			if i := (start + j) % n; s.replicas[i].running < s.replicas[best].running {
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
		u := r.pool.Stats().InUse
		minQ, maxQ = min(minQ, r.running), max(maxQ, r.running)
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
		score := norm(r.running, minQ, maxQ) + norm(r.pool.Stats().InUse, minU, maxU)
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
	if res.QueryTokens > 0 {
		res.HitRate = float64(res.HitTokens) / float64(res.QueryTokens)
	}
	most := 0
	for _, r := range s.replicas {
		most = max(most, r.routed)
		if err := r.m.Check(); err != nil {
			return res, fmt.Errorf("routesim: cache invariants after the simulation: %w", err)
		}
	}
	if res.Requests > 0 {
		res.Imbalance = float64(most) * float64(len(s.replicas)) / float64(res.Requests)
	}
	return res, nil
}

// referenceName is the Policy of Sweep's reference results.
const referenceName = "one replica, all blocks"

// Sweep runs every policy for every replica count, and for each count the
// reference: one replica with the blocks of all of them together.
func Sweep(records []trace.Record, prompts [][]int32, replicas []int, policies []Policy, base Config) ([]Result, error) {
	var out []Result
	for _, n := range replicas {
		ref := base
		ref.Replicas, ref.BlocksPerReplica, ref.Policy = 1, n*base.BlocksPerReplica, RoundRobin
		r, err := Simulate(records, prompts, ref)
		if err != nil {
			return nil, err
		}
		r.Policy = referenceName
		out = append(out, r)
		for _, p := range policies {
			c := base
			c.Replicas, c.Policy = n, p
			if r, err = Simulate(records, prompts, c); err != nil {
				return nil, err
			}
			out = append(out, r)
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
