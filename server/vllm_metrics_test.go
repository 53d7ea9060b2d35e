package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// TestVLLMMetrics checks that /metrics carries the names endpoint pickers
// scrape from vLLM, with vLLM's meaning, and that they agree with the
// prefixd_* series of the same scrape.
func TestVLLMMetrics(t *testing.T) {
	h := newHarness(t)
	model := h.srv.cfg.ModelName
	idle := h.scrape()
	for _, name := range []string{"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
		"vllm:gpu_cache_usage_perc", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"} {
		if v := metric(idle, name, "model_name", model); v != 0 {
			t.Errorf("idle %s{model_name=%q} = %v, want 0", name, model, v)
		}
	}
	if v := metric(idle, "vllm:cache_config_info", "block_size", "8", "num_gpu_blocks", "192", "enable_prefix_caching", "true"); v != 1 {
		t.Errorf("vllm:cache_config_info{block_size=8,num_gpu_blocks=192} = %v, want 1", v)
	}

	// While a long generation runs, the running gauge and the usage show it.
	done := make(chan error, 1)
	go func() {
		resp, err := http.Post(h.url+"/generate", "application/json",
			strings.NewReader(`{"prompt": "Picker, pick me.", "max_tokens": 600, "ignore_eos": true}`))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	busy := h.scrapeWhen("a running request", func(f map[string]*dto.MetricFamily) bool {
		return metric(f, "vllm:num_requests_running", "model_name", model) == 1
	})
	usage := metric(busy, "vllm:kv_cache_usage_perc", "model_name", model)
	if want := metric(busy, "prefixd_blocks", "state", "in_use") / 192; usage != want || usage <= 0 || usage > 1 {
		t.Errorf("vllm:kv_cache_usage_perc %v, want in_use/total = %v in (0, 1]", usage, want)
	}
	if old := metric(busy, "vllm:gpu_cache_usage_perc", "model_name", model); old != usage {
		t.Errorf("vllm:gpu_cache_usage_perc %v != vllm:kv_cache_usage_perc %v", old, usage)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	body := `{"prompt": "The same words twice make a prefix-cache hit.", "max_tokens": 2}`
	h.generate(body)
	if r := h.generate(body); r.Usage.CachedTokens == 0 {
		t.Fatal("the repeat hit no cache")
	}
	after := h.scrapeWhen("the hits counted", func(f map[string]*dto.MetricFamily) bool {
		return metric(f, "vllm:prefix_cache_hits_total", "model_name", model) > 0
	})
	if q, want := metric(after, "vllm:prefix_cache_queries_total", "model_name", model), metric(after, "prefixd_cache_query_tokens_total"); q != want || q <= 0 {
		t.Errorf("vllm:prefix_cache_queries_total %v, want prefixd_cache_query_tokens_total %v", q, want)
	}
	hits := metric(after, "prefixd_cache_hit_tokens_total", "tier", "device") + metric(after, "prefixd_cache_hit_tokens_total", "tier", "host")
	if v := metric(after, "vllm:prefix_cache_hits_total", "model_name", model); v != hits {
		t.Errorf("vllm:prefix_cache_hits_total %v, want the prefixd hits of every tier %v", v, hits)
	}
}

// TestVLLMMetricsOneSnapshot scrapes again and again while a generation
// takes blocks: in every scrape the vLLM series agree with the prefixd_*
// ones, which holds only if both are read from one engine snapshot, not
// from two with engine steps between them.
func TestVLLMMetricsOneSnapshot(t *testing.T) {
	h := newHarness(t)
	model := h.srv.cfg.ModelName
	done := make(chan error, 1)
	go func() {
		resp, err := http.Post(h.url+"/generate", "application/json",
			strings.NewReader(`{"prompt": "Count my blocks.", "max_tokens": 600, "ignore_eos": true}`))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	f := h.scrapeWhen("a running request", func(f map[string]*dto.MetricFamily) bool {
		return metric(f, "vllm:num_requests_running", "model_name", model) == 1
	})
	for scrapes := 1; ; scrapes++ {
		inUse := metric(f, "prefixd_blocks", "state", "in_use")
		if usage := metric(f, "vllm:kv_cache_usage_perc", "model_name", model); usage != inUse/192 {
			t.Fatalf("scrape %d: vllm:kv_cache_usage_perc %v, want prefixd_blocks{state=in_use}/192 = %v/192", scrapes, usage, inUse)
		}
		running, vllmRunning := metric(f, "prefixd_requests_running"), metric(f, "vllm:num_requests_running", "model_name", model)
		if running != vllmRunning {
			t.Fatalf("scrape %d: vllm:num_requests_running %v, want prefixd_requests_running %v", scrapes, vllmRunning, running)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
		f = h.scrape()
	}
}

// TestVLLMRequestMetrics checks vLLM's per-request series: after requests
// finished by length and by stop, each vLLM histogram counts what its
// prefixd_* twin counts, the finished_reason counters match
// prefixd_requests_total, and the token and preemption counters match
// theirs, all under the served model's model_name.
func TestVLLMRequestMetrics(t *testing.T) {
	h := newHarness(t)
	model := h.srv.cfg.ModelName
	idle := h.scrape()
	for _, reason := range []string{"stop", "length", "abort", "error"} {
		if v := metric(idle, "vllm:request_success_total", "model_name", model, "finished_reason", reason); v != 0 {
			t.Errorf("idle vllm:request_success_total{finished_reason=%q} = %v, want 0", reason, v)
		}
	}
	first := h.generate(`{"prompt": "Four tokens and out.", "max_tokens": 4, "ignore_eos": true, "temperature": 0}`)
	if first.FinishReason != "length" || len(first.IDs) != 4 {
		t.Fatalf("first request: finish %q with %d tokens, want length with 4", first.FinishReason, len(first.IDs))
	}
	// The same greedy generation, stopped at its first token.
	stopped := h.generate(fmt.Sprintf(`{"prompt": "Four tokens and out.", "max_tokens": 4, "ignore_eos": true, "temperature": 0, "stop_ids": [%d]}`, first.IDs[0]))
	if stopped.FinishReason != "stop" {
		t.Fatalf("second request: finish %q, want stop", stopped.FinishReason)
	}
	after := h.scrapeWhen("both requests counted", func(f map[string]*dto.MetricFamily) bool {
		return metric(f, "vllm:e2e_request_latency_seconds", "model_name", model) == 2
	})
	for reason, prefixd := range map[string]string{"stop": "stop", "length": "length"} {
		v := metric(after, "vllm:request_success_total", "model_name", model, "finished_reason", reason)
		if want := metric(after, "prefixd_requests_total", "finish_reason", prefixd); v != want || v != 1 {
			t.Errorf("vllm:request_success_total{finished_reason=%q} = %v, want prefixd_requests_total's %v, 1", reason, v, want)
		}
	}
	for vllm, prefixd := range map[string]string{
		"vllm:time_to_first_token_seconds": "prefixd_time_to_first_token_seconds",
		"vllm:inter_token_latency_seconds": "prefixd_inter_token_latency_seconds",
		"vllm:e2e_request_latency_seconds": "prefixd_request_duration_seconds",
		"vllm:request_queue_time_seconds":  "prefixd_queue_time_seconds",
		"vllm:prompt_tokens_total":         "prefixd_prompt_tokens_total",
		"vllm:generation_tokens_total":     "prefixd_generated_tokens_total",
		"vllm:num_preemptions_total":       "prefixd_preemptions_total",
	} {
		v, want := metric(after, vllm, "model_name", model), metric(after, prefixd)
		if v != want || v < 0 {
			t.Errorf("%s{model_name=%q} = %v, want %s's %v", vllm, model, v, prefixd, want)
		}
	}
	// Four tokens: at least three gaps.
	if v := metric(after, "vllm:inter_token_latency_seconds", "model_name", model); v < 3 {
		t.Errorf("vllm:inter_token_latency_seconds count %v, want at least 3", v)
	}
}
