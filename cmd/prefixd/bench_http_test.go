package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prefixd/prefixd/trace"
)

// startServe runs `prefixd serve` with args (plus a free loopback port)
// until the test ends or the returned stop is called, and returns its base
// URL. stop waits for the drain and returns the exit status.
func startServe(t *testing.T, args ...string) (string, func() int) {
	t.Helper()
	url, stop, _ := startServeLog(t, nil, args...)
	return url, stop
}

// startServeLog is startServe with the environment env, and it returns the
// log too.
func startServeLog(t *testing.T, env map[string]string, args ...string) (string, func() int, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- exitCode("serve", serve(ctx, func() {}, append([]string{"--addr", "127.0.0.1:0"}, args...), env, io.Discard, stderr), stderr)
	}()
	stopped := -1
	stop := func() int {
		if stopped < 0 {
			cancel()
			select {
			case stopped = <-code:
			case <-time.After(60 * time.Second):
				t.Fatalf("serve did not stop:\n%s", stderr.String())
			}
		}
		return stopped
	}
	t.Cleanup(func() { stop() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case c := <-code:
			t.Fatalf("serve exited with %d before listening:\n%s", c, stderr.String())
		default:
		}
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			return "http://" + m[1], stop, stderr
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never logged its address:\n%s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestServeTraceBenchHTTPTTLSim drives a real `prefixd serve --trace-out`
// with `prefixd bench --http`, then replays the trace it wrote with
// `prefixd ttl-sim`.
func TestServeTraceBenchHTTPTTLSim(t *testing.T) {
	dir := t.TempDir()
	tracePath := filepath.Join(dir, "trace.jsonl")
	url, stop := startServe(t, "--blocks", "256", "--block-size", "16", "--max-running", "4", "--threads", "1",
		"--admin-token", "adm", "--api-keys", "k1=tenant-1", "--trace-out", tracePath)

	code, stdout, stderr := runArgs("bench", "--http", url, "--api-key", "k1", "--admin-token", "adm",
		"--workload", "shared-prefix", "--tiny", "--rate", "200", "--out", dir)
	if code != 0 {
		t.Fatalf("bench --http: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"8 sent, 8 completed, 0 failed", "tok/s", "TTFT", "ITL", "hit rate", "0 in use after draining"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("bench --http output lacks %q:\n%s", want, stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "http-report.json")); err != nil {
		t.Error(err)
	}
	if c := stop(); c != 0 {
		t.Fatalf("serve exited %d", c)
	}

	f, err := os.Open(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := trace.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 8 {
		t.Fatalf("%d trace records, want the 8 requests", len(recs))
	}
	for _, r := range recs {
		// Tiny shared-prefix: 144 + 16 prompt tokens, 4 generated.
		if r.Namespace != "tenant-1" || r.PromptTokens != 160 || len(r.Blocks) != 10 || r.BlockSize != 16 || r.OutputTokens != 4 || len(r.Tokens) != 0 {
			t.Errorf("record %+v", r)
		}
	}
	code, stdout, stderr = runArgs("ttl-sim", "--trace", tracePath, "--block-size", "16", "--ttls", "1s,1m", "--pool-blocks", "64,256", "--out", dir)
	if code != 0 || strings.Count(stdout, "smallest TTL") != 2 {
		t.Fatalf("ttl-sim on the served trace: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestServeBenchHTTPChatAPI drives a real `prefixd serve` of the built-in
// model (built-in ChatML template) with `prefixd bench --http --workload
// chat --chat-api`: turns after the first hit the prefix cache, and the
// reported hit rate is their cached over prompt tokens.
func TestServeBenchHTTPChatAPI(t *testing.T) {
	dir := t.TempDir()
	url, _ := startServe(t, "--blocks", "256", "--block-size", "16", "--max-running", "4", "--threads", "1", "--admin-token", "adm")
	code, stdout, stderr := runArgs("bench", "--http", url, "--admin-token", "adm", "--workload", "chat", "--chat-api", "--tiny", "--out", dir)
	if code != 0 {
		t.Fatalf("bench --http --chat-api: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"through /v1/chat/completions", "9 sent, 9 completed, 0 failed", "turns      1: ", "0 in use after draining"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "http-report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		PromptTokens int     `json:"prompt_tokens"`
		CachedTokens int     `json:"cached_tokens"`
		HitRate      float64 `json:"hit_rate"`
		Turns        []struct {
			Requests     int `json:"requests"`
			PromptTokens int `json:"prompt_tokens"`
			CachedTokens int `json:"cached_tokens"`
		} `json:"turns"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Turns) != 3 {
		t.Fatalf("%d turns in the report, want 3:\n%s", len(rep.Turns), b)
	}
	var prompt, cached int
	for k, tu := range rep.Turns {
		if k > 0 && (tu.Requests != 3 || tu.CachedTokens <= 0) {
			t.Errorf("turn %d: %d requests, %d of %d prompt tokens cached", k+1, tu.Requests, tu.CachedTokens, tu.PromptTokens)
		}
		prompt += tu.PromptTokens
		cached += tu.CachedTokens
	}
	if prompt == 0 || rep.PromptTokens != prompt || rep.CachedTokens != cached || rep.HitRate != float64(cached)/float64(prompt) {
		t.Errorf("hit rate %v (%d of %d), want the turns' %d of %d", rep.HitRate, rep.CachedTokens, rep.PromptTokens, cached, prompt)
	}
}

func TestBenchHTTPUsage(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"--http", "http://10.1.2.3:8080"}, "only loopback targets"},
		{[]string{"--http", "http://example.com"}, "only loopback targets"},
		{[]string{"--http", "http://127.0.0.1:1", "--soak", "1s"}, "--soak needs --rate"},
		{[]string{"--http", "http://127.0.0.1:1", "--soak", "1s", "--rate", "5"}, "--soak needs --admin-token"},
		{[]string{"--http", "http://127.0.0.1:1", "--soak", "2h", "--rate", "5", "--admin-token", "a"}, "--soak 2h0m0s must be in"},
		{[]string{"--http", "http://127.0.0.1:1", "--workload", "nope"}, "--workload"},
		{[]string{"--http", "http://127.0.0.1:1", "--model", "null"}, "does not apply to --http"},
		{[]string{"--soak", "1s"}, "--soak needs --http"},
		{[]string{"--http", "http://127.0.0.1:1", "--chat-api"}, "--chat-api needs --workload chat"},
		{[]string{"--chat-api"}, "--chat-api needs --http"},
	}
	for _, c := range cases {
		code, _, stderr := runArgs(append([]string{"bench"}, c.args...)...)
		if code != 2 || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.msg)
		}
	}
}

// TestBenchHTTPLeak: a server that still holds blocks once idle fails the
// run with "leak: N blocks in use".
func TestBenchHTTPLeak(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"status":"ok"}`) })
	mux.HandleFunc("POST /generate_stream", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "data: {\"id\":7,\"text\":\"a\"}\n\n"+
			`data: {"text":"","finish_reason":"length","usage":{"prompt_tokens":10,"cached_tokens":0,"completion_tokens":1}}`+"\n\ndata: [DONE]\n\n")
	})
	mux.HandleFunc("GET /v1/cache", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"blocks":{"total":64,"free":59,"in_use":5,"cached_idle":0},"running":0,"waiting":0}`)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux}
	go hs.Serve(ln)
	defer hs.Close()
	code, stdout, stderr := runArgs("bench", "--http", "http://"+ln.Addr().String(), "--admin-token", "a",
		"--workload", "skew", "--tiny", "--rate", "500", "--soak", "100ms", "--out", t.TempDir())
	if code != 1 || !strings.Contains(stdout, "leak: 5 blocks in use") {
		t.Fatalf("exit %d, want 1 and a leak line:\n%s\n%s", code, stdout, stderr)
	}
}
