package bench

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/radix"
	"github.com/prefixd/prefixd/trace"
)

// SimConfig configures SimulateTTL.
type SimConfig struct {
	TTLs       []time.Duration // default TTLs to try; requests that name a TTL keep theirs
	PoolBlocks []int           // KV pool sizes to try, in blocks
	// BlockSize is the cache's block size in tokens; default 16. Records
	// with block hashes must have been hashed with the same size.
	BlockSize int
	// TokenTime is the simulated time a request takes per output token
	// (output_tokens where the trace has it, else max_tokens); it holds its
	// blocks that long. Default 20 ms. Prefill takes no time.
	TokenTime time.Duration
}

// SimResult is the outcome of one TTL and pool size.
type SimResult struct {
	TTL        time.Duration `json:"ttl"`
	PoolBlocks int           `json:"pool_blocks"`
	Requests   int           `json:"requests"`
	// Rejected requests found too few free blocks even after evicting all
	// they could (the pool is too small for the trace's concurrency); they
	// count as misses.
	Rejected  int     `json:"rejected"`
	HitRate   float64 `json:"hit_rate"`   // cached prompt tokens / prompt tokens looked up
	AvgBlocks float64 `json:"avg_blocks"` // blocks referenced (running + cached), time-weighted
	AvgCached float64 `json:"avg_cached"` // of those, held only by the cache
}

