package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	"github.com/prefixd/prefixd/model"
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
	// serve warns of PREFIXD_* variables that name no flag, and CI sets
	// PREFIXD_REQUIRE_CHROMIUM for another package's tests: this run, which
	// must log no warning, gets an environment without them.
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix) {
			t.Setenv(k, v) // restored when the test ends
			os.Unsetenv(k)
		}
	}
	var stdout bytes.Buffer
	var stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- dispatch([]string{"serve", "--addr", "127.0.0.1:0", "--blocks", "64", "--block-size", "8",
			"--max-model-len", "512", "--max-running", "2", "--max-batch-tokens", "64", "--threads", "1", "--admin-token", "t0k"}, &stdout, &stderr)
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
	for _, want := range []string{"msg=model", "name=prefixd-builtin-byte-3m", "layers=4", "vocab=258", "blocks=64", "block_size=8", "bytes=1048576", "kv_type=f16", "sized_by=--blocks"} {
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

	sigterm(t, code, &stderr)
	for _, want := range []string{"msg=draining", "msg=stopped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "level=WARN") || strings.Contains(stderr.String(), "level=ERROR") {
		t.Errorf("warnings in a clean run:\n%s", stderr.String())
	}
}

// sigterm sends the test process SIGTERM, which a serve running in it
// catches, and expects that serve to exit 0 (its status comes on code)
// within a hang guard.
func sigterm(t *testing.T, code <-chan int, stderr *syncBuffer) {
	t.Helper()
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
}

func TestServeConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prefixd.json")
	os.WriteFile(cfg, []byte(`{"blocks": 100, "max-running": 3, "batching": "static", "cached-first": true, "admin-token": "from-file", "default-ttl": "1m"}`), 0o600)
	env := map[string]string{
		"PREFIXD_CONFIG":      cfg,
		"PREFIXD_MAX_RUNNING": "4",
		"PREFIXD_ADMIN_TOKEN": "from-env",
		"PREFIXD_API_KEYS":    "k1=a, k2 = b",
	}
	o, err := parseServe([]string{"--admin-token", "from-flag", "--host-tier-bytes", "2MiB"}, env, io.Discard)
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
	if len(o.keys) != 2 || o.keys["k1"] != "a" || o.keys["k2"] != "b" {
		t.Errorf("api keys %v", o.keys)
	}
	if o.addr != "127.0.0.1:8080" || o.prefixCache != "on" || o.kvAlloc != "paged" {
		t.Errorf("defaults: %+v", o)
	}
}

// serveRefused runs `prefixd serve` with args and env, for a
// configuration it should refuse, and returns the exit status and stderr.
// The context is cancelled as the log says the server listens: a
// configuration wrongly accepted serves, drains at once and exits 0, so
// the test fails instead of hanging. (Cancelled earlier, serve would stop
// during the model load, before the checks that follow it.)
func serveRefused(t *testing.T, args []string, env map[string]string) (int, string) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stderr := &cancelOnLog{marker: "msg=listening", cancel: cancel}
	code := exitCode("serve", serve(ctx, func() {}, args, env, io.Discard, stderr), stderr)
	return code, stderr.String()
}

// cancelOnLog is a log writer that calls cancel once a write holds
// marker: a signal that comes at a chosen point of serve's start-up.
type cancelOnLog struct {
	syncBuffer
	marker string
	cancel func()
}

