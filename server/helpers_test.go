package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/model"
)

// builtin is the built-in model, built once: its weights take a while to
// draw.
var builtin = sync.OnceValue(model.Builtin)

// gatedModel pauses the engine on demand: while the test holds mu, every
// forward pass waits. entered receives (without blocking) when a forward
// pass begins, so a test knows the scheduler is inside one.
type gatedModel struct {
	engine.Model
	mu      sync.Mutex
	entered chan struct{}
}

func (g *gatedModel) Forward(rows []engine.Row) ([]float32, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	g.mu.Lock()
	g.mu.Unlock()
	return g.Model.Forward(rows)
}

// pause holds every forward pass until resume is called. A test that
// fails while paused resumes as it ends, before the harness's Shutdown,
// which would wait for the engine.
func (h *harness) pause() (resume func()) {
	h.gate.mu.Lock()
	resume = sync.OnceFunc(h.gate.mu.Unlock)
	h.t.Cleanup(resume)
	return resume
}

// harness is a Server over a real engine on the built-in model, listening
// on a loopback port.
type harness struct {
	t    *testing.T
	srv  *Server
	eng  *engine.Engine
	gate *gatedModel
	url  string
	addr string
	// served reports Serve's return.
	served chan error
	client *http.Client
}

type option struct {
	engine func(*engine.Config)
	server func(*Config)
	model  *model.Model
	listen func(net.Listener) net.Listener // wraps the listener
}

func withEngine(f func(*engine.Config)) option { return option{engine: f} }
func withServer(f func(*Config)) option        { return option{server: f} }
func withModel(m *model.Model) option          { return option{model: m} }

// testLogger sends the server's logs to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func newHarness(t *testing.T, opts ...option) *harness {
	t.Helper()
	m := builtin()
	for _, o := range opts {
		if o.model != nil {
			m = o.model
		}
	}
	w := cpu.NewWorkers(2)
	gate := &gatedModel{Model: model.NewRunner(m, w), entered: make(chan struct{}, 1)}
	metrics := NewMetrics()
	ecfg := engine.Config{
		Model:          gate,
		Tokenizer:      m.Tokenizer,
		EOS:            m.Config.EOS,
		NumBlocks:      192,
		BlockSize:      8,
		MaxRunning:     4,
		MaxBatchTokens: 128,
		PrefillChunk:   64,
		MaxModelLen:    1024,
		Observer:       metrics,
		Samples:        metrics.Samples(),
	}
	for _, o := range opts {
		if o.engine != nil {
			o.engine(&ecfg)
		}
	}
	eng, err := engine.New(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Engine:     eng,
		Tokenizer:  m.Tokenizer,
		ModelName:  m.Name,
		AdminToken: "admin-secret",
		Metrics:    metrics,
		KeepAlive:  50 * time.Millisecond,
		Logger:     slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, o := range opts {
		if o.server != nil {
			o.server(&cfg)
		}
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		if o.listen != nil {
			ln = o.listen(ln)
		}
	}
	h := &harness{
		t: t, srv: srv, eng: eng, gate: gate,
		addr:   ln.Addr().String(),
		url:    "http://" + ln.Addr().String(),
		served: make(chan error, 1),
		client: &http.Client{Transport: &http.Transport{}},
	}
	go func() { h.served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		h.client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if !srv.Draining() {
			if err := srv.Shutdown(ctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		}
		w.Close()
	})
	return h
}

// do sends a request and returns the status, body and header.
func (h *harness) do(method, path, body string, header ...string) (int, []byte, http.Header) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp.StatusCode, b, resp.Header
}

// post sends a JSON body and decodes a 200 response into out.
func (h *harness) post(path, body string, out any, header ...string) {
	h.t.Helper()
	code, b, _ := h.do("POST", path, body, header...)
	if code != 200 {
		h.t.Fatalf("POST %s %s: %d %s", path, body, code, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		h.t.Fatalf("POST %s: decoding %s: %v", path, b, err)
	}
}

// generate runs /generate.
func (h *harness) generate(body string, header ...string) generateResponse {
	h.t.Helper()
	var r generateResponse
	h.post("/generate", body, &r, header...)
	return r
}

// sse is an open event stream.
type sse struct {
	resp *http.Response
	r    *bufio.Reader
}

// stream opens a streaming request; it fails the test unless the status
// is 200.
func (h *harness) stream(path, body string, header ...string) *sse {
	h.t.Helper()
	req, err := http.NewRequest("POST", h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	// A connection of its own, so closing it is a disconnect.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		h.t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		h.t.Fatalf("POST %s: Content-Type %q", path, ct)
	}
	return &sse{resp: resp, r: bufio.NewReader(resp.Body)}
}

// next returns the data of the next event, skipping comments; io.EOF at
// the end of the stream.
func (s *sse) next() (string, error) {
	var data []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" && len(data) == 0 {
				return "", io.EOF
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if len(data) > 0 {
				return strings.Join(data, "\n"), nil
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		default:
			return "", &json.UnsupportedValueError{Str: "unexpected SSE line " + line}
		}
	}
}

func (s *sse) close() { s.resp.Body.Close() }

// waitFor polls cond until it holds, failing the test after a generous
// deadline: the deadline only bounds a hang, it asserts no timing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkDrained waits until the engine is idle, then checks its invariants
// and that no block is held by a sequence.
func (h *harness) checkDrained() {
	h.t.Helper()
	waitFor(h.t, "the engine to go idle", func() bool {
		st := h.eng.Stats()
		return st.Running == 0 && st.Waiting == 0
	})
	if err := h.eng.Check(); err != nil {
		h.t.Fatalf("engine invariants: %v", err)
	}
	if st := h.eng.Stats(); st.Blocks.InUse != 0 {
		h.t.Fatalf("%d blocks still in use after every request ended", st.Blocks.InUse)
	}
}
