package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prefixd/prefixd/engine"
)

// vLLM's metric names, which endpoint pickers (the Gateway API Inference
// Extension's, llm-d's) scrape by default, exported beside prefixd_* from
// the same engine snapshot. vLLM's counters are Python prometheus_client
// counters, whose series carry the _total suffix; the gauges carry
// vLLM's model_name label.
var (
	descVLLMWaiting   = desc("vllm:num_requests_waiting", "Requests waiting to be processed (prefixd: waiting for admission).", "model_name")
	descVLLMRunning   = desc("vllm:num_requests_running", "Requests in the running batch.", "model_name")
	descVLLMKVUsage   = desc("vllm:kv_cache_usage_perc", "KV-cache usage, 0 to 1: blocks held by running requests over all blocks (cached idle blocks are reclaimable, as in vLLM).", "model_name")
	descVLLMGPUUsage  = desc("vllm:gpu_cache_usage_perc", "The older name of vllm:kv_cache_usage_perc.", "model_name")
	descVLLMCacheInfo = desc("vllm:cache_config_info", "KV cache configuration, as labels; the value is 1.", "block_size", "num_gpu_blocks", "enable_prefix_caching")
	descVLLMQueries   = desc("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache (vLLM's counter vllm:prefix_cache_queries).", "model_name")
	descVLLMHits      = desc("vllm:prefix_cache_hits_total", "Prompt tokens served from the prefix cache, every tier (vLLM's counter vllm:prefix_cache_hits).", "model_name")
	descVLLMPrompt    = desc("vllm:prompt_tokens_total", "Prompt tokens of admitted requests (prefixd_prompt_tokens_total).", "model_name")
	descVLLMGenerated = desc("vllm:generation_tokens_total", "Tokens generated (prefixd_generated_tokens_total).", "model_name")
	descVLLMPreempt   = desc("vllm:num_preemptions_total", "Sequences preempted for lack of blocks (prefixd_preemptions_total).", "model_name")

	descVLLMSpecDrafts   = desc("vllm:spec_decode_num_drafts_total", "Speculative decoding: decode rows that verified drafted tokens.", "model_name")
	descVLLMSpecDrafted  = desc("vllm:spec_decode_num_draft_tokens_total", "Speculative decoding: tokens drafted.", "model_name")
	descVLLMSpecAccepted = desc("vllm:spec_decode_num_accepted_tokens_total", "Speculative decoding: drafted tokens verification accepted.", "model_name")
	descVLLMSpecPerPos   = desc("vllm:spec_decode_num_accepted_tokens_per_pos_total",
		"Speculative decoding: accepted drafted tokens by their position in the draft (0: the first), up to --num-speculative-tokens.", "model_name", "position")
)

// vllmDescs are the vLLM series statsCollector exports.
var vllmDescs = []*prometheus.Desc{descVLLMWaiting, descVLLMRunning, descVLLMKVUsage, descVLLMGPUUsage,
	descVLLMCacheInfo, descVLLMQueries, descVLLMHits, descVLLMPrompt, descVLLMGenerated, descVLLMPreempt,
	descVLLMSpecDrafts, descVLLMSpecDrafted, descVLLMSpecAccepted, descVLLMSpecPerPos}