func (c *cancelOnLog) Write(p []byte) (int, error) {
	n, err := c.syncBuffer.Write(p)
	if bytes.Contains(p, []byte(c.marker)) {
		c.cancel()
	}
	return n, err
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
		{"stray argument", []string{"model.gguf", "extra"}, nil, 2, "unexpected argument"},
		{"bad batching", []string{"--batching", "eager"}, nil, 2, "continuous or static"},
		{"bad kv-alloc", []string{"--kv-alloc", "x"}, nil, 2, "paged or contiguous"},
		{"bad prefix-cache", []string{"--prefix-cache", "maybe"}, nil, 2, "on or off"},
		{"bad speculative", []string{"--speculative", "eagle"}, nil, 2, "want off or ngram or suffix"},
		{"too many speculative tokens", []string{"--num-speculative-tokens", "17"}, nil, 2, "must be in [1, 16]"},
		{"zero speculative rows", []string{"--speculative-max-rows", "0"}, nil, 2, "must be positive"},
		{"negative blocks", []string{"--blocks", "-1"}, nil, 2, "must not be negative"},
		{"zero block size", []string{"--block-size", "0"}, nil, 2, "must be positive"},
		{"ttl order", []string{"--default-ttl", "2h", "--max-ttl", "1h"}, nil, 2, "--default-ttl"},
		{"bad api keys", []string{"--api-keys", "secret"}, nil, 2, "entry 1 is not key=namespace"},
		{"duplicate api key", []string{"--api-keys", "a=x,a=y"}, nil, 2, "listed twice"},
		// A key mapped to "" would put a tenant in the namespace of a
		// server without keys.
		{"empty namespace", []string{"--api-keys", "a=x,k="}, nil, 2, "entry 2 has an empty namespace"},
		{"blank namespace", []string{"--api-keys", "k=  "}, nil, 2, "entry 1 has an empty namespace"},
		{"threads beyond bound", []string{"--threads", "100000"}, nil, 2, "--threads 100000: want 0"},
		{"negative threads", []string{"--threads", "-1"}, nil, 2, "must not be negative"},
		{"bad flag value", []string{"--threads", "many"}, nil, 2, `invalid value "many" for flag -threads: want an integer`},
		{"bad duration", []string{"--drain-timeout", "soon"}, nil, 2, "-drain-timeout: want a duration"},
		{"bad bool", []string{"--cached-first=maybe"}, nil, 2, "-cached-first: want true or false"},
		{"bad env duration", nil, map[string]string{"PREFIXD_MAX_TTL": "forever"}, 2, `PREFIXD_MAX_TTL: max-ttl="forever": want a duration`},
		{"bad size", []string{"--host-tier-bytes", "lots"}, nil, 2, "not a size"},
		{"blocks and kv-bytes", []string{"--blocks", "8", "--kv-bytes", "1MiB"}, nil, 2, "not both"},
		{"kv-bytes under a block", []string{"--kv-bytes", "100"}, nil, 2, "a KV pool of 0 blocks (--kv-bytes, 0 bytes) cannot hold one sequence"},
		{"pool beyond memory (blocks)", []string{"--blocks", "9000000000000"}, nil, 2, "does not fit"},
		{"pool beyond memory (bytes)", []string{"--kv-bytes", "1048576GiB"}, nil, 2, "does not fit"},
		{"huge block size", []string{"--block-size", "100000000"}, nil, 2, "above 1024"},
		{"bad env value", nil, map[string]string{"PREFIXD_BLOCKS": "many"}, 2, "PREFIXD_BLOCKS"},
		{"unknown config key", []string{"--config", bad}, nil, 2, `unknown setting "blokcs"`},
		{"nested config value", []string{"--config", nested}, nil, 2, "string, number or boolean"},
		{"missing config", []string{"--config", filepath.Join(dir, "none.json")}, nil, 2, "no such file"},
		{"missing model", []string{"--model", filepath.Join(dir, "none.gguf"), "--addr", "127.0.0.1:0"}, nil, 1, "no such file"},
		{"pool too small", []string{"--blocks", "1", "--addr", "127.0.0.1:0"}, nil, 2, "a KV pool of 1 blocks (--blocks, 32768 bytes) cannot hold one sequence of " +
			"the model's 4096-token context: that needs 256 blocks of 16 tokens (8388608 bytes); give a larger --blocks or --kv-bytes, or a smaller --max-model-len"},
		{"pool too small for --max-model-len", []string{"--kv-bytes", "1MiB", "--max-model-len", "1000", "--addr", "127.0.0.1:0"}, nil, 2,
			"a KV pool of 32 blocks (--kv-bytes, 1048576 bytes) cannot hold one sequence of --max-model-len 1000 tokens: that needs 63 blocks"},
		{"engine refusal", []string{"--blocks", "1", "--max-model-len", "16", "--max-batch-tokens", "1", "--addr", "127.0.0.1:0"}, nil, 2, "MaxBatchTokens"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.msg == "does not fit" && physicalMemory() == 0 {
				t.Skip("this platform does not report its memory")
			}
			code, stderr := serveRefused(t, c.args, c.env)
			if code != c.code || !strings.Contains(stderr, c.msg) {
				t.Errorf("exit %d, want %d; stderr %q lacks %q", code, c.code, stderr, c.msg)
			}
			var said []string // what is not the start-up log
			for _, line := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
				if !strings.HasPrefix(line, "time=") {
					said = append(said, line)
				}
			}
			if len(said) != 1 {
				t.Errorf("%d lines on stderr, want the one line that says why:\n%s", len(said), stderr)
			}
		})
	}
}

