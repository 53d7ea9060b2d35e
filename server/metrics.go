package server

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/kvcache"
)

// Metrics holds prefixd's Prometheus metrics in one registry. Counters and
// gauges of the engine's state are read from one engine.Stats snapshot per
// scrape, so they are consistent with each other; histograms are fed by the
// engine's Observer and Samples hooks, which run on the scheduler goroutine
// and here only do atomic adds. Every label has a fixed, small set of
// values. It is safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	ttft, itl, e2e, queue prometheus.Histogram
	hitAge                [kvcache.NumTiers]prometheus.Observer // by kvcache.Tier
	blockLife             prometheus.Histogram
	batchRows, stepTime   prometheus.Histogram
	finished              *prometheus.CounterVec
	finishedBy            map[engine.FinishReason]prometheus.Counter
	httpReqs              *prometheus.CounterVec
	hangups               prometheus.Counter

	eng    atomic.Pointer[engine.Engine]
	device atomic.Pointer[DeviceMemory] // nil unless the model runs on a GPU
	model  atomic.Pointer[string]       // the served model's name, for vLLM's series

	vllmVecs vllmRequestMetrics
	vllm     atomic.Pointer[vllmObservers] // vllmVecs' series of the bound model
}

var _ engine.Observer = (*Metrics)(nil)

// Histogram buckets, in seconds unless named otherwise.
var (
	latencyBuckets  = buckets(0.001, 2, 16)  // 1 ms .. 33 s
	itlBuckets      = buckets(0.0005, 2, 14) // 0.5 ms .. 4 s
	ageBuckets      = buckets(0.1, 3, 12)    // 0.1 s .. 4.9 h
	stepBuckets     = buckets(0.0001, 2, 16) // 0.1 ms .. 3.3 s
	batchRowBuckets = buckets(1, 2, 10)      // 1 .. 512 rows
)

// buckets returns count exponential bucket bounds from start, each the
// float64 nearest its decimal value: repeated multiplication drifts
// (0.1*3 is 0.30000000000000004), and the drift would show in every
// le label a scrape prints.
func buckets(start, factor float64, count int) []float64 {
	b := prometheus.ExponentialBuckets(start, factor, count)
	for i, v := range b {
		b[i], _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64)
	}
	return b
}

