package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// recorder is a listener whose connections keep a copy of what the server
// reads and writes, so a test can see what was sent by a given moment.
type recorder struct {
	net.Listener
	mu    sync.Mutex
	conns []*recConn
}

type recConn struct {
	net.Conn
	mu          sync.Mutex
	read, wrote bytes.Buffer
}

func (c *recConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.read.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

func (c *recConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.wrote.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

func (r *recorder) Accept() (net.Conn, error) {
	c, err := r.Listener.Accept()
	if err != nil {
		return nil, err
	}
	rc := &recConn{Conn: c}
	r.mu.Lock()
	r.conns = append(r.conns, rc)
	r.mu.Unlock()
	return rc, nil
}

// snapshot returns what each connection read and wrote so far.
func (r *recorder) snapshot() [][2]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][2]string, len(r.conns))
	for i, c := range r.conns {
		c.mu.Lock()
		out[i] = [2]string{c.read.String(), c.wrote.String()}
		c.mu.Unlock()
	}
	return out
}

// sent returns what the server wrote on the connection whose request
// began with prefix.
func (r *recorder) sent(t *testing.T, prefix string) string {
	t.Helper()
	for _, c := range r.snapshot() {
		if strings.HasPrefix(c[0], prefix) {
			return c[1]
		}
	}
	t.Fatalf("no connection sent %q", prefix)
	return ""
}

// startShutdown begins Shutdown(ctx) and returns a func that waits for
// its error, bounded only so that a hang fails the test.
func (h *harness) startShutdown(ctx context.Context) (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- h.srv.Shutdown(ctx) }()
	return func() error {
		h.t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			h.t.Fatal("Shutdown hangs")
			return nil
		}
	}
}

// TestDrainDeadlineAnswers cuts four generations at the drain deadline:
// by the time Shutdown returns, each has its answer on the wire, a 503
// error or a stream's final error event and [DONE].
func TestDrainDeadlineAnswers(t *testing.T) {
	rec := &recorder{}
	h := newHarness(t, option{listen: func(ln net.Listener) net.Listener { rec.Listener = ln; return rec }})
	resume := h.pause()
	long := `{"prompt": "cut short", "max_tokens": 1000, "ignore_eos": true, "temperature": 0}`
	longOpenAI := `{"prompt": "cut short", "max_tokens": 1000, "temperature": 0}`
	h.rawRequest("HTTP/1.1", "POST", "/generate", long)
	<-h.gate.entered // running, inside a forward pass
	h.rawRequest("HTTP/1.1", "POST", "/v1/completions", longOpenAI)
	h.rawRequest("HTTP/1.1", "POST", "/generate_stream", long)
	streamOpenAI := `{"prompt": "cut short, streamed", "max_tokens": 1000, "temperature": 0, "stream": true}`
	h.rawRequest("HTTP/1.1", "POST", "/v1/completions", streamOpenAI)
	// A stream's opening comment says it is queued. The non-streamed
	// completion says nothing; if it comes after the drain began, its 503
	// says the server is shutting down.
	waitFor(t, "both streams to be queued", func() bool {
		n := 0
		for _, c := range rec.snapshot() {
			if strings.Contains(c[1], ": stream ") {
				n++
			}
		}
		return n == 2
	})
	ctx, cancel := context.WithCancel(context.Background())
	wait := h.startShutdown(ctx)
	waitFor(t, "draining", h.srv.Draining)
	cancel() // the drain deadline passes
	resume()
	if err := wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown: %v, want context.Canceled", err)
	}
	for _, prefix := range []string{"POST /generate ", "POST /v1/completions "} {
		got := rec.sent(t, prefix)
		if !strings.HasPrefix(got, "HTTP/1.1 503 ") || !strings.Contains(got, `"unavailable_error"`) {
			t.Errorf("%s cut at the deadline answered %q, want a 503 error", prefix, got)
		}
	}
	got := rec.sent(t, "POST /generate_stream ")
	if !strings.Contains(got, `"finish_reason":"cancelled"`) || !strings.Contains(got, `"unavailable_error"`) || !strings.Contains(got, "data: [DONE]") {
		t.Errorf("/generate_stream cut at the deadline sent %q, want a final error event and [DONE]", got)
	}
	h.srv.conns.mu.Lock()
	open := len(h.srv.conns.m)
	h.srv.conns.mu.Unlock()
	for _, c := range rec.snapshot() {
		if r, w := c[0], c[1]; strings.Contains(r, `"stream": true`) &&
			(!strings.Contains(w, `"unavailable_error"`) || !strings.Contains(w, "data: [DONE]")) {
			t.Errorf("streamed completion cut at the deadline sent %q, want an error event and [DONE]", w)
		}
	}
	if open != 0 {
		t.Errorf("%d connections still open after Shutdown", open)
	}
}

// TestDrainNotHeldByIdleConns holds an idle keep-alive connection and one
// whose client sent half a body: with nothing in flight, Shutdown returns
// at once (not at the drain deadline, nor at the read timeout) and closes
// both.
func TestDrainNotHeldByIdleConns(t *testing.T) {
	h := newHarness(t, withServer(func(c *Config) { c.ReadTimeout, c.IdleTimeout = time.Hour, time.Hour }))
	idle := h.dialRaw("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	buf := make([]byte, 1024)
	if n, err := idle.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "200 OK") {
		t.Fatalf("healthz: %q %v", buf[:n], err)
	}
	half := h.dialRaw("POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\": ")
	waitFor(t, "both connections to be open", func() bool {
		h.srv.conns.mu.Lock()
		defer h.srv.conns.mu.Unlock()
		return len(h.srv.conns.m) == 2
	})
	if err := h.startShutdown(context.Background())(); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	for name, c := range map[string]net.Conn{"idle": idle, "half-read": half} {
		c.SetReadDeadline(time.Now().Add(10 * time.Second)) // bounds a hang only
		// A close with bytes the server never read (the half body, when
		// Shutdown wins the race with the connection's first read) is a
		// reset: that is closed too. A timeout is the failure.
		if b, err := io.ReadAll(c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s connection: %v after Shutdown (read %q), want it closed", name, err, b)
		}
	}
}

// TestServeAfterShutdown checks that Serve, called once Shutdown has run,
// returns at once and closes its listener instead of serving with a
// closed engine.
func TestServeAfterShutdown(t *testing.T) {
	h := newHarness(t)
	if err := h.srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.srv.Serve(ln) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after Shutdown: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		ln.Close()
		t.Fatal("Serve after Shutdown did not return")
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("the listener given to Serve after Shutdown still accepts connections")
	}
}
