package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/internal/cachesim"
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
	// Progress, if not nil, is called after each simulation with how many
	// of them are done.
	Progress func(done, total int)
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
			if c.Progress != nil {
				c.Progress(len(out), len(c.PoolBlocks)*len(c.TTLs))
			}
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

func simulate(records []trace.Record, prompts [][]int32, c SimConfig, ttl time.Duration, blocks int) (SimResult, error) {
	res := SimResult{TTL: ttl, PoolBlocks: blocks, Requests: len(records)}
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