// getJSON GETs url and decodes its JSON body into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d (%v)", url, resp.StatusCode, err)
	}
}

// modelIDs returns the ids /v1/models lists.
func modelIDs(t *testing.T, base string) []string {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	getJSON(t, base+"/v1/models", &list)
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids
}

// TestServeModelFileLog: a model file is served under its base name (the
// llama2.c format's own name, "llama2.c checkpoint", has a space), and the
// start-up log says what was loaded, from where, and how long it took.
func TestServeModelFileLog(t *testing.T) {
	path := sharedModel(t, "stories260K.bin")
	base, stop, log := startServeLog(t, nil, "--model", path, "--blocks", "64", "--threads", "1")
	if ids := modelIDs(t, base); len(ids) != 1 || ids[0] != "stories260K" {
		t.Errorf("/v1/models ids %q, want [stories260K]", ids)
	}
	if c := stop(); c != 0 {
		t.Fatalf("exit %d", c)
	}
	for _, want := range []string{`msg="loading model" path=` + path + " format=llama2.c bytes=1056540",
		"msg=model id=stories260K", "parameters=260032", "vocab=512", "took="} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("start-up log lacks %q:\n%s", want, log.String())
		}
	}
}

// TestServeServedModelName: --served-model-name is the id /v1/models and
// completions report and the one requests may name; an unknown PREFIXD_*
// variable is named in a warning, its value never logged (PREFIXD_CPU,
// which the kernels read, is no unknown one).
func TestServeServedModelName(t *testing.T) {
	env := map[string]string{"PREFIXD_BLOKS": "s3cret-value", "PREFIXD_BLOCKS": "64", "PREFIXD_CPU": "avx2", "PREFIXD_MAX_MODEL_LEN": "1024", "OTHER_VAR": "x"}
	base, stop, log := startServeLog(t, env, "--served-model-name", "byte-lm", "--threads", "1")
	if ids := modelIDs(t, base); len(ids) != 1 || ids[0] != "byte-lm" {
		t.Errorf("/v1/models ids %q, want [byte-lm]", ids)
	}
	resp, err := http.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"model": "byte-lm", "prompt": "Hi", "max_tokens": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Model string `json:"model"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || out.Model != "byte-lm" {
		t.Errorf("/v1/completions: %d, model %q (%v)", resp.StatusCode, out.Model, err)
	}
	if c := stop(); c != 0 {
		t.Fatalf("exit %d", c)
	}
	s := log.String()
	if !strings.Contains(s, "level=WARN") || !strings.Contains(s, "name=PREFIXD_BLOKS") || strings.Contains(s, "s3cret") ||
		strings.Contains(s, "OTHER_VAR") || strings.Count(s, "level=WARN") != 1 || !strings.Contains(s, "blocks=64") {
		t.Errorf("want one warning naming PREFIXD_BLOKS without its value, PREFIXD_BLOCKS applied:\n%s", s)
	}
}

// TestServeTokenizerTooLarge: a tokenizer.bin of more tokens than the
// model has logits is another model's vocabulary and is refused, by serve
// and generate alike; one of as many tokens loads.
func TestServeTokenizerTooLarge(t *testing.T) {
	stories, tok := sharedModel(t, "stories260K.bin"), sharedModel(t, "llama2-tokenizer.bin")
	msg := "holds more tokens than the model's 512"
	code, stderr := serveRefused(t, []string{"--model", stories, "--tokenizer", tok, "--addr", "127.0.0.1:0"}, nil)
	if code != 2 || !strings.Contains(stderr, msg) {
		t.Errorf("serve: exit %d, stderr %q; want 2 and %q", code, stderr, msg)
	}
	code, stdout, errOut := runArgs("generate", "--model", stories, "--tokenizer", tok, "--prompt", "Once")
	if code != 2 || stdout != "" || !strings.Contains(errOut, msg) {
		t.Errorf("generate: exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, errOut, msg)
	}
}

// apiKeysError is every message parseAPIKeys may return: none quotes the
// input, which holds secrets.
var apiKeysError = regexp.MustCompile(`^(entry \d+ (is not key=namespace|has an empty namespace: give each key a tenant name)|a key is listed twice)$`)

// FuzzParseAPIKeys: whatever --api-keys holds, parseAPIKeys returns keys
// and namespaces that are trimmed and not empty, one per entry, or an
// error that does not echo the input.
func FuzzParseAPIKeys(f *testing.F) {
	for _, s := range []string{"", "k1=a, k2 = b", "k=", "k=  ", "secret", "a=x,a=y", "=ns", "a=b=c", ",", " a=x ,b=y,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := parseAPIKeys(s)
		if err != nil {
			if !apiKeysError.MatchString(err.Error()) {
				t.Fatalf("parseAPIKeys(%q) error %q is not one of the fixed messages", s, err)
			}
			return
		}
		if strings.TrimSpace(s) != "" && len(keys) != strings.Count(s, ",")+1 {
			t.Fatalf("parseAPIKeys(%q) = %d keys for %d entries", s, len(keys), strings.Count(s, ",")+1)
		}
		for k, ns := range keys {
			if k == "" || ns == "" || k != strings.TrimSpace(k) || ns != strings.TrimSpace(ns) {
				t.Fatalf("parseAPIKeys(%q) mapped %q to %q", s, k, ns)
			}
		}
	})
}

// TestServeStopAtStartUp: a signal that comes as serve starts (here: as
// it opens its listener, before Serve runs) drains and exits 0. The
// listener used to be left to a Serve that had not registered it when
// Shutdown ran, which then accepted forever.
func TestServeStopAtStartUp(t *testing.T) {
	for range 5 {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		stderr := &cancelOnLog{marker: `msg="kv pool"`, cancel: cancel}
		go func() {
			done <- serve(ctx, func() {}, []string{"--addr", "127.0.0.1:0", "--blocks", "64", "--max-model-len", "1024", "--threads", "1"}, nil, io.Discard, stderr)
		}()
		select {
		case err := <-done:
			if err != nil || !strings.Contains(stderr.String(), "msg=stopped") {
				t.Fatalf("serve: %v\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("serve did not stop after a signal at start-up:\n%s", stderr.String())
		}
	}
}

// TestServePublicStats: with --api-keys the aggregate figures need a key
// unless --public-stats opens them; generation needs a key either way.
func TestServePublicStats(t *testing.T) {
	for _, public := range []bool{false, true} {
		args := []string{"--api-keys", "k1=tenant-a", "--blocks", "64", "--max-model-len", "1024", "--threads", "1"}
		if public {
			args = append(args, "--public-stats")
		}
		base, stop, _ := startServeLog(t, nil, args...)
		want := http.StatusUnauthorized
		if public {
			want = http.StatusOK
		}
		for _, path := range []string{"/metrics", "/v1/stats"} {
			resp, err := http.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("--public-stats=%v: GET %s without a key: %d, want %d", public, path, resp.StatusCode, want)
			}
		}
		resp, err := http.Post(base+"/generate", "application/json", strings.NewReader(`{"prompt_ids": [1, 2], "max_tokens": 1}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("--public-stats=%v: /generate without a key: %d, want 401", public, resp.StatusCode)
		}
		if c := stop(); c != 0 {
			t.Fatalf("exit %d", c)
		}
	}
}

