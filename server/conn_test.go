package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/prefixd/prefixd/engine"
)

// rawRequest dials the server and writes one HTTP/1.x request with body.
func (h *harness) rawRequest(proto, method, path, body string, header ...string) *net.TCPConn {
	h.t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	var hdr strings.Builder
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(&hdr, "%s: %s\r\n", header[i], header[i+1])
	}
	fmt.Fprintf(c, "%s %s %s\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s",
		method, path, proto, len(body), hdr.String(), body)
	return c.(*net.TCPConn)
}

// dialRaw sends raw bytes on a new connection and returns it.
func (h *harness) dialRaw(raw string) net.Conn {
	h.t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, raw); err != nil {
		h.t.Fatal(err)
	}
	return c
}

// TestHalfCloseIsNoHangup sends a request and shuts down the sending side,
// as curl scripts and some proxies do: the client still reads, so the
// request must run to its end and answer in full, after the interim
// response the server probes the connection with.
func TestHalfCloseIsNoHangup(t *testing.T) {
	h := newHarness(t)
	for _, path := range []string{"/generate", "/v1/completions"} {
		resume := h.pause()
		c := h.rawRequest("HTTP/1.1", "POST", path, `{"prompt": "half closed", "max_tokens": 5, "ignore_eos": true, "temperature": 0}`)
		if path == "/v1/completions" {
			c = h.rawRequest("HTTP/1.1", "POST", path, `{"prompt": "half closed", "max_tokens": 5, "temperature": 0}`)
		}
		if err := c.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		// The probe comes while the engine is paused: the request is still
		// running when the server sees the FIN. The deadline only bounds a
		// hang: a server that takes the FIN for a hang-up cancels the
		// request and says nothing until the engine moves again.
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("%s: no interim response to a half-closed client (%v): was it taken for a hang-up?", path, err)
		}
		c.SetReadDeadline(time.Time{})
		if resp.StatusCode != 100 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s: half-closed client got %d %q before its request could finish, want 100 then the answer", path, resp.StatusCode, b)
		}
		resume()
		resp, err = http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("%s: reading the answer: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		var out struct {
			IDs     []int32 `json:"ids"`
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(b, &out) != nil || out.Usage.CompletionTokens != 5 {
			t.Errorf("%s: half-closed client got %d %q, want 200 with 5 tokens", path, resp.StatusCode, b)
		}
	}
	if n := metric(h.scrape(), "prefixd_client_hangups_total"); n != 0 {
		t.Errorf("%v half-closed clients counted as hang-ups", n)
	}
	h.checkDrained()
}

// TestEngineRefusalNamesParam sends a request only the engine can refuse
// (it needs more KV blocks than the pool has): the 400 names the field,
// and its message is the engine's without the sentinel's prefix.
func TestEngineRefusalNamesParam(t *testing.T) {
	h := newHarness(t, withEngine(func(c *engine.Config) { c.NumBlocks = 16 }))
	code, b, _ := h.do("POST", "/generate", `{"prompt_ids": [1, 2, 3], "max_tokens": 200}`)
	var e struct {
		Error apiError `json:"error"`
	}
	if code != 400 || json.Unmarshal(b, &e) != nil {
		t.Fatalf("%d %s, want a 400", code, b)
	}
	if e.Error.Param != "max_tokens" || strings.HasPrefix(e.Error.Message, "engine:") || !strings.Contains(e.Error.Message, "KV blocks") {
		t.Errorf("error %+v: want param max_tokens and the engine's message without its prefix", e.Error)
	}
}

// TestHTTP10Stream reads the streaming endpoints as an HTTP/1.0 client,
// which knows no chunked encoding: the body must end where the
// connection closes, and hold every event and [DONE].
func TestHTTP10Stream(t *testing.T) {
	h := newHarness(t)
	for path, body := range map[string]string{
		"/generate_stream": `{"prompt": "old client", "max_tokens": 4, "ignore_eos": true}`,
		"/v1/completions":  `{"prompt": "old client", "max_tokens": 4, "temperature": 0, "stream": true}`,
	} {
		c := h.rawRequest("HTTP/1.0", "POST", path, body)
		c.SetReadDeadline(time.Now().Add(30 * time.Second)) // bounds a hang only
		b, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("%s: %v after %q", path, err, b)
		}
		head, events, _ := strings.Cut(string(b), "\r\n\r\n")
		if !strings.HasPrefix(head, "HTTP/1.0 200 ") || strings.Contains(strings.ToLower(head), "chunked") ||
			!strings.Contains(head, "Content-Type: text/event-stream") {
			t.Errorf("%s: HTTP/1.0 client got headers %q", path, head)
		}
		if n := strings.Count(events, "data: "); n < 3 || !strings.HasSuffix(events, "data: [DONE]\n\n") {
			t.Errorf("%s: HTTP/1.0 client got body %q, want the events then [DONE]", path, events)
		}
	}
	h.checkDrained()
}

