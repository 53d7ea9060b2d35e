package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"

	"github.com/prefixd/prefixd/engine"
)

// TestQueueFull pauses the engine inside a forward pass of request A, so
// that B fills the one waiting slot and C must be refused.
func TestQueueFull(t *testing.T) {
	h := newHarness(t, withEngine(func(c *engine.Config) { c.MaxRunning, c.MaxWaiting = 1, 1 }))
	h.gate.mu.Lock()
	a := h.stream("/generate_stream", `{"prompt": "A", "max_tokens": 3, "ignore_eos": true}`)
	<-h.gate.entered // A is admitted and running
	b := h.stream("/generate_stream", `{"prompt": "B", "max_tokens": 3, "ignore_eos": true}`)
	for _, path := range []string{"/generate", "/generate_stream", "/v1/completions"} {
		code, body, hdr := h.do("POST", path, `{"prompt": "C", "max_tokens": 3}`)
		if code != 429 || hdr.Get("Retry-After") != "1" || !strings.Contains(string(body), "rate_limit_error") {
			t.Errorf("%s with a full queue: %d %s (Retry-After %q)", path, code, body, hdr.Get("Retry-After"))
		}
	}
	h.gate.mu.Unlock()
	for _, s := range []*sse{a, b} {
		if toks, final := readStream(t, s); len(toks) != 3 || final.FinishReason != "length" {
			t.Errorf("queued request: %d tokens, %+v", len(toks), final)
		}
	}
	// Capacity is back.
	h.generate(`{"prompt": "D", "max_tokens": 2}`)
	h.checkDrained()
}

// TestStreamDisconnectCancels closes a stream's connection mid-generation
// and while queued: each request must be cancelled and its blocks freed.
func TestStreamDisconnectCancels(t *testing.T) {
	h := newHarness(t, withEngine(func(c *engine.Config) { c.MaxRunning = 1 }))
	long := `{"prompt": "A long story, please.", "max_tokens": 1000, "ignore_eos": true}`
	running := h.stream("/generate_stream", long)
	for range 3 {
		if data, err := running.next(); err != nil || !strings.Contains(data, `"id"`) {
			t.Fatalf("event %q, %v", data, err)
		}
	}
	// Queue a second request behind the first (MaxRunning is 1), with the
	// engine paused so that it cannot start.
	h.gate.mu.Lock()
	queued := h.stream("/generate_stream", long) // submitted once its headers are back
	queued.close()
	running.close()
	h.gate.mu.Unlock()
	h.checkDrained()
	fams := h.scrapeWhen("both requests to finish", func(f map[string]*dto.MetricFamily) bool {
		return metric(f, "prefixd_requests_total", "finish_reason", "cancelled") == 2
	})
	if g := metric(fams, "prefixd_generated_tokens_total"); g >= 1000 {
		t.Errorf("%v tokens generated: the disconnected stream ran to the end", g)
	}
	// The pool is whole again: a request needing most of it runs.
	h.generate(`{"prompt": "after", "max_tokens": 900, "ignore_eos": true}`)
	h.checkDrained()
}

// TestGracefulShutdown drains an in-flight stream: readiness turns 503,
// the listener refuses new connections, the engine refuses new requests,
// and the stream still completes.
func TestGracefulShutdown(t *testing.T) {
	h := newHarness(t)
	h.gate.mu.Lock()
	s := h.stream("/generate_stream", `{"prompt": "in flight", "max_tokens": 20, "ignore_eos": true}`)
	<-h.gate.entered
	done := make(chan error, 1)
	go func() { done <- h.srv.Shutdown(context.Background()) }()
	waitFor(t, "draining", h.srv.Draining)

	if code, body := h.call("GET", "/readyz", ""); code != 503 || !strings.Contains(body, "draining") {
		t.Errorf("readyz while draining: %d %s", code, body)
	}
	if code, _ := h.call("GET", "/healthz", ""); code != 200 {
		t.Errorf("healthz while draining: %d", code)
	}
	waitFor(t, "new connections to be refused", func() bool {
		c, err := net.Dial("tcp", h.addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	waitFor(t, "the engine to refuse requests", func() bool {
		code, body := h.call("POST", "/generate", `{"prompt": "late", "max_tokens": 2}`)
		return code == 503 && strings.Contains(body, "shutting down")
	})

	h.gate.mu.Unlock()
	if toks, final := readStream(t, s); len(toks) != 20 || final.FinishReason != "length" {
		t.Errorf("the in-flight stream got %d tokens, %+v", len(toks), final)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-h.served; err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
}

// TestShutdownDeadlineCancels ends a drain early: the engine cancels what
// is still running, and the stream says so.
func TestShutdownDeadlineCancels(t *testing.T) {
	h := newHarness(t)
	h.gate.mu.Lock()
	s := h.stream("/generate_stream", `{"prompt": "too long to wait for", "max_tokens": 1000, "ignore_eos": true}`)
	<-h.gate.entered
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.srv.Shutdown(ctx) }()
	waitFor(t, "draining", h.srv.Draining)
	cancel() // the drain deadline passes
	h.gate.mu.Unlock()
	toks, final := readStream(t, s)
	if final.FinishReason != "cancelled" || len(toks) >= 1000 || final.Error == nil {
		t.Errorf("stream after the deadline: %d tokens, %+v", len(toks), final)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown: %v, want context.Canceled", err)
	}
}

// call runs the handler directly, without the network: for requests while
// the listener is closed.
func (h *harness) call(method, path, body string) (int, string) {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(path)
	ctx.Request.SetBodyString(body)
	h.srv.Handler()(&ctx)
	var e map[string]any
	if ctx.Response.StatusCode() != 200 && json.Unmarshal(ctx.Response.Body(), &e) != nil {
		h.t.Errorf("%s %s: non-JSON body %q", method, path, ctx.Response.Body())
	}
	return ctx.Response.StatusCode(), string(ctx.Response.Body())
}

// TestHangupCancels sends non-streaming requests on raw connections and
// closes them while the engine is paused: fasthttp says nothing to the
// handler, so the server must notice the hang-up itself, cancel both
// requests (the running one and the queued one) and free their blocks.
func TestHangupCancels(t *testing.T) {
	h := newHarness(t, withEngine(func(c *engine.Config) { c.MaxRunning = 1 }))
	h.gate.mu.Lock()
	var conns []net.Conn
	for _, path := range []string{"/generate", "/v1/completions"} {
		body := `{"prompt": "A long story, please.", "max_tokens": 1000, "ignore_eos": true}`
		if path == "/v1/completions" {
			body = `{"prompt": "Another long story.", "max_tokens": 1000, "temperature": 0}`
		}
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
		conns = append(conns, c)
	}
	<-h.gate.entered // the first is admitted and inside a forward pass
	for _, c := range conns {
		c.Close()
	}
	// The engine stays paused until the server has seen both hang-ups:
	// resumed earlier, the first request could run its 1000 tokens out
	// before its client's reset is seen.
	h.scrapeWhen("both hang-ups to be seen", func(f map[string]*dto.MetricFamily) bool {
		return metric(f, "prefixd_client_hangups_total") == 2
	})
	h.gate.mu.Unlock()
	fams := h.scrapeWhen("both requests to be cancelled", func(f map[string]*dto.MetricFamily) bool {
		return metric(f, "prefixd_requests_total", "finish_reason", "cancelled") == 2
	})
	if g := metric(fams, "prefixd_generated_tokens_total"); g >= 1000 {
		t.Errorf("%v tokens generated: a hung-up request ran to the end", g)
	}
	h.checkDrained()
}