// vLLM's histogram buckets (vllm/v1/metrics/loggers.py), so that a board
// built on vLLM's quantiles reads the same resolution here.
var (
	vllmTTFTBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
		2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	vllmITLBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
		2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	vllmRequestBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
		50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// vllmFinishReasons maps the engine's finish reasons to the values of
// vLLM's finished_reason label: vLLM says "abort" where the caller went
// away.
var vllmFinishReasons = map[engine.FinishReason]string{
	engine.FinishStop: "stop", engine.FinishLength: "length",
	engine.FinishCancelled: "abort", engine.FinishError: "error",
}

// vllmRequestMetrics are vLLM's per-request series, fed by Metrics.Finished
// beside the prefixd_* histograms. Their model_name label is the served
// model's, known only when a server binds the Metrics, so the vectors are
// registered at once and curried by bind.
type vllmRequestMetrics struct {
	ttft, itl, e2e, queue *prometheus.HistogramVec
	success               *prometheus.CounterVec
}

// newVLLMRequestMetrics registers vLLM's per-request series in reg.
func newVLLMRequestMetrics(reg *prometheus.Registry) vllmRequestMetrics {
	hist := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, []string{"model_name"})
		reg.MustRegister(h)
		return h
	}
	v := vllmRequestMetrics{
		ttft:  hist("vllm:time_to_first_token_seconds", "Time from submission to the first generated token (prefixd_time_to_first_token_seconds).", vllmTTFTBuckets),
		itl:   hist("vllm:inter_token_latency_seconds", "Time between consecutive generated tokens of a request (prefixd_inter_token_latency_seconds).", vllmITLBuckets),
		e2e:   hist("vllm:e2e_request_latency_seconds", "Time from submission to the end of a request (prefixd_request_duration_seconds).", vllmRequestBuckets),
		queue: hist("vllm:request_queue_time_seconds", "Time from submission to first admission into the running batch (prefixd_queue_time_seconds).", vllmRequestBuckets),
		success: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm:request_success_total", Help: "Finished requests by vLLM's finished_reason: stop, length, abort (the client went away) or error.",
		}, []string{"model_name", "finished_reason"}),
	}
	reg.MustRegister(v.success)
	return v
}

// vllmObservers are vllmRequestMetrics' series of one model.
type vllmObservers struct {
	ttft, itl, e2e, queue prometheus.Observer
	success               map[engine.FinishReason]prometheus.Counter
}

// forModel returns the series labelled model_name=model, creating each
// finished_reason's counter so that it shows, at 0, before its first
// request.
func (v vllmRequestMetrics) forModel(model string) *vllmObservers {
	o := &vllmObservers{
		ttft: v.ttft.WithLabelValues(model), itl: v.itl.WithLabelValues(model),
		e2e: v.e2e.WithLabelValues(model), queue: v.queue.WithLabelValues(model),
		success: map[engine.FinishReason]prometheus.Counter{},
	}
	for r, label := range vllmFinishReasons {
		o.success[r] = v.success.WithLabelValues(model, label)
	}
	return o
}

// collectVLLM sends the vLLM names for model from st, the snapshot the
// prefixd_* series of the same scrape come from: read from a second
// snapshot, they could disagree with those by the engine's steps between
// the two.
func collectVLLM(ch chan<- prometheus.Metric, st *engine.Stats, cfg engine.Config, model string) {
	metric := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, labels...)
	}
	usage := 0.0
	if st.Blocks.Total > 0 {
		usage = float64(st.Blocks.InUse) / float64(st.Blocks.Total)
	}
	metric(descVLLMWaiting, prometheus.GaugeValue, float64(st.Waiting), model)
	metric(descVLLMRunning, prometheus.GaugeValue, float64(st.Running), model)
	metric(descVLLMKVUsage, prometheus.GaugeValue, usage, model)
	metric(descVLLMGPUUsage, prometheus.GaugeValue, usage, model)
	metric(descVLLMCacheInfo, prometheus.GaugeValue, 1, strconv.Itoa(cfg.BlockSize), strconv.Itoa(st.Blocks.Total),
		strconv.FormatBool(!cfg.DisablePrefixCache))
	metric(descVLLMQueries, prometheus.CounterValue, float64(st.CacheQueryTokens), model)
	metric(descVLLMHits, prometheus.CounterValue, float64(st.CacheHitDevice+st.CacheHitHost+st.CacheHitDisk+st.CacheHitRemote), model)
	metric(descVLLMPrompt, prometheus.CounterValue, float64(st.PromptTokens), model)
	metric(descVLLMGenerated, prometheus.CounterValue, float64(st.GeneratedTokens), model)
	metric(descVLLMPreempt, prometheus.CounterValue, float64(st.Preemptions), model)
	metric(descVLLMSpecDrafts, prometheus.CounterValue, float64(st.SpecDrafts), model)
	metric(descVLLMSpecDrafted, prometheus.CounterValue, float64(st.SpecDraftTokens), model)
	metric(descVLLMSpecAccepted, prometheus.CounterValue, float64(st.SpecAcceptedTokens), model)
	for i, n := range st.SpecAcceptedPerPos[:cfg.SpecTokens] {
		metric(descVLLMSpecPerPos, prometheus.CounterValue, float64(n), model, strconv.Itoa(i))
	}
}