// TestServeOneBlock: a one-block pool starts when --max-model-len fits the
// context in that block (without it, TestServeUsageErrors' "pool too
// small" refuses it), serves what fits and refuses, with a 400 naming the
// limit, what is longer than the context.
func TestServeOneBlock(t *testing.T) {
	base, stop, log := startServeLog(t, nil, "--blocks", "1", "--max-model-len", "16", "--threads", "1")
	for _, c := range []struct {
		body string
		want int
		msg  string
	}{
		{`{"prompt_ids": [1, 2], "max_tokens": 2}`, http.StatusOK, ""},
		{`{"prompt_ids": [1,2,3,4,5,6,7,8,9,10,11,12,13,14], "max_tokens": 2}`, http.StatusOK, ""},
		{`{"prompt_ids": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20], "max_tokens": 2}`, http.StatusBadRequest, "prompt is 20 tokens, the limit is 15"},
	} {
		resp, err := http.Post(base+"/generate", "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || !strings.Contains(string(b), c.msg) {
			t.Errorf("%s: %d %s; want %d with %q", c.body, resp.StatusCode, b, c.want, c.msg)
		}
	}
	if c := stop(); c != 0 {
		t.Fatalf("exit %d", c)
	}
	if want := "blocks=1 block_size=16 bytes=32768 kv_type=f16 max_model_len=16"; !strings.Contains(log.String(), want) {
		t.Errorf("start-up log lacks %q:\n%s", want, log.String())
	}
}

