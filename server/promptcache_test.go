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

// TestChatCacheControl: content parts' cache_control breakpoints keep the
// prompt up to their ends for their TTLs (1h, 5m), longer first, and the
// rest of the prompt for the request's own; errors name the part.
func TestChatCacheControl(t *testing.T) {
	h := newChatHarness(t, withEngine(func(e *engine.Config) { e.DefaultTTL, e.MaxTTL = time.Minute, time.Hour }))
	const sys = "You are a careful assistant for travellers. Answer briefly, name your sources, and say when you are unsure of anything."
	const docs = "Norway's mountain huts are run by the trekking association; most are open from late June to September."
	body := `{"messages": [
		{"role": "system", "content": [{"type": "text", "text": "` + sys + `", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]},
		{"role": "user", "content": [{"type": "text", "text": "` + docs + `", "cache_control": {"type": "ephemeral"}},
			{"type": "text", "text": " When do the huts open, and do I need to book a bed in advance?"}]}],
		"max_tokens": 2, "temperature": 0}`
	var r chatResp
	h.post("/v1/chat/completions", body, &r)
	var ps struct{ Prefixes []prefixJSON }
	h.getJSON("/v1/cache/prefixes?limit=100", &ps, "Authorization", "Bearer admin-secret")
	// By TTL band: the system prompt's hour, the documents' 5 minutes,
	// the rest's minute (output blocks too); each band's prefix longer
	// than the one before.
	bands := []time.Duration{time.Hour, 5 * time.Minute, time.Minute}
	longest := make([]int, len(bands))
	for _, p := range ps.Prefixes {
		left := time.Duration(p.TTLLeftMs) * time.Millisecond
		for i, b := range bands {
			if left <= b && (i == len(bands)-1 || left > bands[i+1]) {
				longest[i] = max(longest[i], len(p.Tokens))
			}
		}
	}
	if !(0 < longest[0] && longest[0] < longest[1] && longest[1] < longest[2] && longest[2] <= r.Usage.PromptTokens+r.Usage.CompletionTokens) {
		t.Errorf("longest prefix per TTL band (1h, 5m, 1m): %v tokens of %d, want each band's longer than the one before", longest, r.Usage.PromptTokens)
	}

	part := func(cc string) string {
		return `{"type": "text", "text": "some text", "cache_control": ` + cc + `}`
	}
	eph := `{"type": "ephemeral"}`
	for _, c := range []struct{ content, param, want string }{
		{"[" + part(`{"type": "persistent"}`) + "]", "messages[0].content[0].cache_control", `"ephemeral"`},
		{"[" + part(`{"type": "ephemeral", "ttl": "2h"}`) + "]", "messages[0].content[0].cache_control", `"5m" or "1h"`},
		{"[" + part(`"ephemeral"`) + "]", "messages[0].content[0].cache_control", "must be an object"},
		{"[" + part(eph) + "," + part(`{"type": "ephemeral", "ttl": "1h"}`) + "]", "messages[0].content[1].cache_control", "longer TTLs must come first"},
		{"[" + strings.Repeat(part(eph)+",", 4) + part(eph) + "]", "messages[0].content[4].cache_control", "at most 4"},
	} {
		code, b, _ := h.do("POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": `+c.content+`}], "max_tokens": 1}`)
		var e struct{ Error apiError }
		if err := json.Unmarshal(b, &e); err != nil || code != 400 || e.Error.Param != c.param || !strings.Contains(e.Error.Message, c.want) {
			t.Errorf("%s: %d %s, want a 400 for %s saying %q", c.content, code, b, c.param, c.want)
		}
	}
	h.checkDrained()
}
