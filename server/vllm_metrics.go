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
)

// vllmDescs are the vLLM series statsCollector exports.
var vllmDescs = []*prometheus.Desc{descVLLMWaiting, descVLLMRunning, descVLLMKVUsage, descVLLMGPUUsage,
	descVLLMCacheInfo, descVLLMQueries, descVLLMHits}

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
}