// TestServeDefaultPool: with neither --blocks nor --kv-bytes, serve sizes
// the pool from this machine's free memory, less the GGUF file when it
// stays mapped (--mmap): a copy is already counted as used by then. Its
// start-up log says by which rule and from which figures.
func TestServeDefaultPool(t *testing.T) {
	path := sharedModel(t, "llama-2-tiny-random.gguf")
	for _, c := range []struct {
		flag, mapped string
	}{{"--mmap=false", "weights_mapped=0 "}, {"--mmap", "weights_mapped=1750560 "}} {
		_, stop, log := startServeLog(t, nil, "--model", path, "--threads", "1", c.flag)
		if code := stop(); code != 0 {
			t.Fatalf("%s: exit %d", c.flag, code)
		}
		want := []string{"free memory unknown"}
		if _, err := availableMemory(os.ReadFile); err == nil {
			want = []string{"memory_source=", c.mapped, "share=0.333"}
		}
		for _, w := range append(want, `msg="kv pool" blocks=`, "kv_type=f16", "sized_by=") {
			if !strings.Contains(log.String(), w) {
				t.Errorf("%s: start-up log lacks %q:\n%s", c.flag, w, log.String())
			}
		}
	}
}

// TestServeMapsWhatCannotBeCopied: a model file larger than the memory
// free is not copied (the copy would get the process killed) but stays
// mapped, as with --mmap, and the log says so.
func TestServeMapsWhatCannotBeCopied(t *testing.T) {
	path := sharedModel(t, "llama-2-tiny-random.gguf")
	saved := loadFreeMemory
	defer func() { loadFreeMemory = saved }()
	loadFreeMemory = func() (freeMemory, error) { return freeMemory{bytes: 1 << 20, source: "test"}, nil }
	_, stop, log := startServeLog(t, nil, "--model", path, "--threads", "1", "--blocks", "256")
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{"larger than the memory free", "weights=mapped"} {
		if !strings.Contains(log.String(), w) {
			t.Errorf("start-up log lacks %q:\n%s", w, log.String())
		}
	}
}

func TestWeightsMapped(t *testing.T) {
	free := func(n int64, err error) func() (freeMemory, error) {
		return func() (freeMemory, error) { return freeMemory{bytes: n}, err }
	}
	for _, c := range []struct {
		size             int64
		asked            bool
		free             func() (freeMemory, error)
		mapped, tooLarge bool
	}{
		{100, false, free(1000, nil), false, false},
		{100, true, free(1000, nil), true, false},
		{1000, false, free(1000, nil), false, false},
		{1001, false, free(1000, nil), true, true},
		{1001, true, free(1000, nil), true, false},
		{1 << 40, false, free(0, errors.New("no /proc/meminfo")), false, false},
	} {
		mapped, tooLarge := weightsMapped(c.size, c.asked, c.free)
		if mapped != c.mapped || tooLarge != c.tooLarge {
			t.Errorf("size %d, asked %v: mapped %v, too large %v; want %v, %v", c.size, c.asked, mapped, tooLarge, c.mapped, c.tooLarge)
		}
	}
}