// NewMetrics returns a Metrics with its registry. Pass it as the engine's
// Config.Observer and Config.Samples, then as the server's Config.Metrics.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	f := factory{m.reg}
	m.ttft = f.histogram("prefixd_time_to_first_token_seconds", "Time from submission to the first generated token.", latencyBuckets)
	m.itl = f.histogram("prefixd_inter_token_latency_seconds", "Time between consecutive generated tokens of a request.", itlBuckets)
	m.e2e = f.histogram("prefixd_request_duration_seconds", "Time from submission to the end of a request.", latencyBuckets)
	m.queue = f.histogram("prefixd_queue_time_seconds", "Time from submission to first admission into the running batch.", latencyBuckets)
	hitAge := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "prefixd_cache_hit_age_seconds",
		Help:    "Time since a cached prefix that an admitted request hit was last used, one observation per hit node (or lower-tier block) per request, at its admission: the data for choosing a TTL.",
		Buckets: ageBuckets,
	}, []string{"tier"})
	m.reg.MustRegister(hitAge)
	for tier := range kvcache.NumTiers {
		m.hitAge[tier] = hitAge.WithLabelValues(tier.String())
	}
	m.blockLife = f.histogram("prefixd_cache_block_lifetime_seconds", "Time a block spent in the device prefix cache, from insertion to leaving it, one observation per block.", ageBuckets)
	m.batchRows = f.histogram("prefixd_batch_rows", "Sequences (decode rows and prefill chunks) in one forward pass.", batchRowBuckets)
	m.stepTime = f.histogram("prefixd_scheduler_step_seconds", "Wall time of one forward pass.", stepBuckets)
	m.finished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "prefixd_requests_total", Help: "Finished generation requests by finish reason.",
	}, []string{"finish_reason"})
	m.reg.MustRegister(m.finished)
	m.finishedBy = map[engine.FinishReason]prometheus.Counter{}
	for _, r := range []engine.FinishReason{engine.FinishStop, engine.FinishLength, engine.FinishCancelled, engine.FinishError} {
		m.finishedBy[r] = m.finished.WithLabelValues(string(r))
	}
	m.httpReqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "prefixd_http_requests_total", Help: "HTTP requests by route (unknown paths: other) and status code.",
	}, []string{"route", "code"})
	m.hangups = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "prefixd_client_hangups_total", Help: "Non-streaming requests cancelled because their client closed its connection.",
	})
	m.vllmVecs = newVLLMRequestMetrics(m.reg)
	m.reg.MustRegister(m.httpReqs, m.hangups, statsCollector{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

type factory struct{ reg *prometheus.Registry }

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

// Registry returns the registry, for tests and for adding collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Step implements engine.Observer.
func (m *Metrics) Step(rows, tokens int, d time.Duration) {
	m.batchRows.Observe(float64(rows))
	m.stepTime.Observe(d.Seconds())
}

// Finished implements engine.Observer.
func (m *Metrics) Finished(res *engine.Result) {
	reason := res.Finish
	c, ok := m.finishedBy[reason]
	if !ok {
		reason = engine.FinishError
		c = m.finishedBy[reason]
	}
	c.Inc()
	observeTiming(res, m.ttft, m.itl, m.e2e, m.queue)
	if v := m.vllm.Load(); v != nil {
		v.success[reason].Inc()
		observeTiming(res, v.ttft, v.itl, v.e2e, v.queue)
	}
}

// observeTiming observes res's latencies in one set of histograms.
func observeTiming(res *engine.Result, ttft, itl, e2e, queue prometheus.Observer) {
	t := res.Timing
	e2e.Observe(t.Total.Seconds())
	if res.Finish == engine.FinishCancelled && len(res.Tokens) == 0 {
		return // no first token, maybe never admitted
	}
	queue.Observe(t.Queue.Seconds())
	if len(res.Tokens) > 0 {
		ttft.Observe(t.FirstToken.Seconds())
	}
	for _, d := range t.InterTokens {
		itl.Observe(d.Seconds())
	}
}

// Samples returns the hooks for the engine's Config.Samples.
func (m *Metrics) Samples() kvcache.Samples {
	return kvcache.Samples{
		HitAge: func(tier kvcache.Tier, age time.Duration, tokens int) {
			if int(tier) < len(m.hitAge) {
				m.hitAge[tier].Observe(age.Seconds())
			}
		},
		BlockLifetime: func(life time.Duration, blocks int) {
			s := life.Seconds()
			for range blocks {
				m.blockLife.Observe(s)
			}
		},
	}
}

// bind points the snapshot collector at s's engine.
func (m *Metrics) bind(s *Server) error {
	if !m.eng.CompareAndSwap(nil, s.eng) && m.eng.Load() != s.eng {
		return errors.New("server: Config.Metrics already serves another engine")
	}
	m.model.Store(&s.cfg.ModelName)
	m.vllm.Store(m.vllmVecs.forModel(s.cfg.ModelName))
	if s.cfg.DeviceMemory != nil {
		m.device.Store(&s.cfg.DeviceMemory)
	}
	return nil
}

func (m *Metrics) httpRequest(route string, code int) {
	m.httpReqs.WithLabelValues(route, strconv.Itoa(code)).Inc()
}

// handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) handler() fasthttp.RequestHandler {
	return fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
}

// statsCollector exports one engine.Stats snapshot per scrape, as prefixd_*
// series and under vLLM's names, for endpoint pickers.
type statsCollector struct{ m *Metrics }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descCacheQuery = desc("prefixd_cache_query_tokens_total", "Prompt tokens looked up in the prefix cache.")
	descCacheHit   = desc("prefixd_cache_hit_tokens_total", "Prompt tokens served from the prefix cache, by tier.", "tier")
	descPrefill    = desc("prefixd_prefill_tokens_total", "Prompt tokens computed by forward passes (cache misses and recomputation after preemption).")
	descPrompt     = desc("prefixd_prompt_tokens_total", "Prompt tokens of admitted requests.")
	descGenerated  = desc("prefixd_generated_tokens_total", "Tokens generated.")
	descEvicted    = desc("prefixd_cache_evicted_blocks_total", "Blocks that left a cache tier, by reason.", "reason")
	descDemoted    = desc("prefixd_cache_demoted_blocks_total", "Blocks copied from the device cache to the host tier.")
	descPromoted   = desc("prefixd_cache_promoted_blocks_total", "Blocks copied back from the host tier.")
	descPreempt    = desc("prefixd_preemptions_total", "Sequences preempted for lack of blocks (recomputed later).")
	descSteps      = desc("prefixd_scheduler_steps_total", "Forward passes run.")
	descNonFinite  = desc("prefixd_nonfinite_logits_total", "Requests failed because the model's logits held NaN or an infinity.")
	descBlocks     = desc("prefixd_blocks", "KV blocks by state: free, cached_idle (held by the prefix cache alone, evictable), in_use (in running sequences' block tables).", "state")
	descRunning    = desc("prefixd_requests_running", "Requests in the running batch.")
	descWaiting    = desc("prefixd_requests_waiting", "Requests waiting for admission.")
	descEfficiency = desc("prefixd_kv_memory_efficiency", "Token slots holding K/V over token slots in referenced blocks (1 when none is referenced).")
	descPinned     = desc("prefixd_cache_pinned_blocks", "Blocks pinned by operators.")
	descPinBudget  = desc("prefixd_cache_pin_budget_blocks", "Most blocks operators may pin.")
	descNodes      = desc("prefixd_cache_nodes", "Prefix tree nodes, all namespaces.")
	descTTL        = desc("prefixd_cache_ttl_seconds", "Cache TTLs in force: the default and the maximum a request may ask for.", "kind")
	descDeviceMem  = desc("prefixd_device_memory_bytes", "The GPU's memory, free and total, when the model runs on one.", "state")
)