// SimulateTTL replays records through the real prefix tree, block pool and
// eviction manager on a fake clock, once for every pair of TTL and pool
// size, and reports each pair's hit rate and memory held. No model runs:
// a request looks its prompt up, takes blocks for the rest of its prompt
// and its output, inserts its prompt's whole blocks, holds them for its
// service time, and finishes.
func SimulateTTL(records []trace.Record, c SimConfig) ([]SimResult, error) {
	if c.BlockSize == 0 {
		c.BlockSize = blockstore.DefaultBlockSize
	}
	if c.TokenTime == 0 {
		c.TokenTime = 20 * time.Millisecond
	}
	if len(c.TTLs) == 0 || len(c.PoolBlocks) == 0 {
		return nil, errors.New("bench: ttl-sim needs at least one TTL and one pool size")
	}
	prompts, err := PromptTokens(records, c.BlockSize)
	if err != nil {
		return nil, err
	}
	var out []SimResult
	for _, pool := range c.PoolBlocks {
		for _, ttl := range c.TTLs {
			r, err := simulate(records, prompts, c, ttl, pool)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

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
			return nil, fmt.Errorf("bench: record %d was hashed with block size %d, the simulation uses %d", i, r.BlockSize, bs)
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

// running is a simulated request holding blocks until done.
type running struct {
	done  time.Duration
	table *blockstore.Table
	h     radix.Handle
	use   eviction.Use
}

type runHeap []*running

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return h[i].done < h[j].done }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*running)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func simulate(records []trace.Record, prompts [][]int32, c SimConfig, ttl time.Duration, blocks int) (SimResult, error) {
	res := SimResult{TTL: ttl, PoolBlocks: blocks, Requests: len(records)}
	bs := c.BlockSize
	pool, err := blockstore.New(blockstore.Config{NumBlocks: blocks, BlockSize: bs})
	if err != nil {
		return res, err
	}
	tree, err := radix.New(bs)
	if err != nil {
		return res, err
	}
	maxTTL := ttl
	for _, r := range records {
		maxTTL = max(maxTTL, r.TTL())
	}
	epoch := time.Unix(1_000_000_000, 0)
	clk := clock.NewFake(epoch)
	m, err := eviction.New(eviction.Config{Tree: tree, Pool: pool, Clock: clk, DefaultTTL: ttl, MaxTTL: maxTTL})
	if err != nil {
		return res, err
	}
	var (
		now          time.Duration
		held, cached float64 // block-nanoseconds
		query, hit   int
		runs         runHeap
		buf          []blockstore.BlockID
		start        = time.Duration(-1)
	)
	advance := func(t time.Duration) {
		if t > now {
			if start >= 0 {
				st := pool.Stats()
				held += float64(st.Total-st.Free) * float64(t-now)
				cached += float64(st.CachedOnly) * float64(t-now)
			}
			clk.Advance(t - now)
			now = t
		}
		m.Sweep()
	}
	finish := func() {
		r := heap.Pop(&runs).(*running)
		advance(r.done)
		r.table.Release()
		m.Done(r.h, r.use)
	}
	next := 0
	for next < len(records) || len(runs) > 0 {
		// The earliest of: the next arrival, the next completion, the next
		// cache deadline (so memory is integrated as blocks expire).
		t, kind := time.Duration(math.MaxInt64), 0
		if next < len(records) {
			t, kind = records[next].Arrival(), 1
		}
		if len(runs) > 0 && runs[0].done <= t {
			t, kind = runs[0].done, 2
		}
		if d, ok := m.NextDeadline(); ok && d.Sub(epoch) < t {
			advance(max(d.Sub(epoch), now))
			continue
		}
		if kind == 2 {
			finish()
			continue
		}
		rec := &records[next]
		p := prompts[next]
		next++
		advance(t)
		if start < 0 {
			start = now
		}
		use := eviction.Use{TTL: rec.TTL(), Priority: rec.Priority}
		var h eviction.Hit
		if !rec.CacheOff {
			query += len(p) - 1
			h = m.Lookup(rec.Namespace, p[:len(p)-1], use, buf[:0])
			buf = h.Blocks
		}
		out := rec.OutputTokens
		if out == 0 {
			out = rec.MaxTokens
		}
		tb := pool.NewTable()
		if err := tb.Adopt(h.Blocks); err != nil {
			return res, err
		}
		need := blockstore.BlocksFor(len(p)+out, bs) - len(h.Blocks)
		if pool.NumFree() < need && m.Reclaim(need) != nil {
			tb.Release()
			m.Release(h.Handle)
			res.Rejected++
			continue
		}
		hit += h.DeviceTokens
		if err := tb.Append(len(p) - tb.Len()); err != nil {
			return res, err
		}
		nh := h.Handle
		if !rec.CacheOff {
			full := len(p) / bs
			var err error
			if _, nh, err = m.Extend(rec.Namespace, h.Handle, p[:full*bs], tb.Blocks()[:full], use); err != nil {
				return res, err
			}
		}
		if err := tb.Append(out); err != nil {
			return res, err
		}
		heap.Push(&runs, &running{done: now + time.Duration(out)*c.TokenTime, table: tb, h: nh, use: use})
	}
	if span := float64(now - start); span > 0 {
		res.AvgBlocks, res.AvgCached = held/span, cached/span
	}
	if query > 0 {
		res.HitRate = float64(hit) / float64(query)
	}
	if err := m.Check(); err != nil {
		return res, fmt.Errorf("bench: cache invariants after the simulation: %w", err)
	}
	return res, nil
}

// Choice is the TTL recommended for one pool size.
type Choice struct {
	PoolBlocks int
	Best       float64       // the best hit rate over the TTLs tried
	TTL        time.Duration // the smallest TTL reaching target x Best
	HitRate    float64       // its hit rate
	AvgBlocks  float64       // its memory held
}

// ChooseTTL returns, for each pool size in results, the smallest TTL whose
// hit rate reaches target times the best hit rate at that pool size.
func ChooseTTL(results []SimResult, target float64) []Choice {
	var out []Choice
	var pools []int
	for _, r := range results {
		if !slices.Contains(pools, r.PoolBlocks) {
			pools = append(pools, r.PoolBlocks)
		}
	}
	for _, p := range pools {
		ch := Choice{PoolBlocks: p, TTL: -1}
		for _, r := range results {
			if r.PoolBlocks == p {
				ch.Best = max(ch.Best, r.HitRate)
			}
		}
		for _, r := range results {
			if r.PoolBlocks == p && r.HitRate >= target*ch.Best && (ch.TTL < 0 || r.TTL < ch.TTL) {
				ch.TTL, ch.HitRate, ch.AvgBlocks = r.TTL, r.HitRate, r.AvgBlocks
			}
		}
		out = append(out, ch)
	}
	return out
}

// WriteSimTable writes the results as an aligned table.
func WriteSimTable(w io.Writer, results []SimResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	io.WriteString(tw, "pool blocks\tTTL\thit %\tavg blocks held\tavg cached-only\trejected\t\n")
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%v\t%.1f\t%.1f\t%.1f\t%d\t\n", r.PoolBlocks, r.TTL, 100*r.HitRate, r.AvgBlocks, r.AvgCached, r.Rejected)
	}
	return tw.Flush()
}

// ParseDurations parses a comma-separated list of durations ("5s,1m").
func ParseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for f := range splitComma(s) {
		d, err := time.ParseDuration(f)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("bad duration %q", f)
		}
		out = append(out, d)
	}
	return out, nil
}

// ParseInts parses a comma-separated list of positive integers.
func ParseInts(s string) ([]int, error) {
	var out []int
	for f := range splitComma(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad positive integer %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}
