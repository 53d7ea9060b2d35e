// Package cachesim simulates one prefixd replica's prefix cache for the
// trace simulators (bench's TTL simulator and routesim): the real prefix
// tree, block pool and eviction manager on a fake clock, and no model. A
// request is admitted through eviction.Manager.Admit, the engine's own
// admission step (its cached prefix and room for the rest), takes blocks for the rest of its prompt and
// its output, caches its prompt's whole blocks, holds everything for its
// service time and finishes.
package cachesim

import (
	"fmt"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/internal/minheap"
	"github.com/prefixd/prefixd/radix"
	"github.com/prefixd/prefixd/trace"
)

// Observer is told of a replica's cache changes, as a kvevents.Collector
// is: the tree's stores and removals and the eviction manager's flushes.
type Observer interface {
	radix.Observer
	eviction.Observer
}

// Config configures New. Zero values take the defaults.
type Config struct {
	Blocks    int // KV pool, in blocks; required
	BlockSize int // tokens per block; default blockstore.DefaultBlockSize
	// TokenTime is the simulated time a request takes per output token
	// (output_tokens where the trace has it, else max_tokens); it holds its
	// blocks that long. Prefill takes no time. Default 20 ms.
	TokenTime time.Duration
	// DefaultTTL is the cache TTL of requests that name none, and MaxTTL
	// the longest one may name (see MaxTTL); zero takes the eviction
	// manager's defaults.
	DefaultTTL, MaxTTL time.Duration
	// Clock is the simulation's clock, which several replicas may share;
	// its time when New runs is the replica's time zero. Nil gives the
	// replica a clock of its own.
	Clock *clock.Fake
	// Observer, if set, is told of the cache's changes.
	Observer Observer
}

// MaxTTL returns the longest of def and the TTLs records name: the MaxTTL
// of a replica that serves them.
func MaxTTL(def time.Duration, records []trace.Record) time.Duration {
	for i := range records {
		def = max(def, records[i].TTL())
	}
	return def
}

// Counters are what a replica has served so far.
type Counters struct {
	Requests int
	// Rejected requests found too few free blocks even after evicting all
	// they could; they count as misses.
	Rejected    int
	QueryTokens int // prompt tokens looked up (not those of cache-off requests)
	HitTokens   int // of those, served from the cache: prefill saved
}

// run is a request holding blocks until done.
type run struct {
	done  time.Duration
	table *blockstore.Table
	h     radix.Handle
	use   eviction.Use
}

// Replica is one simulated replica. It is not safe for concurrent use.
type Replica struct {
	pool      *blockstore.Pool
	tree      *radix.Tree
	m         *eviction.Manager
	clk       *clock.Fake
	epoch     time.Time
	bs        int
	tokenTime time.Duration
	runs      minheap.Heap[*run] // by done
	buf       []blockstore.BlockID
	counters  Counters
}

// New returns an empty replica at time zero.
func New(c Config) (*Replica, error) {
	if c.BlockSize == 0 {
		c.BlockSize = blockstore.DefaultBlockSize
	}
	if c.TokenTime == 0 {
		c.TokenTime = 20 * time.Millisecond
	}
	if c.TokenTime < 0 {
		return nil, fmt.Errorf("cachesim: Config.TokenTime must not be negative, got %v", c.TokenTime)
	}
	if c.Clock == nil {
		c.Clock = clock.NewFake(time.Unix(1_000_000_000, 0))
	}
	pool, err := blockstore.New(blockstore.Config{NumBlocks: c.Blocks, BlockSize: c.BlockSize})
	if err != nil {
		return nil, err
	}
	tree, err := radix.New(c.BlockSize)
	if err != nil {
		return nil, err
	}
	var obs eviction.Observer
	if c.Observer != nil {
		tree.SetObserver(c.Observer)
		obs = c.Observer
	}
	m, err := eviction.New(eviction.Config{Tree: tree, Pool: pool, Clock: c.Clock, DefaultTTL: c.DefaultTTL, MaxTTL: c.MaxTTL, Observer: obs})
	if err != nil {
		return nil, err
	}
	r := &Replica{pool: pool, tree: tree, m: m, clk: c.Clock, epoch: c.Clock.Now(), bs: c.BlockSize, tokenTime: c.TokenTime}
	r.runs.Less = func(a, b *run) bool { return a.done < b.done }
	return r, nil
}

// Now returns the replica's time since its time zero.
func (r *Replica) Now() time.Duration { return r.clk.Now().Sub(r.epoch) }

// Advance moves the clock to t, if it is not there already (another
// replica on the same clock may have moved it), and expires what the TTLs
// end by then.
func (r *Replica) Advance(t time.Duration) {
	if d := t - r.Now(); d > 0 {
		r.clk.Advance(d)
	}
	r.m.Sweep()
}