// Describe implements prometheus.Collector.
func (c statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCacheQuery, descCacheHit, descPrefill, descPrompt, descGenerated,
		descEvicted, descDemoted, descPromoted, descPreempt, descSteps, descNonFinite, descBlocks, descRunning, descWaiting,
		descEfficiency, descPinned, descPinBudget, descNodes, descTTL, descDeviceMem} {
		ch <- d
	}
	for _, d := range vllmDescs {
		ch <- d
	}
	for _, d := range diskDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.m.eng.Load()
	if e == nil {
		return
	}
	st := e.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if f := c.m.device.Load(); f != nil {
		// A failed read leaves the series out of this scrape.
		if free, total, err := (*f)(); err == nil {
			gauge(descDeviceMem, float64(free), "free")
			gauge(descDeviceMem, float64(total), "total")
		}
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(descCacheQuery, st.CacheQueryTokens)
	counter(descCacheHit, st.CacheHitDevice, kvcache.TierDevice.String())
	counter(descCacheHit, st.CacheHitHost, kvcache.TierHost.String())
	counter(descCacheHit, st.CacheHitDisk, kvcache.TierDisk.String())
	counter(descCacheHit, st.CacheHitRemote, kvcache.TierRemote.String())
	counter(descPrefill, st.PrefillTokens)
	counter(descPrompt, st.PromptTokens)
	counter(descGenerated, st.GeneratedTokens)
	for _, r := range kvcache.Reasons() {
		counter(descEvicted, st.Cache.Evicted[r], r.String())
	}
	counter(descDemoted, st.Cache.Demoted)
	counter(descPromoted, st.Cache.Promoted)
	counter(descPreempt, st.Preemptions)
	counter(descSteps, st.Steps)
	counter(descNonFinite, st.NonFiniteLogits)
	b := st.Blocks
	gauge(descBlocks, float64(b.Free), "free")
	gauge(descBlocks, float64(b.CachedOnly), "cached_idle")
	gauge(descBlocks, float64(b.InUse), "in_use")
	gauge(descRunning, float64(st.Running))
	gauge(descWaiting, float64(st.Waiting))
	gauge(descEfficiency, efficiency(b.SlotsUsed, b.SlotsAllocated))
	gauge(descPinned, float64(st.PinnedBlocks))
	gauge(descPinBudget, float64(st.PinBudget))
	gauge(descNodes, float64(st.CachedNodes))
	gauge(descTTL, st.DefaultTTL.Seconds(), "default")
	gauge(descTTL, st.MaxTTL.Seconds(), "max")
	if e.Config().DiskTier != nil {
		collectDisk(ch, &st)
	}
	if model := c.m.model.Load(); model != nil {
		collectVLLM(ch, &st, e.Config(), *model)
	}
}

func efficiency(used, allocated int) float64 {
	if allocated == 0 {
		return 1
	}
	return float64(used) / float64(allocated)
}
