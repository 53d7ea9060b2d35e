// Package ttlsim replays a request trace against one replica's prefix
// cache (package cachesim: the real tree, pool and eviction manager on a
// fake clock) for each default TTL and pool size asked, to choose a TTL
// offline (`prefixd ttl-sim`).
package ttlsim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/sim/cachesim"
	"github.com/prefixd/prefixd/trace"
)

// Config configures Simulate.
type Config struct {
	TTLs       []time.Duration // default TTLs to try; requests that name a TTL keep theirs
	PoolBlocks []int           // KV pool sizes to try, in blocks
	// BlockSize is the cache's block size in tokens; default 16. Records
	// with block hashes must have been hashed with the same size.
	BlockSize int
	// TokenTime is the simulated time a request takes per output token
	// (output_tokens where the trace has it, else max_tokens); it holds its
	// blocks that long. Default 20 ms. Prefill takes no time.
	TokenTime time.Duration
	// Progress, if not nil, is called after each simulation with how many
	// of them are done.
	Progress func(done, total int)
}

// Result is the outcome of one TTL and pool size.
type Result struct {
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

// Simulate replays records through the real prefix tree, block pool and
// eviction manager on a fake clock, once for every pair of TTL and pool
// size, and reports each pair's hit rate and memory held. No model runs:
// a request looks its prompt up, takes blocks for the rest of its prompt
// and its output, inserts its prompt's whole blocks, holds them for its
// service time, and finishes.
func Simulate(records []trace.Record, c Config) ([]Result, error) {
	if c.BlockSize == 0 {
		c.BlockSize = blockstore.DefaultBlockSize
	}
	if len(c.TTLs) == 0 || len(c.PoolBlocks) == 0 {
		return nil, errors.New("ttlsim: ttl-sim needs at least one TTL and one pool size")
	}
	prompts, err := cachesim.PromptTokens(records, c.BlockSize)
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, pool := range c.PoolBlocks {
		for _, ttl := range c.TTLs {
			r, err := simulate(records, prompts, c, ttl, pool)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
			if c.Progress != nil {
				c.Progress(len(out), len(c.PoolBlocks)*len(c.TTLs))
			}
		}
	}
	return out, nil
}

func simulate(records []trace.Record, prompts [][]int32, c Config, ttl time.Duration, blocks int) (Result, error) {
	res := Result{TTL: ttl, PoolBlocks: blocks, Requests: len(records)}
	rep, err := cachesim.New(cachesim.Config{Blocks: blocks, BlockSize: c.BlockSize, TokenTime: c.TokenTime,
		DefaultTTL: ttl, MaxTTL: cachesim.MaxTTL(ttl, records)})
	if err != nil {
		return res, err
	}
	var (
		now          time.Duration
		held, cached float64 // block-nanoseconds
		start        = time.Duration(-1)
	)
	// advance counts the blocks held until t from the first arrival on,
	// then moves the replica to t.
	advance := func(t time.Duration) {
		if t > now {
			if start >= 0 {
				st := rep.Stats()
				held += float64(st.Total-st.Free) * float64(t-now)
				cached += float64(st.CachedOnly) * float64(t-now)
			}
			now = t
		}
		rep.Advance(t)
	}
	next := 0
	for next < len(records) || rep.Running() > 0 {
		// The earliest of: the next arrival, the next completion, the next
		// cache deadline (so memory is integrated as blocks expire).
		t, finish := time.Duration(math.MaxInt64), false
		if next < len(records) {
			t = records[next].Arrival()
		}
		if d, ok := rep.NextDone(); ok && d <= t {
			t, finish = d, true
		}
		if d, ok := rep.NextExpiry(); ok && d < t {
			advance(max(d, now))
			continue
		}
		advance(t)
		if finish {
			rep.Finish()
			continue
		}
		if start < 0 {
			start = now
		}
		if err := rep.Serve(&records[next], prompts[next]); err != nil {
			return res, err
		}
		next++
	}
	if span := float64(now - start); span > 0 {
		res.AvgBlocks, res.AvgCached = held/span, cached/span
	}
	n := rep.Counters()
	res.Rejected = n.Rejected
	if n.QueryTokens > 0 {
		res.HitRate = float64(n.HitTokens) / float64(n.QueryTokens)
	}
	if err := rep.Check(); err != nil {
		return res, fmt.Errorf("ttlsim: cache invariants after the simulation: %w", err)
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
func ChooseTTL(results []Result, target float64) []Choice {
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

// WriteTable writes the results as an aligned table.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	io.WriteString(tw, "pool blocks\tTTL\thit %\tavg blocks held\tavg cached-only\trejected\t\n")
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%v\t%.1f\t%.1f\t%.1f\t%d\t\n", r.PoolBlocks, r.TTL, 100*r.HitRate, r.AvgBlocks, r.AvgCached, r.Rejected)
	}
	return tw.Flush()
}