// NextExpiry returns the earliest time the cache may have blocks to
// expire, and false if it holds none that can.
func (r *Replica) NextExpiry() (time.Duration, bool) {
	d, ok := r.m.NextDeadline()
	return d.Sub(r.epoch), ok
}

// Running returns the number of requests holding blocks.
func (r *Replica) Running() int { return r.runs.Len() }

// NextDone returns the time the earliest running request ends, and false
// if none runs.
func (r *Replica) NextDone() (time.Duration, bool) {
	if r.runs.Len() == 0 {
		return 0, false
	}
	return r.runs.Peek().done, true
}

// Finish advances to the end of the earliest running request (see
// Advance), releases its blocks and leaves its prompt's to the cache.
// REQUIRES: Running() > 0.
func (r *Replica) Finish() {
	run := r.runs.Pop()
	r.Advance(run.done)
	run.table.Release()
	r.m.Done(run.h, run.use)
}

// Serve admits rec, whose prompt (at least one token) is prompt, at the
// current time: it looks the prompt up (unless the record turns the cache
// off), takes blocks for the rest of the prompt and the output, evicting
// if it must, and caches the prompt's whole blocks. The request then runs
// until its output's time has passed (see Finish). A request that finds
// too few blocks even after evicting all it can is rejected, not an error:
// it counts in Counters. An error is a broken cache invariant.
func (r *Replica) Serve(rec *trace.Record, prompt []int32) error {
	r.counters.Requests++
	out := rec.OutputTokens
	if out == 0 {
		out = rec.MaxTokens
	}
	use := eviction.Use{TTL: rec.TTL(), Priority: rec.Priority}
	a := eviction.Admission{Namespace: rec.Namespace, Use: use, Blocks: blockstore.BlocksFor(len(prompt)+out, r.bs)}
	if !rec.CacheOff {
		r.counters.QueryTokens += len(prompt) - 1
		a.Tokens = prompt[:len(prompt)-1]
	}
	// The engine's admission step: the hit is counted only if the room is
	// there.
	hit, short := r.m.Admit(a, r.buf[:0])
	r.buf = hit.Blocks
	if short > 0 {
		r.counters.Rejected++
		return nil
	}
	tb := r.pool.NewTable()
	if err := tb.Adopt(hit.Blocks); err != nil {
		return fmt.Errorf("cachesim: adopting a hit: %w", err)
	}
	r.counters.HitTokens += hit.Cached()
	if err := tb.Append(len(prompt) - tb.Len()); err != nil {
		return fmt.Errorf("cachesim: the prompt's blocks: %w", err)
	}
	h := hit.Handle
	if !rec.CacheOff {
		full := len(prompt) / r.bs
		var err error
		if _, h, err = r.m.Extend(rec.Namespace, h, prompt[:full*r.bs], tb.Blocks()[:full], use); err != nil {
			return fmt.Errorf("cachesim: caching the prompt: %w", err)
		}
	}
	if err := tb.Append(out); err != nil {
		return fmt.Errorf("cachesim: the output's blocks: %w", err)
	}
	r.runs.Push(&run{done: r.Now() + time.Duration(out)*r.tokenTime, table: tb, h: h, use: use})
	return nil
}

// Counters returns what the replica has served so far.
func (r *Replica) Counters() Counters { return r.counters }

// Stats returns the block pool's counts.
func (r *Replica) Stats() blockstore.Stats { return r.pool.Stats() }

// Tree returns the replica's prefix tree, for checks. The caller must not
// change it.
func (r *Replica) Tree() *radix.Tree { return r.tree }

// Manager returns the replica's eviction manager, for its counters and
// checks. The caller must not change the cache through it.
func (r *Replica) Manager() *eviction.Manager { return r.m }

// Check verifies the cache's invariants (see eviction.Manager.Check).
func (r *Replica) Check() error { return r.m.Check() }

// PromptTokens returns each record's prompt as tokens, for simulations. A
// record with block hashes gets one synthetic token block per hash (equal
// hashes, equal blocks; the hashes chain, so equal blocks mean equal
// prefixes) and a filler for its partial last block.
func PromptTokens(records []trace.Record, bs int) ([][]int32, error) {
	ids := map[string]int32{}
	out := make([][]int32, len(records))
	for i, r := range records {
		if len(r.Tokens) > 0 {
			out[i] = r.Tokens
			continue
		}
		if len(r.Blocks) > 0 && r.BlockSize != bs {
			return nil, fmt.Errorf("cachesim: record %d was hashed with block size %d, the simulation uses %d", i, r.BlockSize, bs)
		}
		p := make([]int32, r.PromptTokens)
		for j, h := range r.Blocks {
			id, ok := ids[h]
			if !ok {
				id = int32(len(ids) + 1)
				ids[h] = id
			}
			p[j*bs] = id
		}
		for j := len(r.Blocks) * bs; j < len(p); j++ {
			p[j] = -1 - int32(i) // unique to this request
		}
		out[i] = p
	}
	return out, nil
}
