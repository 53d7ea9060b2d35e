package server

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prefixd/prefixd/trace"
)

// tracedHarness is a harness whose server writes a trace to a temporary
// file, with two tenants.
func tracedHarness(t *testing.T, tokens bool) (*harness, string, *os.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	h := newHarness(t, withServer(func(c *Config) {
		c.APIKeys = map[string]string{"key-a": "tenant-a", "key-b": "tenant-b"}
		c.Trace = trace.NewWriter(f, time.Now())
		c.TraceTokens = tokens
	}))
	return h, path, f
}

// readTrace shuts h down, so every record is out, and reads the trace.
func readTrace(t *testing.T, h *harness, path string, f *os.File) []trace.Record {
	t.Helper()
	h.client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	recs, err := trace.ReadAll(r)
	if err != nil {
		t.Fatalf("reading the trace back: %v", err)
	}
	return recs
}

func TestTraceRecordsRequests(t *testing.T) {
	h, path, f := tracedHarness(t, false)
	a, b := []string{"Authorization", "Bearer key-a"}, []string{"Authorization", "Bearer key-b"}
	prompt := make([]int32, 20) // two whole blocks of 8 and a partial one
	for i := range prompt {
		prompt[i] = int32(3 + i)
	}
	ids, _ := json.Marshal(prompt)
	body := `{"prompt_ids": ` + string(ids) + `, "max_tokens": 4, "ignore_eos": true, "cache": {"ttl": "90s"}}`

	h.generate(body, a...)
	h.generate(body, a...) // the repeated prompt
	s := h.stream("/generate_stream", body, b...)
	for {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if ev == "[DONE]" {
			break
		}
	}
	s.close()
	var c completionResponse
	h.post("/v1/completions", `{"prompt": "Hello", "max_tokens": 3, "temperature": 0}`, &c, a...) // greedy: no EOS first (random sampling may draw it)
	h.generate(`{"prompt_ids": [1, 2], "max_tokens": 1, "cache": {"enabled": false, "priority": 3}}`, b...)
	if code, _, _ := h.do("POST", "/generate", `{"prompt_ids": [1], "max_tokens": 0}`, a...); code != 400 {
		t.Fatalf("a refused request answered %d", code)
	}

	recs := readTrace(t, h, path, f)
	if len(recs) != 5 {
		t.Fatalf("%d records, want one per accepted request (5): %+v", len(recs), recs)
	}
	if r := recs[4]; !r.CacheOff || r.Priority != 3 || recs[0].CacheOff || recs[0].Priority != 0 {
		t.Errorf("cache controls not recorded: %+v, %+v", r, recs[0])
	}
	for i, r := range recs {
		if len(r.Tokens) != 0 || r.BlockSize != 8 {
			t.Errorf("record %d: by default a record holds block hashes of the server's block size, not tokens: %+v", i, r)
		}
	}
	for i, r := range recs[:3] {
		if r.PromptTokens != 20 || len(r.Blocks) != 2 || r.MaxTokens != 4 || r.OutputTokens != 4 || r.TTLms != 90_000 {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	if got := []string{recs[0].Namespace, recs[1].Namespace, recs[2].Namespace, recs[3].Namespace, recs[4].Namespace}; !slices.Equal(got, []string{"tenant-a", "tenant-a", "tenant-b", "tenant-a", "tenant-b"}) {
		t.Errorf("namespaces %q", got)
	}
	if !slices.Equal(recs[0].Blocks, recs[1].Blocks) {
		t.Errorf("the repeated prompt hashed differently: %v vs %v", recs[0].Blocks, recs[1].Blocks)
	}
	if slices.Equal(recs[0].Blocks, recs[2].Blocks) {
		t.Errorf("the same prompt in another namespace must hash differently (the namespace salts the chain)")
	}
	if want := trace.BlockHashes("tenant-a", prompt, 8); !slices.Equal(recs[0].Blocks, want) {
		t.Errorf("blocks %v, want trace.BlockHashes' %v", recs[0].Blocks, want)
	}
	// "Hello" with BOS is 6 tokens: no whole block.
	if r := recs[3]; r.PromptTokens != 6 || len(r.Blocks) != 0 || r.MaxTokens != 3 || r.OutputTokens < 1 || r.OutputTokens > 3 {
		t.Errorf("completion record %+v", r)
	}
}

// TestTraceArrivalOrder checks that a request finishing after a later one
// is still written first, with the earlier arrival time, and that a
// cancelled request is recorded with the tokens it generated.
func TestTraceArrivalOrder(t *testing.T) {
	h, path, f := tracedHarness(t, true)
	a := []string{"Authorization", "Bearer key-a"}
	long := h.stream("/generate_stream", `{"prompt_ids": [5, 6, 7], "max_tokens": 900, "ignore_eos": true}`, a...)
	if _, err := long.next(); err != nil { // the first token: it is running
		t.Fatal(err)
	}
	short := h.generate(`{"prompt_ids": [9, 10], "max_tokens": 2, "ignore_eos": true}`, a...)
	long.close() // cancels it
	h.checkDrained()

	recs := readTrace(t, h, path, f)
	if len(recs) != 2 {
		t.Fatalf("%d records: %+v", len(recs), recs)
	}
	if !slices.Equal(recs[0].Tokens, []int32{5, 6, 7}) || !slices.Equal(recs[1].Tokens, []int32{9, 10}) {
		t.Fatalf("records not in arrival order, or without tokens under TraceTokens: %+v", recs)
	}
	if recs[0].At > recs[1].At {
		t.Errorf("arrival times %d > %d", recs[0].At, recs[1].At)
	}
	if recs[1].OutputTokens != len(short.IDs) || recs[0].OutputTokens < 1 {
		t.Errorf("output tokens %d (short, generated %d) and %d (cancelled long one)", recs[1].OutputTokens, len(short.IDs), recs[0].OutputTokens)
	}
}
