package server

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prefixd/prefixd/engine"
)

// cachedTTLLeft returns the longest TTL left of the prefixes the cache
// holds, as /v1/cache/prefixes reports it.
func (h *harness) cachedTTLLeft() time.Duration {
	h.t.Helper()
	var ps struct{ Prefixes []prefixJSON }
	h.getJSON("/v1/cache/prefixes?limit=100", &ps, "Authorization", "Bearer admin-secret")
	var left time.Duration
	for _, p := range ps.Prefixes {
		left = max(left, time.Duration(p.TTLLeftMs)*time.Millisecond)
	}
	return left
}

// TestPromptCacheRetention: "24h" keeps the prompt's prefix 24 h, cut to
// --max-ttl; "in_memory" (and "in-memory") and none keep the default TTL;
// anything else is a 400 naming the field.
func TestPromptCacheRetention(t *testing.T) {
	const body = `{"prompt": "A prompt long enough to fill a few blocks of eight tokens.", "max_tokens": 1%s}`
	for _, c := range []struct {
		name     string
		maxTTL   time.Duration
		field    string
		min, max time.Duration
	}{
		{"24h", 48 * time.Hour, `, "prompt_cache_retention": "24h"`, 23 * time.Hour, 24 * time.Hour},
		{"24h cut to max-ttl", 2 * time.Hour, `, "prompt_cache_retention": "24h"`, time.Hour, 2 * time.Hour},
		{"in_memory", 48 * time.Hour, `, "prompt_cache_retention": "in_memory"`, time.Second, 5 * time.Minute},
		{"in-memory", 48 * time.Hour, `, "prompt_cache_retention": "in-memory"`, time.Second, 5 * time.Minute},
		{"absent", 48 * time.Hour, "", time.Second, 5 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, withEngine(func(e *engine.Config) { e.MaxTTL = c.maxTTL }))
			var resp completionResponse
			h.post("/v1/completions", strings.Replace(body, "%s", c.field, 1), &resp)
			if left := h.cachedTTLLeft(); left < c.min || left > c.max {
				t.Errorf("TTL left %v, want in [%v, %v]", left, c.min, c.max)
			}
			h.checkDrained()
		})
	}
	h := newHarness(t)
	for _, bad := range []struct{ field, param string }{
		{`"prompt_cache_retention": "1h"`, "prompt_cache_retention"},
		{`"prompt_cache_retention": 24`, "prompt_cache_retention"},
		{`"prompt_cache_key": ""`, "prompt_cache_key"},
		{`"prompt_cache_key": "` + strings.Repeat("k", maxPromptCacheKey+1) + `"`, "prompt_cache_key"},
	} {
		code, b, _ := h.do("POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, `+bad.field+`}`)
		var e struct{ Error apiError }
		if err := json.Unmarshal(b, &e); err != nil || code != 400 || e.Error.Param != bad.param || e.Error.Type != typeInvalid {
			t.Errorf("%s: %d %s", bad.field, code, b)
		}
	}
	h.checkDrained()
}

// TestPromptCacheUsageAndKey: usage reports the prompt tokens a request
// wrote to the cache (cache_write_tokens) beside cached_tokens, in the
// OpenAI and native APIs, and the access-log line carries
// prompt_cache_key, which isolates nothing: another key of the same
// tenant hits the same prefix.
func TestPromptCacheUsageAndKey(t *testing.T) {
	var logs logBuffer
	h := newHarness(t, withLogCapture(&logs))
	const prompt = "A shared prompt that is long enough to fill several blocks of eight."
	req := func(key string) string {
		return `{"prompt": "` + prompt + `", "max_tokens": 1, "prompt_cache_key": "` + key + `"}`
	}
	var first, second completionResponse
	h.post("/v1/completions", req("group-a"), &first)
	u := first.Usage
	whole := (u.PromptTokens / 8) * 8
	if u.PromptTokensDetails.CachedTokens != 0 || u.PromptTokensDetails.CacheWriteTokens != whole || whole == 0 {
		t.Errorf("cold request: usage %+v, want %d tokens written", u, whole)
	}
	h.post("/v1/completions", req("group-b"), &second)
	if d := second.Usage.PromptTokensDetails; d.CachedTokens == 0 || d.CacheWriteTokens != 0 {
		t.Errorf("a repeat under another prompt_cache_key: %+v, want a hit and nothing written", d)
	}
	g := h.generate(`{"prompt": "` + prompt + ` And more text after it, for two more blocks.", "max_tokens": 1}`)
	if g.Usage.CacheWriteTokens == 0 || g.Usage.CachedTokens == 0 {
		t.Errorf("native usage %+v, want a hit and some tokens written", g.Usage)
	}
	h.srv.Shutdown(t.Context())
	out := logs.String()
	for _, want := range []string{"prompt_cache_key=group-a", "prompt_cache_key=group-b", "cache_write_tokens=" + strconv.Itoa(whole)} {
		if !strings.Contains(out, want) {
			t.Errorf("the access log lacks %q:\n%s", want, out)
		}
	}
}
