package server

import (
	"bytes"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape fetches /metrics and parses it with the Prometheus text parser.
func (h *harness) scrape() map[string]*dto.MetricFamily {
	h.t.Helper()
	code, b, hdr := h.do("GET", "/metrics", "")
	if code != 200 {
		h.t.Fatalf("/metrics: %d %s", code, b)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		h.t.Fatalf("/metrics Content-Type %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		h.t.Fatalf("parsing /metrics: %v\n%s", err, b)
	}
	return fams
}

// metric returns the value of the series of name with the given label
// pairs (a histogram's sample count), or -1 if it is absent.
func metric(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

// scrapeWhen scrapes until cond holds: the engine publishes its counters
// after each iteration, possibly just after a response went out.
func (h *harness) scrapeWhen(what string, cond func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	h.t.Helper()
	var fams map[string]*dto.MetricFamily
	waitFor(h.t, what, func() bool {
		fams = h.scrape()
		return cond(fams)
	})
	return fams
}

func TestMetrics(t *testing.T) {
	h := newHarness(t)
	before := h.scrape()
	for _, name := range []string{
		"prefixd_cache_query_tokens_total", "prefixd_cache_hit_tokens_total", "prefixd_prefill_tokens_total",
		"prefixd_prompt_tokens_total", "prefixd_generated_tokens_total", "prefixd_cache_evicted_blocks_total",
		"prefixd_preemptions_total", "prefixd_blocks", "prefixd_requests_running", "prefixd_requests_waiting",
		"prefixd_kv_memory_efficiency", "prefixd_time_to_first_token_seconds", "prefixd_inter_token_latency_seconds",
		"prefixd_request_duration_seconds", "prefixd_queue_time_seconds", "prefixd_cache_hit_age_seconds",
		"prefixd_cache_block_lifetime_seconds", "prefixd_batch_rows", "prefixd_scheduler_step_seconds",
		"prefixd_cache_ttl_seconds",
	} {
		if before[name] == nil && name != "prefixd_cache_hit_age_seconds" && name != "prefixd_requests_total" {
			t.Errorf("metric %s missing", name)
		}
	}
	for _, r := range []string{"ttl", "lru", "priority", "flush", "pressure"} {
		if metric(before, "prefixd_cache_evicted_blocks_total", "reason", r) != 0 {
			t.Errorf("evictions %s not exported at 0", r)
		}
	}
	if v := metric(before, "prefixd_blocks", "state", "free"); v != 192 {
		t.Errorf("free blocks %v, want 192", v)
	}

	body := `{"prompt": "Metrics are counted in tokens, not in requests.", "max_tokens": 5, "ignore_eos": true}`
	first := h.generate(body)
	generated := func(n float64) func(map[string]*dto.MetricFamily) bool {
		return func(f map[string]*dto.MetricFamily) bool { return metric(f, "prefixd_generated_tokens_total") == n }
	}
	mid := h.scrapeWhen("the first request's counters", generated(5))
	second := h.generate(body)
	after := h.scrapeWhen("the second request's counters", generated(10))

	if second.Usage.CachedTokens == 0 {
		t.Fatal("the repeat hit no cache")
	}
	delta := func(name string, labels ...string) float64 {
		return metric(after, name, labels...) - metric(mid, name, labels...)
	}
	if d := delta("prefixd_cache_hit_tokens_total", "tier", "device"); d != float64(second.Usage.CachedTokens) {
		t.Errorf("device hit tokens rose by %v, usage says %d cached", d, second.Usage.CachedTokens)
	}
	if d := delta("prefixd_cache_hit_tokens_total", "tier", "host"); d != 0 {
		t.Errorf("host hit tokens rose by %v without a host tier", d)
	}
	if d := delta("prefixd_prefill_tokens_total"); d != float64(second.Usage.PrefillTokens) {
		t.Errorf("prefill tokens rose by %v, usage says %d", d, second.Usage.PrefillTokens)
	}
	if d := delta("prefixd_prompt_tokens_total"); d != float64(second.Usage.PromptTokens) {
		t.Errorf("prompt tokens rose by %v, usage says %d", d, second.Usage.PromptTokens)
	}
	if d := metric(mid, "prefixd_prefill_tokens_total") - metric(before, "prefixd_prefill_tokens_total"); d != float64(first.Usage.PrefillTokens) {
		t.Errorf("first request: prefill tokens rose by %v, usage says %d", d, first.Usage.PrefillTokens)
	}
	if d := delta("prefixd_cache_query_tokens_total"); d <= 0 || d < float64(second.Usage.CachedTokens) {
		t.Errorf("cache query tokens rose by %v", d)
	}
	if v := metric(after, "prefixd_requests_total", "finish_reason", "length"); v != 2 {
		t.Errorf("requests_total{length} = %v, want 2", v)
	}
	for _, name := range []string{"prefixd_time_to_first_token_seconds", "prefixd_request_duration_seconds", "prefixd_queue_time_seconds"} {
		if v := metric(after, name); v != 2 {
			t.Errorf("%s has %v observations, want 2", name, v)
		}
	}
	if v := metric(after, "prefixd_inter_token_latency_seconds"); v != 8 {
		t.Errorf("inter-token latency has %v observations, want 8 (4 gaps per request)", v)
	}
	if v := metric(after, "prefixd_cache_hit_age_seconds", "tier", "device"); v < 1 {
		t.Errorf("cache hit age has %v device observations", v)
	}
	if metric(after, "prefixd_batch_rows") < 5 || metric(after, "prefixd_scheduler_step_seconds") < 5 {
		t.Error("batch size and step time not observed per forward pass")
	}
	if v := metric(after, "prefixd_http_requests_total", "route", "/generate", "code", "200"); v != 2 {
		t.Errorf("http_requests_total{/generate,200} = %v", v)
	}
	free, idle, inUse := metric(after, "prefixd_blocks", "state", "free"), metric(after, "prefixd_blocks", "state", "cached_idle"), metric(after, "prefixd_blocks", "state", "in_use")
	if inUse != 0 || idle == 0 || free+idle != 192 {
		t.Errorf("blocks free %v cached_idle %v in_use %v, want the cached prompt idle and the rest free", free, idle, inUse)
	}

	// Unknown paths share one label value: the label set stays bounded.
	h.do("GET", "/a", "")
	h.do("GET", "/b", "")
	if v := metric(h.scrape(), "prefixd_http_requests_total", "route", "other", "code", "404"); v != 2 {
		t.Errorf("unknown paths: %v under route=other", v)
	}
	for name := range after {
		if !strings.HasPrefix(name, "prefixd_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") &&
			!strings.HasPrefix(name, "vllm:") { // vllm_metrics.go: the names endpoint pickers read
			t.Errorf("metric %s lacks the prefixd_ prefix", name)
		}
	}
}

// TestBucketLabels checks the le labels a scrape prints: the cache hit
// age buckets are 0.1 s times powers of 3, written as a person would
// (le="0.3", not 0.30000000000000004), and no bound anywhere carries
// float drift.
func TestBucketLabels(t *testing.T) {
	h := newHarness(t)
	_, b, _ := h.do("GET", "/metrics", "")
	text := string(b)
	for _, le := range []string{"0.1", "0.3", "0.9", "2.7", "8.1", "24.3", "72.9", "218.7", "656.1", "1968.3", "5904.9", "17714.7"} {
		if !strings.Contains(text, `prefixd_cache_hit_age_seconds_bucket{tier="device",le="`+le+`"}`) {
			t.Errorf("no hit-age bucket le=%q", le)
		}
	}
	for l := range strings.Lines(text) {
		_, rest, ok := strings.Cut(l, `le="`)
		if !ok {
			continue
		}
		le, _, _ := strings.Cut(rest, `"`)
		if len(strings.TrimLeft(strings.ReplaceAll(le, ".", ""), "0")) > 8 {
			t.Errorf("bucket label %q carries float drift: %s", le, l)
		}
	}
}
