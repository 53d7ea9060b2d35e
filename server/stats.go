package server

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"

	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/kvcache"
)

// The recent figures of /v1/stats span from the oldest kept snapshot to
// now: snapshots are kept at least statsSpacing apart, and the window
// reaches back to the newest one at least statsWindow old.
const (
	statsWindow  = time.Minute
	statsSpacing = time.Second
)

// The histograms /v1/stats summarizes, in statsSnap.hists order.
const (
	histTTFT = iota
	histITL
	histE2E
	histQueue
	histAgeDevice
	histAgeHost
	histAgeDisk
	numHists
)

// histNames are the histograms' keys in the /v1/stats body.
var histNames = [numHists]string{"ttft", "itl", "e2e", "queue", kvcache.TierDevice.String(), kvcache.TierHost.String(), kvcache.TierDisk.String()}

// histSnap is a histogram's state: cumulative counts per finite upper
// bound, and the total count.
type histSnap struct {
	bounds []float64
	cum    []uint64
	count  uint64
}

type statsSnap struct {
	at    time.Time
	st    engine.Stats
	hists [numHists]histSnap
}

// statsWindowed serves /v1/stats. It keeps the snapshots of the last
// statsWindow, so it can report rates and quantiles of recent traffic as
// well as totals since start. It is safe for concurrent use.
type statsWindowed struct {
	s     *Server
	mu    sync.Mutex
	snaps []statsSnap // oldest first, never empty
}

// statsHandler returns the /v1/stats handler; its window starts now.
func (s *Server) statsHandler() fasthttp.RequestHandler {
	w := &statsWindowed{s: s}
	w.snaps = []statsSnap{w.take(time.Now())}
	return w.serve
}

func (w *statsWindowed) take(now time.Time) statsSnap {
	m := w.s.metrics
	snap := statsSnap{at: now, st: w.s.eng.Stats()}
	obs := [numHists]prometheus.Observer{m.ttft, m.itl, m.e2e, m.queue,
		m.hitAge[kvcache.TierDevice], m.hitAge[kvcache.TierHost], m.hitAge[kvcache.TierDisk]}
	for i, o := range obs {
		snap.hists[i] = readHistogram(o)
	}
	return snap
}

func readHistogram(o prometheus.Observer) histSnap {
	var hs histSnap
	pm, ok := o.(prometheus.Metric)
	if !ok {
		return hs
	}
	var d dto.Metric
	if pm.Write(&d) != nil || d.Histogram == nil {
		return hs
	}
	for _, b := range d.Histogram.Bucket {
		hs.bounds = append(hs.bounds, b.GetUpperBound())
		hs.cum = append(hs.cum, b.GetCumulativeCount())
	}
	hs.count = d.Histogram.GetSampleCount()
	return hs
}

