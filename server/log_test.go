package server

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// logBuffer collects a server's log lines; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// withLogCapture sends the server's log, every level, to b.
func withLogCapture(b *logBuffer) option {
	return withServer(func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
}

// TestLogHasNoSecrets sends requests fasthttp cannot parse (two
// Content-Length headers, a bad header line) and good ones, all carrying
// an API key, the admin token and prompt text: none of them may reach the
// log at any level.
func TestLogHasNoSecrets(t *testing.T) {
	var logs logBuffer
	h := newHarness(t, withLogCapture(&logs), withServer(func(c *Config) {
		c.APIKeys = map[string]string{"sk-tenant-secret": "tenant"}
	}))
	const prompt = `{"prompt": "the launch code is swordfish", "max_tokens": 2}`
	for _, raw := range []string{
		"POST /generate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-tenant-secret\r\nContent-Length: 60\r\nContent-Length: 61\r\n\r\n" + prompt,
		"POST /v1/cache/flush HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-secret\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n{\"all\":true}",
		"POST /generate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-tenant-secret\r\nBad Header swordfish\r\n\r\n",
	} {
		conn := h.dialRaw(raw)
		b, _ := io.ReadAll(conn)
		if !strings.Contains(string(b), " 400 ") {
			t.Errorf("malformed request answered %q, want a 400", b)
		}
	}
	h.generate(prompt, "Authorization", "Bearer sk-tenant-secret")
	h.do("GET", "/v1/cache", "", "Authorization", "Bearer admin-secret")
	h.do("POST", "/generate", `{"prompt": "swordfish", "max_tokens": 0}`, "Authorization", "Bearer sk-tenant-secret")
	h.srv.Shutdown(t.Context())
	out := logs.String()
	if !strings.Contains(out, "duplicate content-length") {
		t.Errorf("the log does not say what was malformed:\n%s", out)
	}
	for _, secret := range []string{"sk-tenant-secret", "admin-secret", "swordfish"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %q:\n%s", secret, out)
		}
	}
}

// TestStatsNeedAKey checks the choice Config.PublicStats makes: with API
// keys, the aggregate figures need a key or the admin token unless they
// are public; the static status page is always open.
func TestStatsNeedAKey(t *testing.T) {
	for _, public := range []bool{false, true} {
		h := newHarness(t, withServer(func(c *Config) {
			c.APIKeys, c.PublicStats = map[string]string{"key-a": "tenant-a"}, public
		}))
		for _, path := range []string{"/metrics", "/v1/stats"} {
			for _, tc := range []struct {
				auth string
				want int
			}{
				{"", map[bool]int{false: 401, true: 200}[public]},
				{"Bearer wrong", map[bool]int{false: 401, true: 200}[public]},
				{"Bearer key-a", 200},
				{"Bearer admin-secret", 200},
			} {
				var hdr []string
				if tc.auth != "" {
					hdr = []string{"Authorization", tc.auth}
				}
				if code, b, _ := h.do("GET", path, "", hdr...); code != tc.want {
					t.Errorf("PublicStats %v: GET %s with %q: %d %.100s, want %d", public, path, tc.auth, code, b, tc.want)
				}
			}
		}
		if code, _, _ := h.do("GET", "/", ""); code != 200 {
			t.Errorf("PublicStats %v: GET / without a key: %d, want 200", public, code)
		}
	}
}

// TestAccessLog checks one info line per request, with the caller's
// namespace and token counts, for plain and streamed generation alike.
func TestAccessLog(t *testing.T) {
	var logs logBuffer
	h := newHarness(t, withLogCapture(&logs), withServer(func(c *Config) {
		c.APIKeys = map[string]string{"sk-a": "tenant-a"}
	}))
	key := []string{"Authorization", "Bearer sk-a"}
	h.generate(`{"prompt": "count me", "max_tokens": 3}`, key...)
	readStream(t, h.stream("/generate_stream", `{"prompt": "count me", "max_tokens": 3}`, key...))
	h.do("GET", "/healthz", "")
	h.do("POST", "/generate", `{"prompt": "x", "max_tokens": 0}`, key...)
	h.srv.Shutdown(t.Context())
	var lines []string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "level=INFO msg=request ") {
			lines = append(lines, l)
		}
	}
	want := []string{
		`method=POST path=/generate status=200 namespace=tenant-a prompt_tokens=9 cached_tokens=0 cache_write_tokens=8 completion_tokens=3 finish=length duration=`,
		`method=POST path=/generate_stream status=200 namespace=tenant-a prompt_tokens=9 cached_tokens=8 cache_write_tokens=0 completion_tokens=3 finish=length duration=`,
		`method=GET path=/healthz status=200 namespace="" duration=`,
		`method=POST path=/generate status=400 namespace=tenant-a duration=`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d access-log lines, want %d:\n%s", len(lines), len(want), strings.Join(lines, ""))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("access-log line %q, want %q", lines[i], w)
		}
	}
}

// TestFasthttpLoggerDrain: while the server drains it closes connections
// itself, so fasthttp's complaint about using one ("use of closed network
// connection", seen after a keep-alive answer) is no error and stays out
// of the log; the same error outside a drain, and other errors, are
// logged.
func TestFasthttpLoggerDrain(t *testing.T) {
	closedErr := &net.OpError{Op: "set", Net: "tcp", Err: net.ErrClosed}
	for _, c := range []struct {
		draining bool
		err      error
		logged   bool
	}{
		{true, closedErr, false},
		{false, closedErr, true},
		{true, errors.New("cannot parse request"), true},
	} {
		var logs logBuffer
		var d atomic.Bool
		d.Store(c.draining)
		f := fasthttpLogger{slog.New(slog.NewTextHandler(&logs, nil)), d.Load}
		f.Printf("error when serving connection %q<->%q: %v", "a", "b", c.err)
		if got := strings.Contains(logs.String(), "fasthttp:"); got != c.logged {
			t.Errorf("draining %v, %v: logged %v, want %v (%q)", c.draining, c.err, got, c.logged, logs.String())
		}
	}
}
