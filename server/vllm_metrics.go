package server

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
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
)

// vllmCollector exports the vLLM names from one engine.Stats snapshot per
// scrape. The model name comes from the server the Metrics is bound to.
type vllmCollector struct {
	m     *Metrics
	model atomic.Pointer[string]
}

// Describe implements prometheus.Collector.
func (c *vllmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descVLLMWaiting, descVLLMRunning, descVLLMKVUsage, descVLLMGPUUsage,
		descVLLMCacheInfo, descVLLMQueries, descVLLMHits} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *vllmCollector) Collect(ch chan<- prometheus.Metric) {
	e, model := c.m.eng.Load(), c.model.Load()
	if e == nil || model == nil {
		return
	}
	st, cfg := e.Stats(), e.Config()
	metric := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, labels...)
	}
	usage := 0.0
	if st.Blocks.Total > 0 {
		usage = float64(st.Blocks.InUse) / float64(st.Blocks.Total)
	}
	metric(descVLLMWaiting, prometheus.GaugeValue, float64(st.Waiting), *model)
	metric(descVLLMRunning, prometheus.GaugeValue, float64(st.Running), *model)
	metric(descVLLMKVUsage, prometheus.GaugeValue, usage, *model)
	metric(descVLLMGPUUsage, prometheus.GaugeValue, usage, *model)
	metric(descVLLMCacheInfo, prometheus.GaugeValue, 1, strconv.Itoa(cfg.BlockSize), strconv.Itoa(st.Blocks.Total),
		strconv.FormatBool(!cfg.DisablePrefixCache))
	metric(descVLLMQueries, prometheus.CounterValue, float64(st.CacheQueryTokens), *model)
	metric(descVLLMHits, prometheus.CounterValue, float64(st.CacheHitDevice+st.CacheHitHost), *model)
}