// since returns the observations made after base.
func (h histSnap) since(base histSnap) histSnap {
	if len(base.cum) != len(h.cum) {
		return h
	}
	d := histSnap{bounds: h.bounds, cum: make([]uint64, len(h.cum)), count: sub(h.count, base.count)}
	for i := range h.cum {
		d.cum[i] = sub(h.cum[i], base.cum[i])
	}
	return d
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linear interpolation within the bucket holding the rank, the
// lowest bucket starting at 0, and the highest finite bound for ranks in
// the +Inf bucket. It returns nil without observations.
func (h histSnap) quantile(q float64) *float64 {
	if h.count == 0 || len(h.bounds) == 0 {
		return nil
	}
	rank := q * float64(h.count)
	for i, c := range h.cum {
		if float64(c) < rank {
			continue
		}
		lower, below := 0.0, uint64(0)
		if i > 0 {
			lower, below = h.bounds[i-1], h.cum[i-1]
		}
		upper := h.bounds[i]
		if i == 0 && upper <= 0 {
			return &upper
		}
		v := lower + (upper-lower)*(rank-float64(below))/float64(c-below)
		return &v
	}
	v := h.bounds[len(h.bounds)-1]
	return &v
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

func ratio(num, den uint64) *float64 {
	if den == 0 {
		return nil
	}
	v := float64(num) / float64(den)
	return &v
}

// statsJSON is the body of GET /v1/stats: aggregate figures only, nothing
// about any request's content or tenant. "recent" figures cover the last
// window_seconds; the others, the time since the server started.
type statsJSON struct {
	WindowSeconds    float64 `json:"window_seconds"`
	Running          int     `json:"running"`
	Waiting          int     `json:"waiting"`
	RequestsFinished uint64  `json:"requests_finished"`
	Blocks           struct {
		Total      int `json:"total"`
		Free       int `json:"free"`
		CachedIdle int `json:"cached_idle"`
		InUse      int `json:"in_use"`
	} `json:"blocks"`
	Tokens struct {
		Prompt         uint64 `json:"prompt"`
		Prefill        uint64 `json:"prefill"`
		Generated      uint64 `json:"generated"`
		CacheQuery     uint64 `json:"cache_query"`
		CacheHitDevice uint64 `json:"cache_hit_device"`
		CacheHitHost   uint64 `json:"cache_hit_host"`
		CacheHitDisk   uint64 `json:"cache_hit_disk"`
	} `json:"tokens"`
	// RecentRates are per second over the window.
	RecentRates struct {
		PrefillTokens   float64 `json:"prefill_tokens"`
		GeneratedTokens float64 `json:"generated_tokens"`
		Requests        float64 `json:"requests"`
	} `json:"recent_rates"`
	// Hit rates are cache-hit tokens over looked-up tokens, null before
	// any lookup.
	HitRate       hitRateJSON       `json:"hit_rate"`
	RecentHitRate hitRateJSON       `json:"recent_hit_rate"`
	Evicted       map[string]uint64 `json:"evicted_blocks"`
	RecentEvicted map[string]uint64 `json:"recent_evicted_blocks"`
	Preemptions   uint64            `json:"preemptions"`
	// Speculative is speculative decoding's counts (the vllm:spec_decode_*
	// series).
	Speculative speculativeJSON `json:"speculative"`
	// Latency is keyed ttft, itl, e2e and queue; CacheHitAge by tier.
	Latency     map[string]quantilesJSON `json:"latency_seconds"`
	CacheHitAge map[string]quantilesJSON `json:"cache_hit_age_seconds"`
	// DeviceMemory is the GPU's, when the model runs on one.
	DeviceMemory *deviceMemoryJSON `json:"device_memory,omitempty"`
	// DiskTier is the disk tier's state, when there is one.
	DiskTier *diskTierJSON `json:"disk_tier,omitempty"`
	// RemoteTier is the shared tier's state, when there is one.
	RemoteTier *remoteTierJSON `json:"remote_tier,omitempty"`
}

// speculativeJSON is speculative decoding's totals: decode rows that
// verified drafts, tokens drafted, accepted, accepted by position in the
// draft, and accepted over drafted (null before any draft).
type speculativeJSON struct {
	Drafts         uint64   `json:"drafts"`
	DraftTokens    uint64   `json:"draft_tokens"`
	AcceptedTokens uint64   `json:"accepted_tokens"`
	AcceptedPerPos []uint64 `json:"accepted_tokens_per_position"`
	AcceptanceRate *float64 `json:"acceptance_rate"`
}

type deviceMemoryJSON struct {
	FreeBytes  int64 `json:"free_bytes"`
	TotalBytes int64 `json:"total_bytes"`
}

type hitRateJSON struct {
	All    *float64 `json:"all"`
	Device *float64 `json:"device"`
	Host   *float64 `json:"host"`
	Disk   *float64 `json:"disk"`
	Remote *float64 `json:"remote"`
}

type quantilesJSON struct {
	Recent quantileSet `json:"recent"`
	Total  quantileSet `json:"total"`
}

// quantileSet holds quantiles in seconds, null without observations.
type quantileSet struct {
	Count uint64   `json:"count"`
	P50   *float64 `json:"p50"`
	P90   *float64 `json:"p90"`
	P99   *float64 `json:"p99"`
}

func quantiles(h histSnap) quantileSet {
	return quantileSet{Count: h.count, P50: h.quantile(0.5), P90: h.quantile(0.9), P99: h.quantile(0.99)}
}

func hitRates(hitDevice, hitHost, hitDisk, hitRemote, query uint64) hitRateJSON {
	return hitRateJSON{All: ratio(hitDevice+hitHost+hitDisk+hitRemote, query), Device: ratio(hitDevice, query), Host: ratio(hitHost, query),
		Disk: ratio(hitDisk, query), Remote: ratio(hitRemote, query)}
}

// observe takes a snapshot and returns it with the base of the window.
func (w *statsWindowed) observe(now time.Time) (cur, base statsSnap) {
	cur = w.take(now)
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.snaps) > 1 && now.Sub(w.snaps[1].at) >= statsWindow {
		w.snaps = w.snaps[1:]
	}
	base = w.snaps[0]
	if now.Sub(w.snaps[len(w.snaps)-1].at) >= statsSpacing {
		w.snaps = append(w.snaps, cur)
	}
	return cur, base
}

func (w *statsWindowed) serve(ctx *fasthttp.RequestCtx) {
	cur, base := w.observe(time.Now())
	st, bst := cur.st, base.st
	var out statsJSON
	span := cur.at.Sub(base.at).Seconds()
	out.WindowSeconds = span
	out.Running, out.Waiting, out.RequestsFinished = st.Running, st.Waiting, st.Requests
	if f := w.s.cfg.DeviceMemory; f != nil {
		if free, total, err := f(); err == nil {
			out.DeviceMemory = &deviceMemoryJSON{FreeBytes: free, TotalBytes: total}
		}
	}
	b := st.Blocks
	out.Blocks.Total, out.Blocks.Free, out.Blocks.CachedIdle, out.Blocks.InUse = b.Total, b.Free, b.CachedOnly, b.InUse
	t := &out.Tokens
	t.Prompt, t.Prefill, t.Generated = st.PromptTokens, st.PrefillTokens, st.GeneratedTokens
	t.CacheQuery, t.CacheHitDevice, t.CacheHitHost, t.CacheHitDisk = st.CacheQueryTokens, st.CacheHitDevice, st.CacheHitHost, st.CacheHitDisk
	if span > 0 {
		out.RecentRates.PrefillTokens = float64(sub(st.PrefillTokens, bst.PrefillTokens)) / span
		out.RecentRates.GeneratedTokens = float64(sub(st.GeneratedTokens, bst.GeneratedTokens)) / span
		out.RecentRates.Requests = float64(sub(st.Requests, bst.Requests)) / span
	}
	out.HitRate = hitRates(st.CacheHitDevice, st.CacheHitHost, st.CacheHitDisk, st.CacheHitRemote, st.CacheQueryTokens)
	out.RecentHitRate = hitRates(sub(st.CacheHitDevice, bst.CacheHitDevice), sub(st.CacheHitHost, bst.CacheHitHost),
		sub(st.CacheHitDisk, bst.CacheHitDisk), sub(st.CacheHitRemote, bst.CacheHitRemote), sub(st.CacheQueryTokens, bst.CacheQueryTokens))
	if w.s.ecfg.DiskTier != nil {
		out.DiskTier = diskTierOf(st.Disk)
	}
	if w.s.ecfg.RemoteTier != nil {
		out.RemoteTier = remoteTierOf(&st)
	}
	out.Evicted, out.RecentEvicted = map[string]uint64{}, map[string]uint64{}
	for _, r := range kvcache.Reasons() {
		out.Evicted[r.String()] = st.Cache.Evicted[r]
		out.RecentEvicted[r.String()] = sub(st.Cache.Evicted[r], bst.Cache.Evicted[r])
	}
	out.Preemptions = st.Preemptions
	out.Speculative = speculativeJSON{Drafts: st.SpecDrafts, DraftTokens: st.SpecDraftTokens, AcceptedTokens: st.SpecAcceptedTokens,
		AcceptedPerPos: st.SpecAcceptedPerPos[:w.s.ecfg.SpecTokens], AcceptanceRate: ratio(st.SpecAcceptedTokens, st.SpecDraftTokens)}
	out.Latency, out.CacheHitAge = map[string]quantilesJSON{}, map[string]quantilesJSON{}
	for i, h := range cur.hists {
		q := quantilesJSON{Recent: quantiles(h.since(base.hists[i])), Total: quantiles(h)}
		if i >= histAgeDevice {
			out.CacheHitAge[histNames[i]] = q
		} else {
			out.Latency[histNames[i]] = q
		}
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	w.s.writeJSON(ctx, 200, out)
}
