package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prefixd/prefixd/internal/redistest"
)

// requirePrometheus finds the prometheus binary. Without one the test
// skips, unless CI is set or PREFIXD_REQUIRE_PROMETHEUS=1: there it must
// run (scripts/prometheus.sh installs it).
func requirePrometheus(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("prometheus")
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" || os.Getenv("PREFIXD_REQUIRE_PROMETHEUS") == "1" {
		t.Fatalf("prometheus is not on PATH (scripts/prometheus.sh installs it): %v", err)
	}
	t.Skip("prometheus is not on PATH; scripts/prometheus.sh installs it (CI and PREFIXD_REQUIRE_PROMETHEUS=1 make this a failure)")
	return ""
}

// promRateWindow stands for Grafana's $__rate_interval: four of the
// test's one-second scrape intervals, as Grafana chooses for it.
const promRateWindow = "4s"

// dashboardVariables replaces the Grafana variables of a dashboard query:
// every instance, and the rate window.
var dashboardVariables = strings.NewReplacer(
	"${__rate_interval}", promRateWindow, "$__rate_interval", promRateWindow,
	"${instance}", ".*", "$instance", ".*",
)

// promQuery is a running Prometheus's HTTP API.
type promQuery struct{ base string }

// promResult is /api/v1/query's answer.
type promResult struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	} `json:"data"`
}

// query evaluates expr now.
func (p promQuery) query(expr string) (promResult, error) {
	var r promResult
	resp, err := http.Get(p.base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, fmt.Errorf("HTTP %d: %v", resp.StatusCode, err)
	}
	if r.Status != "success" {
		return r, fmt.Errorf("HTTP %d, %s: %s", resp.StatusCode, r.ErrorType, r.Error)
	}
	return r, nil
}

// startPrometheus runs prometheus on a free loopback port with its own
// configuration and storage in a temporary directory, scraping target's
// /metrics every second, and returns its API once it is ready. It is
// stopped when the test ends.
func startPrometheus(t *testing.T, bin, target string) promQuery {
	t.Helper()
	dir := t.TempDir()
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: prefixd
    metrics_path: /metrics
    static_configs:
      - targets: [%q]
`, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	// A free port: listen, note it, close. Another process could take it
	// before prometheus does; then prometheus exits and the test says so.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var log strings.Builder
	var logMu sync.Mutex
	cmd := exec.CommandContext(ctx, bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn")
	cmd.Stdout = lockedWriter{&log, &logMu}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	logged := func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return log.String()
	}
	p := promQuery{"http://" + addr}
	// A hang guard, not a timing: prometheus is ready in about a second.
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited before it was ready: %v\n%s", err, logged())
		default:
		}
		if resp, err := http.Get(p.base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus was not ready within a minute:\n%s", logged())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lockedWriter serializes writes to w: exec copies stdout and stderr on
// goroutines of their own.
type lockedWriter struct {
	w  *strings.Builder
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestDashboardOnPrometheus proves the Grafana dashboard against a real
// Prometheus: it scrapes a live server under a little load, and every
// PromQL expression of every panel (and the template variable's) must
// parse and return at least one series, as must the queries of a board
// built on vLLM's names. TestDashboardMetricsExported
// checks names; this checks that the queries work as written: a typo in
// a function, a histogram queried without _bucket, a label join that
// matches nothing.
func TestDashboardOnPrometheus(t *testing.T) {
	bin := requirePrometheus(t)
	exprs := dashboardQueries(t, loadDashboard(t))
	// What a board built on vLLM's names asks, as vLLM's own example
	// dashboard does.
	exprs = append(exprs,
		`histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{model_name!=""}[$__rate_interval])))`,
		`histogram_quantile(0.5, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[$__rate_interval])))`,
		`histogram_quantile(0.9, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[$__rate_interval])))`,
		`rate(vllm:request_queue_time_seconds_sum[$__rate_interval]) / rate(vllm:request_queue_time_seconds_count[$__rate_interval])`,
		`sum by (finished_reason) (increase(vllm:request_success_total[$__rate_interval]))`,
		`rate(vllm:prompt_tokens_total[$__rate_interval]) + rate(vllm:generation_tokens_total[$__rate_interval])`,
		`rate(vllm:num_preemptions_total[$__rate_interval])`,
		`vllm:kv_cache_usage_perc + vllm:num_requests_running + vllm:num_requests_waiting`,
		`rate(vllm:prefix_cache_hits_total[$__rate_interval]) / rate(vllm:prefix_cache_queries_total[$__rate_interval])`,
	)
	// A real remote tier (a redis-server of the test's own), so that its
	// row of panels has series to show.
	h, _ := remoteTierHarness(t, redistest.Start(t))
	p := startPrometheus(t, bin, h.addr)

	// Load until the queries are done: a repeated prompt (cache hits and
	// hit ages) and a fresh one (misses), so every rate has something to
	// count across its window.
	stop := make(chan struct{})
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			body := fmt.Sprintf(`{"prompt": "A dashboard under load, request %d.", "max_tokens": 4}`, i)
			if i%2 == 0 {
				body = `{"prompt": "A dashboard under load, the shared prefix.", "max_tokens": 4}`
			}
			resp, err := h.client.Post(h.url+"/generate", "application/json", strings.NewReader(body))
			if err == nil {
				resp.Body.Close()
			}
		}
	}()
	defer func() {
		close(stop)
		<-loaded
	}()

	// Wait for enough scrapes to fill a rate window twice over, each one
	// with load; a hang guard bounds the wait.
	deadline := time.Now().Add(90 * time.Second)
	for {
		r, err := p.query(`count_over_time(up{job="prefixd"}[1m])`)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if len(r.Data.Result) == 1 {
			var s struct {
				Value [2]any `json:"value"`
			}
			if json.Unmarshal(r.Data.Result[0], &s) == nil {
				fmt.Sscan(fmt.Sprint(s.Value[1]), &n)
			}
		}
		if n >= 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus scraped %d times in 90 s, want 8", n)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if r, err := p.query(`up{job="prefixd"} == 1`); err != nil || len(r.Data.Result) != 1 {
		t.Fatalf("the scrape target is not up: %v %+v", err, r)
	}

	for _, e := range exprs {
		q := dashboardVariables.Replace(e)
		r, err := p.query(q)
		switch {
		case err != nil:
			t.Errorf("panel query %s:\n\t%s: %v", e, q, err)
		case len(r.Data.Result) == 0:
			t.Errorf("panel query %s:\n\t%s returned no series (%s)", e, q, r.Data.ResultType)
		}
	}
	t.Logf("%d dashboard queries answered by %s", len(exprs), bin)
}