// TestHealthAlias checks /health answers as /healthz does.
func TestHealthAlias(t *testing.T) {
	h := newHarness(t)
	code, b, _ := h.do("GET", "/health", "")
	if code != 200 || strings.TrimSpace(string(b)) != `{"status":"ok"}` {
		t.Errorf("GET /health: %d %s", code, b)
	}
}

// TestGzipBody sends a gzip-encoded request: it is decoded, not misread.
func TestGzipBody(t *testing.T) {
	h := newHarness(t)
	plain := h.generate(`{"prompt": "zipped", "max_tokens": 4}`)
	zipped := h.generate(gzipped(`{"prompt": "zipped", "max_tokens": 4}`), "Content-Encoding", "gzip")
	if zipped.Text != plain.Text || zipped.Usage.PromptTokens != plain.Usage.PromptTokens {
		t.Errorf("gzip-encoded request: %+v, plain: %+v", zipped, plain)
	}
}

// TestSurrogatePairAccepted checks that a well-formed escaped surrogate
// pair (U+1F600, 4 bytes of UTF-8) and an escaped backslash before "u"
// pass the escape check and reach the tokenizer intact.
func TestSurrogatePairAccepted(t *testing.T) {
	h := newHarness(t)
	for body, tokens := range map[string]int{
		`{"prompt": "\ud83d\ude00", "max_tokens": 1}`: 1 + 4,
		`{"prompt": "\\ud800", "max_tokens": 1}`:      1 + 6,
	} {
		if r := h.generate(body); r.Usage.PromptTokens != tokens {
			t.Errorf("%s: %d prompt tokens, want %d", body, r.Usage.PromptTokens, tokens)
		}
	}
}

// TestKeepAliveHangupCancels closes connections whose long request is not
// the connection's first HTTP/1.1 one: the second request of a keep-alive
// connection (sent after reading the first answer, and pipelined behind
// it) and an HTTP/1.0 request. The engine is paused throughout, so each
// request is still running when its client leaves: the server must see
// every hang-up and cancel every request.
func TestKeepAliveHangupCancels(t *testing.T) {
	h := newHarness(t)
	const long = `{"prompt": "A long story, please.", "max_tokens": 900, "ignore_eos": true}`
	first := "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	second := fmt.Sprintf("POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(long), long)
	readAnswer := func(c net.Conn) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(30 * time.Second)) // bounds a hang only
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("reading the first answer: %v", err)
		}
		io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("first answer: %d", resp.StatusCode)
		}
	}
	resume := h.pause()
	// In turn: the second request is sent once the first is answered.
	seq := h.dialRaw(first)
	readAnswer(seq)
	io.WriteString(seq, second)
	// Pipelined: both at once; the first answer must still come before
	// the second request ends.
	piped := h.dialRaw(first + second)
	readAnswer(piped)
	old := h.rawRequest("HTTP/1.0", "POST", "/generate", long)
	for _, c := range []net.Conn{seq, piped, old} {
		c.Close()
	}
	h.scrapeWhen("three hang-ups to be seen", func(f map[string]*dto.MetricFamily) bool {
		return metric(f, "prefixd_client_hangups_total") == 3
	})
	resume()
	fams := h.scrapeWhen("the requests to be cancelled", func(f map[string]*dto.MetricFamily) bool {
		return metric(f, "prefixd_requests_total", "finish_reason", "cancelled") == 3
	})
	if g := metric(fams, "prefixd_generated_tokens_total"); g >= 900 {
		t.Errorf("%v tokens generated: a hung-up request ran to the end", g)
	}
	h.checkDrained()
}
