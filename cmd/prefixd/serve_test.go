package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the logger and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listening = regexp.MustCompile(`msg=listening addr=(\S+)`)

// TestServeEndToEnd runs `prefixd serve` on a free port, generates once,
// sends the process SIGTERM and expects a drained, clean exit.
func TestServeEndToEnd(t *testing.T) {
	var stdout bytes.Buffer
	var stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- dispatch([]string{"serve", "--addr", "127.0.0.1:0", "--blocks", "64", "--block-size", "8",
			"--max-running", "2", "--max-batch-tokens", "64", "--threads", "1", "--admin-token", "t0k"}, &stdout, &stderr)
	}()
	var addr string
	deadline := time.Now().Add(60 * time.Second)
	for addr == "" {
		select {
		case c := <-code:
			t.Fatalf("serve exited with %d before listening:\n%s", c, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never logged its address:\n%s", stderr.String())
		}
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, want := range []string{"msg=model", "name=prefixd-builtin-byte-3m", "layers=4", "vocab=258", "blocks=64", "block_size=8", "bytes=2097152"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("startup log lacks %q:\n%s", want, stderr.String())
		}
	}
	resp, err := http.Post("http://"+addr+"/generate", "application/json",
		strings.NewReader(`{"prompt": "Hello", "max_tokens": 5, "ignore_eos": true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out struct {
		IDs          []int32 `json:"ids"`
		FinishReason string  `json:"finish_reason"`
	}
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != 200 || len(out.IDs) != 5 || out.FinishReason != "length" {
		t.Fatalf("/generate: %d %s (%v)", resp.StatusCode, body, err)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit status %d:\n%s", c, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not exit after SIGTERM:\n%s", stderr.String())
	}
	for _, want := range []string{"msg=draining", "msg=stopped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "level=WARN") || strings.Contains(stderr.String(), "level=ERROR") {
		t.Errorf("warnings in a clean run:\n%s", stderr.String())
	}
}

func TestServeConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prefixd.json")
	os.WriteFile(cfg, []byte(`{"blocks": 100, "max-running": 3, "batching": "static", "cached-first": true, "admin-token": "from-file", "default-ttl": "1m"}`), 0o600)
	env := map[string]string{
		"PREFIXD_CONFIG":      cfg,
		"PREFIXD_MAX_RUNNING": "4",
		"PREFIXD_ADMIN_TOKEN": "from-env",
		"PREFIXD_API_KEYS":    "k1=a, k2=b,k3=",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	o, err := parseServe([]string{"--admin-token", "from-flag", "--host-tier-bytes", "2MiB"}, lookup, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.blocks != 100 || o.batching != "static" || !o.cachedFirst || o.defaultTTL != time.Minute {
		t.Errorf("config file values not applied: %+v", o)
	}
	if o.maxRunning != 4 {
		t.Errorf("max-running %d: the environment must override the file", o.maxRunning)
	}
	if o.adminToken != "from-flag" {
		t.Errorf("admin token %q: the command line must win", o.adminToken)
	}
	if o.hostTierBytes != 2<<20 {
		t.Errorf("host tier %d bytes", o.hostTierBytes)
	}
	if len(o.keys) != 3 || o.keys["k1"] != "a" || o.keys["k2"] != "b" || o.keys["k3"] != "" {
		t.Errorf("api keys %v", o.keys)
	}
	if o.addr != "127.0.0.1:8080" || o.prefixCache != "on" || o.kvAlloc != "paged" {
		t.Errorf("defaults: %+v", o)
	}
}

func TestServeUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"blokcs": 3}`), 0o600)
	nested := filepath.Join(dir, "nested.json")
	os.WriteFile(nested, []byte(`{"blocks": [3]}`), 0o600)
	cases := []struct {
		name string
		args []string
		env  map[string]string
		code int
		msg  string
	}{
		{"unknown flag", []string{"--nope"}, nil, 2, "not defined"},
		{"stray argument", []string{"extra"}, nil, 2, "unexpected argument"},
		{"bad batching", []string{"--batching", "eager"}, nil, 2, "continuous or static"},
		{"bad kv-alloc", []string{"--kv-alloc", "x"}, nil, 2, "paged or contiguous"},
		{"bad prefix-cache", []string{"--prefix-cache", "maybe"}, nil, 2, "on or off"},
		{"negative blocks", []string{"--blocks", "-1"}, nil, 2, "must not be negative"},
		{"zero block size", []string{"--block-size", "0"}, nil, 2, "must be positive"},
		{"ttl order", []string{"--default-ttl", "2h", "--max-ttl", "1h"}, nil, 2, "--default-ttl"},
		{"bad api keys", []string{"--api-keys", "secret"}, nil, 2, "entry 1 is not key=namespace"},
		{"duplicate api key", []string{"--api-keys", "a=x,a=y"}, nil, 2, "listed twice"},
		{"bad size", []string{"--host-tier-bytes", "lots"}, nil, 2, "not a size"},
		{"blocks and kv-bytes", []string{"--blocks", "8", "--kv-bytes", "1MiB"}, nil, 2, "not both"},
		{"kv-bytes under a block", []string{"--kv-bytes", "100"}, nil, 2, "less than one block"},
		{"pool beyond memory (blocks)", []string{"--blocks", "9000000000000"}, nil, 2, "does not fit"},
		{"pool beyond memory (bytes)", []string{"--kv-bytes", "1048576GiB"}, nil, 2, "does not fit"},
		{"huge block size", []string{"--block-size", "100000000"}, nil, 2, "above 1024"},
		{"bad env value", nil, map[string]string{"PREFIXD_BLOCKS": "many"}, 2, "PREFIXD_BLOCKS"},
		{"unknown config key", []string{"--config", bad}, nil, 2, `unknown setting "blokcs"`},
		{"nested config value", []string{"--config", nested}, nil, 2, "string, number or boolean"},
		{"missing config", []string{"--config", filepath.Join(dir, "none.json")}, nil, 2, "no such file"},
		{"missing model", []string{"--model", filepath.Join(dir, "none.gguf"), "--addr", "127.0.0.1:0"}, nil, 1, "no such file"},
		{"pool too small", []string{"--blocks", "1", "--max-batch-tokens", "1", "--addr", "127.0.0.1:0"}, nil, 2, "MaxBatchTokens"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.msg == "does not fit" && physicalMemory() == 0 {
				t.Skip("this platform does not report its memory")
			}
			var stderr bytes.Buffer
			lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
			code := exitCode("serve", serve(t.Context(), func() {}, c.args, lookup, &stderr), &stderr)
			if code != c.code || !strings.Contains(stderr.String(), c.msg) {
				t.Errorf("exit %d, want %d; stderr %q lacks %q", code, c.code, stderr.String(), c.msg)
			}
		})
	}
}
