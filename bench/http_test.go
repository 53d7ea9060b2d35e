package bench

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/prefixd/prefixd/server"
)

var builtinModel = sync.OnceValue(model.Builtin)

const testAdmin = "admin-t0k"

// startServer runs a prefixd server on the built-in model with a small
// pool on a loopback port, and returns its base URL. The test's cleanup
// shuts it down.
func startServer(t *testing.T) string {
	t.Helper()
	m := builtinModel()
	w := cpu.NewWorkers(1)
	eng, err := engine.New(engine.Config{
		Model: model.NewRunner(m, w), Tokenizer: m.Tokenizer, EOS: m.Config.EOS,
		NumBlocks: 256, BlockSize: 16, MaxRunning: 8, MaxBatchTokens: 512, PrefillChunk: 256, MaxModelLen: 1024,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{
		Engine: eng, Tokenizer: m.Tokenizer, ModelName: m.Name, AdminToken: testAdmin,
		APIKeys: map[string]string{"key-1": "tenant-1"},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		w.Close()
	})
	return "http://" + ln.Addr().String()
}

// checkSane checks what holds for every clean run.
func checkSane(t *testing.T, r *HTTPResult) {
	t.Helper()
	if r.Sent == 0 || r.Completed != r.Sent || r.Failed != 0 || len(r.Errors) != 0 {
		t.Fatalf("%d sent, %d completed, %d failed: %v", r.Sent, r.Completed, r.Failed, r.Errors)
	}
	if r.GeneratedTokens <= 0 || r.TokensPerSec <= 0 || r.RequestsPerSec <= 0 || r.Seconds <= 0 {
		t.Errorf("figures: %+v", r)
	}
	if r.TTFTp50 <= 0 || r.TTFTp50 > r.TTFTp99 || r.ITLp50 > r.ITLp99 || r.HitRate < 0 || r.HitRate > 1 {
		t.Errorf("latencies or hit rate out of order: %+v", r)
	}
	if r.Blocks == nil || r.Blocks.Total != 256 || r.Leaked() != 0 {
		t.Errorf("block accounting after the run: %+v", r.Blocks)
	}
}

func TestHTTPWorkloads(t *testing.T) {
	url := startServer(t)
	// Tiny sizes: 8 shared-prefix requests of 4 tokens, 16 skew requests
	// of 4..32, 3 chats of 3 turns of 8, 2 beam searches of 4 tokens over
	// a shared 64-token prompt.
	cases := []struct {
		workload  string
		requests  int
		generated int
	}{
		{HTTPSharedPrefix, 8, 8 * 4},
		{HTTPSkew, 16, 4 * (4 + 16 + 8 + 32)},
		{HTTPChat, 9, 9 * 8},
		{HTTPBeam, 2, 2 * 4},
	}
	for _, c := range cases {
		t.Run(c.workload, func(t *testing.T) {
			r, err := RunHTTP(t.Context(), HTTPConfig{URL: url, APIKey: "key-1", AdminToken: testAdmin,
				Workload: c.workload, Size: Tiny, Seed: 1, Rate: 200}, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkSane(t, r)
			if r.Sent != c.requests || r.GeneratedTokens != c.generated {
				t.Errorf("%d requests generating %d tokens, want %d and %d (EOS ignored)", r.Sent, r.GeneratedTokens, c.requests, c.generated)
			}
			// The server computed exactly the prompt tokens it did not
			// find cached (no preemption in a pool this size).
			if s := r.Server; s == nil || s.PrefillTokens != uint64(r.PromptTokens-r.CachedTokens) {
				t.Errorf("server figures %+v, want %d prompt tokens computed", s, r.PromptTokens-r.CachedTokens)
			}
			// Shared prefixes, the growing conversations and the beams'
			// shared prompt hit the cache; skew's prompts are distinct.
			if (c.workload != HTTPSkew) != (r.HitRate > 0) {
				t.Errorf("hit rate %v", r.HitRate)
			}
			var b strings.Builder
			r.WriteText(&b)
			if !strings.Contains(b.String(), "hit rate") || !strings.Contains(b.String(), "0 in use after draining") {
				t.Errorf("text report:\n%s", b.String())
			}
		})
	}
}

// TestHTTPChatAPI runs the chat workload through /v1/chat/completions,
// rendered by the server's built-in ChatML template: every turn after the
// first finds the earlier turns' blocks cached.
func TestHTTPChatAPI(t *testing.T) {
	url := startServer(t)
	r, err := RunHTTP(t.Context(), HTTPConfig{URL: url, APIKey: "key-1", AdminToken: testAdmin,
		Workload: HTTPChat, Size: Tiny, Seed: 1, ChatAPI: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSane(t, r)
	// Tiny chat: 3 conversations of 3 turns.
	if !r.ChatAPI || r.Sent != 9 || len(r.Turns) != 3 {
		t.Fatalf("%d requests in %d turns (chat API %v), want 9 in 3", r.Sent, len(r.Turns), r.ChatAPI)
	}
	var prompt, cached int
	for k, tu := range r.Turns {
		if tu.Requests != 3 {
			t.Errorf("turn %d: %d requests, want 3", k+1, tu.Requests)
		}
		// A turn's prompt is the last one, its reply and a new message: it
		// reuses at least the last prompt's first two 16-token blocks
		// (the ChatML markers and 48 tokens of the first message).
		if k > 0 && tu.CachedTokens < 32*tu.Requests {
			t.Errorf("turn %d: %d of %d prompt tokens cached, want at least 32 per request", k+1, tu.CachedTokens, tu.PromptTokens)
		}
		prompt += tu.PromptTokens
		cached += tu.CachedTokens
	}
	if prompt != r.PromptTokens || cached != r.CachedTokens || r.HitRate != float64(cached)/float64(prompt) {
		t.Errorf("hit rate %v (%d of %d), want the turns' %d of %d", r.HitRate, r.CachedTokens, r.PromptTokens, cached, prompt)
	}
	// The server computed exactly the prompt tokens the usage chunks did
	// not report cached.
	if s := r.Server; s == nil || s.PrefillTokens != uint64(prompt-cached) {
		t.Errorf("server figures %+v, want %d prompt tokens computed", s, prompt-cached)
	}
	var b strings.Builder
	r.WriteText(&b)
	for _, want := range []string{"through /v1/chat/completions", "turns      1: ", " 3: "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, b.String())
		}
	}
}

func TestHTTPSoak(t *testing.T) {
	url := startServer(t)
	var progress strings.Builder
	r, err := RunHTTP(t.Context(), HTTPConfig{URL: url, APIKey: "key-1", AdminToken: testAdmin,
		Workload: HTTPSharedPrefix, Size: Tiny, Seed: 1, Rate: 20, Soak: 2 * time.Second}, &progress)
	if err != nil {
		t.Fatal(err)
	}
	checkSane(t, r)
	// 20/s for 2 s: some 40 requests, several rounds of 8.
	if r.Sent <= 8 || !strings.Contains(progress.String(), "round 2") {
		t.Errorf("%d requests sent: the soak did not repeat the workload; progress:\n%s", r.Sent, progress.String())
	}
	if r.HitRate <= 0 {
		t.Errorf("hit rate %v", r.HitRate)
	}
}

func TestHTTPRefusesNonLoopback(t *testing.T) {
	for _, u := range []string{"http://10.0.0.1:8080", "http://example.com", "http://0.0.0.0:8080", "http://[::]:1",
		"http://192.168.1.1", "http://127.0.0.1.example.com:80", "ftp://127.0.0.1/", "http://[::ffff:8.8.8.8]:80"} {
		_, err := RunHTTP(t.Context(), HTTPConfig{URL: u}, nil)
		if u == "ftp://127.0.0.1/" {
			if err == nil || !strings.Contains(err.Error(), "http://") {
				t.Errorf("%s: %v", u, err)
			}
			continue
		}
		if !errors.Is(err, ErrNotLoopback) {
			t.Errorf("%s: got %v, want ErrNotLoopback", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:8080", "http://127.3.4.5", "http://localhost:1", "http://LOCALHOST", "http://[::1]:8080"} {
		if _, err := CheckLoopback(u); err != nil {
			t.Errorf("%s refused: %v", u, err)
		}
	}
}

func TestHTTPBadSettings(t *testing.T) {
	for _, c := range []struct {
		cfg  HTTPConfig
		want string
	}{
		{HTTPConfig{Soak: 2 * MaxSoak, Rate: 1}, "longer than the limit"},
		{HTTPConfig{Soak: time.Second}, "positive arrival rate"},
		{HTTPConfig{Rate: -1}, "negative"},
		{HTTPConfig{Workload: "nope"}, "unknown HTTP workload"},
		{HTTPConfig{Workload: HTTPBeam, ChatAPI: true}, "only the chat workload"},
	} {
		c.cfg.URL = "http://127.0.0.1:1"
		if _, err := RunHTTP(t.Context(), c.cfg, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.cfg, err, c.want)
		}
	}
}

// TestHTTPErrorsAndLeak runs against a fake server that refuses one
// request in two with 429 and reports blocks still in use once idle.
func TestHTTPErrorsAndLeak(t *testing.T) {
	var mu sync.Mutex
	n := 0
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"status":"ok"}`) })
	mux.HandleFunc("POST /generate_stream", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		refuse := n%2 == 0
		mu.Unlock()
		if refuse {
			http.Error(w, `{"error":{"message":"busy","type":"rate_limit_error"}}`, 429)
			return
		}
		fmt.Fprint(w, ": stream x\n\ndata: {\"id\":7,\"text\":\"a\"}\n\ndata: {\"id\":8,\"text\":\"b\"}\n\n"+
			`data: {"text":"","finish_reason":"length","usage":{"prompt_tokens":10,"cached_tokens":4,"completion_tokens":2}}`+"\n\ndata: [DONE]\n\n")
	})
	mux.HandleFunc("GET /v1/cache", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer adm" {
			http.Error(w, "no", 401)
			return
		}
		fmt.Fprint(w, `{"blocks":{"total":64,"free":50,"in_use":3,"cached_idle":11},"running":0,"waiting":0}`)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	r, err := RunHTTP(t.Context(), HTTPConfig{URL: "http://" + ln.Addr().String(), AdminToken: "adm",
		Workload: HTTPSkew, Size: Tiny, Seed: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent != 16 || r.Completed != 8 || r.Failed != 8 || r.Errors["status 429"] != 8 {
		t.Errorf("%d sent, %d completed, %d failed: %v", r.Sent, r.Completed, r.Failed, r.Errors)
	}
	if r.GeneratedTokens != 16 || r.PromptTokens != 80 || r.HitRate != 0.4 {
		t.Errorf("tokens: %+v", r)
	}
	if r.Leaked() != 3 {
		t.Errorf("leaked %d blocks, want the 3 the server reports", r.Leaked())
	}
}
