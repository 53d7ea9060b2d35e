package server

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/model"
)

func TestCacheAdmin(t *testing.T) {
	h := newHarness(t, withServer(func(c *Config) { c.APIKeys = map[string]string{"k1": "team"} }))
	auth := []string{"Authorization", "Bearer admin-secret"}
	user := []string{"Authorization", "Bearer k1"}
	prompt := "An operator pins the system prompt of an important tenant."
	ids := append([]int32{model.ByteBOS}, model.ByteTokenizer{}.Encode(prompt)...)
	whole := len(ids) / 8 * 8
	body := `{"prompt": "` + prompt + `", "max_tokens": 2}`
	h.generate(body, user...)

	var st cacheStatsJSON
	waitFor(t, "the request in the stats", func() bool {
		h.getJSON("/v1/cache", &st, auth...)
		return st.Requests == 1
	})
	if st.Blocks.Total != 192 || st.Blocks.CachedIdle == 0 || st.BlockSize != 8 || st.DefaultTTL != "5m0s" || st.MaxTTL != "1h0m0s" || st.Requests != 1 {
		t.Errorf("stats %+v", st)
	}
	if st.Blocks.Free+st.Blocks.CachedIdle+st.Blocks.InUse != st.Blocks.Total {
		t.Errorf("blocks do not add up: %+v", st.Blocks)
	}

	var ps struct{ Prefixes []prefixJSON }
	h.getJSON("/v1/cache/prefixes?limit=5", &ps, auth...)
	if len(ps.Prefixes) == 0 {
		t.Fatal("no cached prefixes")
	}
	p := ps.Prefixes[0]
	if p.Namespace != "team" || !slices.Equal(p.Tokens, ids[:len(p.Tokens)]) || len(p.Tokens)%8 != 0 || p.Text == nil ||
		*p.Text != prompt[:len(p.Tokens)-1] || p.TTLLeftMs <= 0 || p.Pinned || p.InUse || p.Hits == 0 {
		t.Errorf("prefix %+v", p)
	}

	pin := `{"namespace": "team", "prompt": "` + prompt + `"}`
	var pinned struct {
		Namespace    string `json:"namespace"`
		PinnedTokens int    `json:"pinned_tokens"`
	}
	h.post("/v1/cache/pin", pin, &pinned, auth...)
	if pinned.Namespace != "team" || pinned.PinnedTokens != whole {
		t.Errorf("pin: %+v, want %d tokens", pinned, whole)
	}
	h.getJSON("/v1/cache/prefixes?limit=5", &ps, auth...)
	if !slices.ContainsFunc(ps.Prefixes, func(p prefixJSON) bool { return p.Pinned }) {
		t.Errorf("no pinned prefix listed: %+v", ps.Prefixes)
	}
	// The same prompt in another namespace is not cached.
	if code, b, _ := h.do("POST", "/v1/cache/pin", `{"namespace": "other", "prompt": "`+prompt+`"}`, auth...); code != 404 {
		t.Errorf("pin in another namespace: %d %s", code, b)
	}

	var unpinned map[string]bool
	h.post("/v1/cache/unpin", pin, &unpinned, auth...)
	if !unpinned["unpinned"] {
		t.Error("unpin found no pin")
	}
	h.post("/v1/cache/unpin", pin, &unpinned, auth...)
	if unpinned["unpinned"] {
		t.Error("second unpin found a pin")
	}

	var ttl map[string]string
	code, b, _ := h.do("PUT", "/v1/cache/ttl", `{"default": "30s", "max": "10m"}`, auth...)
	if json.Unmarshal(b, &ttl); code != 200 || ttl["default"] != "30s" || ttl["max"] != "10m0s" {
		t.Fatalf("set TTLs: %d %s", code, b)
	}
	h.getJSON("/v1/cache", &st, auth...)
	if st.DefaultTTL != "30s" || st.MaxTTL != "10m0s" {
		t.Errorf("TTLs after the change: %s, %s", st.DefaultTTL, st.MaxTTL)
	}
	// The new maximum applies to requests at once.
	if code, b, _ := h.do("POST", "/generate", `{"prompt": "a", "cache": {"ttl": "20m"}}`, user...); code != 400 || !strings.Contains(string(b), "(0, 10m0s]") {
		t.Errorf("TTL above the new maximum: %d %s", code, b)
	}

	var flushed map[string]int
	h.post("/v1/cache/flush", `{"namespace": "nobody"}`, &flushed, auth...)
	if flushed["flushed_blocks"] != 0 {
		t.Errorf("flushing an empty namespace removed %d blocks", flushed["flushed_blocks"])
	}
	h.post("/v1/cache/flush", `{"namespace": "team"}`, &flushed, auth...)
	if flushed["flushed_blocks"] == 0 {
		t.Error("flushing the tenant removed nothing")
	}
	if r := h.generate(body, user...); r.Usage.CachedTokens != 0 {
		t.Errorf("after the flush the prompt hit %d cached tokens", r.Usage.CachedTokens)
	}
	h.post("/v1/cache/flush", `{"all": true}`, &flushed, auth...)
	if flushed["flushed_blocks"] == 0 {
		t.Error("flushing all removed nothing")
	}
	// The engine publishes its stats after its next iteration.
	waitFor(t, "the flush to show in the stats", func() bool {
		h.getJSON("/v1/cache", &st, auth...)
		return st.Blocks.CachedIdle == 0
	})
	if st.Evicted["flush"] == 0 {
		t.Errorf("after flushing all: %+v", st)
	}
	h.checkDrained()
}

// getJSON GETs path and decodes a 200 response.
func (h *harness) getJSON(path string, out any, header ...string) {
	h.t.Helper()
	code, b, _ := h.do("GET", path, "", header...)
	if code != 200 {
		h.t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		h.t.Fatalf("GET %s: %v in %s", path, err, b)
	}
}