// TestServeSecretsNotQuoted: a secret flag (--admin-token, --api-keys)
// given a value of the wrong JSON type in the config file is refused
// without quoting the value, which is likely the secret itself.
func TestServeSecretsNotQuoted(t *testing.T) {
	dir := t.TempDir()
	for i, cfg := range []string{
		`{"admin-token": ["ADMINSECRET7"]}`,
		`{"api-keys": {"ADMINSECRET7": "tenant"}}`,
		`{"api-keys": ["ADMINSECRET7=tenant"]}`,
	} {
		path := filepath.Join(dir, fmt.Sprintf("c%d.json", i))
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stderr := serveRefused(t, []string{"--config", path}, nil)
		if code != 2 || !strings.Contains(stderr, "must be a string") || strings.Contains(stderr, "ADMINSECRET7") {
			t.Errorf("%s: exit %d, stderr %q: want a refusal that does not quote the secret", cfg, code, stderr)
		}
	}
	// A non-secret setting's bad value is still quoted, which helps.
	path := filepath.Join(dir, "blocks.json")
	os.WriteFile(path, []byte(`{"blocks": ["x7"]}`), 0o600)
	if _, stderr := serveRefused(t, []string{"--config", path}, nil); !strings.Contains(stderr, `["x7"]`) {
		t.Errorf("stderr %q does not quote the non-secret value", stderr)
	}
}

// TestServeSignalDuringLoad: SIGTERM while the model loads stops serve at
// once, with a log line and status 0, instead of being held until the
// load ends and then serving and draining. The load here never ends by
// itself: it waits until the test is over.
func TestServeSignalDuringLoad(t *testing.T) {
	loading, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	saved := loadModelFile
	loadModelFile = func(string, string, bool) (*model.Model, error) {
		close(loading)
		<-release
		return nil, errors.New("load abandoned by the test")
	}
	defer func() { loadModelFile = saved }()
	var stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- runServe([]string{"--addr", "127.0.0.1:0", "--blocks", "64", "--max-model-len", "1024", "--threads", "1"}, io.Discard, &stderr)
	}()
	<-loading
	// runServe's handler is installed before the load: the signal goes
	// to it, not to the test process's default action.
	sigterm(t, code, &stderr)
	if log := stderr.String(); !strings.Contains(log, `msg=stopped during="model load"`) || strings.Contains(log, "msg=listening") {
		t.Errorf("log:\n%s", log)
	}
}

// TestServeHostileFiles: the files serve reads beside the model (--config,
// --chat-template, --tokenizer) and the model file itself are refused
// when they are devices or pipes (a link to /dev/zero used to be read
// until memory ran out) or larger than their bound, each error naming the
// file.
func TestServeHostileFiles(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	dir := t.TempDir()
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Skip(err)
	}
	pipe := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Skip(err)
	}
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, append([]byte("{}"), bytes.Repeat([]byte(" "), maxConfigBytes)...), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", zero}, zero + " is not a regular file"},
		{[]string{"--config", pipe}, pipe + " is not a regular file"},
		{[]string{"--config", big}, big + " is larger than 1 MiB"},
		{[]string{"--model", zero}, zero + " is not a regular file"},
		{[]string{"--model", pipe}, pipe + " is not a regular file"},
		{[]string{"--tokenizer", zero}, zero + " is not a regular file"},
		{[]string{"--chat-template", zero}, zero + " is not a regular file"},
	} {
		code, stderr := serveRefused(t, append(c.args, "--addr", "127.0.0.1:0", "--blocks", "64", "--max-model-len", "1024"), nil)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q lacks %q", c.args, code, stderr, c.want)
		}
	}
}
