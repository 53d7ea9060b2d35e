package server

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/internal/jsontest"
	"github.com/prefixd/prefixd/model"
)

// byteText is what the built-in model's tokens spell.
func byteText(ids []int32) string {
	return model.ByteTokenizer{}.Decode(ids)
}

func TestGenerate(t *testing.T) {
	h := newHarness(t)
	prompt := "Once upon a time, in a land far away"
	r := h.generate(`{"prompt": "` + prompt + `", "max_tokens": 12, "ignore_eos": true}`)
	if len(r.IDs) != 12 || r.FinishReason != "length" {
		t.Fatalf("got %d ids, finish %q; want 12, length", len(r.IDs), r.FinishReason)
	}
	if want := jsontest.RoundTrip(t, byteText(r.IDs)); r.Text != want {
		t.Errorf("text %q, want the ids' bytes %q", r.Text, want)
	}
	u := r.Usage
	if u.PromptTokens != len(prompt)+1 || u.CompletionTokens != 12 || u.CachedTokens != 0 || u.PrefillTokens != u.PromptTokens {
		t.Errorf("usage %+v: want %d prompt tokens (BOS + bytes), 12 completion, nothing cached", u, len(prompt)+1)
	}
	if r.Timing.TotalMs <= 0 || r.Timing.TTFTMs <= 0 || r.Timing.TTFTMs > r.Timing.TotalMs {
		t.Errorf("timing %+v", r.Timing)
	}
	if !strings.HasPrefix(r.ID, "gen-") {
		t.Errorf("id %q", r.ID)
	}

	// The same prompt as token IDs is the same request: greedy, so the
	// same output, and now its whole blocks are cached.
	ids := append([]int32{model.ByteBOS}, model.ByteTokenizer{}.Encode(prompt)...)
	b, _ := json.Marshal(map[string]any{"prompt_ids": ids, "max_tokens": 12, "ignore_eos": true})
	r2 := h.generate(string(b))
	if !slices.Equal(r2.IDs, r.IDs) {
		t.Errorf("prompt_ids gave %v, prompt gave %v", r2.IDs, r.IDs)
	}
	if want := len(ids) / 8 * 8; r2.Usage.CachedTokens != want {
		t.Errorf("repeat: cached_tokens %d, want %d (the prompt's whole blocks)", r2.Usage.CachedTokens, want)
	}
	if r2.Usage.PrefillTokens != len(ids)-r2.Usage.CachedTokens {
		t.Errorf("repeat: prefill_tokens %d, want %d", r2.Usage.PrefillTokens, len(ids)-r2.Usage.CachedTokens)
	}

	// Disabling the cache for a request makes it compute everything.
	r3 := h.generate(`{"prompt": "` + prompt + `", "max_tokens": 4, "cache": {"enabled": false, "ttl": "10s", "priority": 3}}`)
	if r3.Usage.CachedTokens != 0 || r3.Usage.PrefillTokens != len(ids) {
		t.Errorf("cache disabled: usage %+v", r3.Usage)
	}
	h.checkDrained()
}

// readStream reads a /generate_stream response to the end.
func readStream(t *testing.T, s *sse) (toks []tokenEvent, final finalEvent) {
	t.Helper()
	defer s.close()
	for {
		data, err := s.next()
		if err != nil {
			t.Fatalf("stream ended without [DONE]: %v", err)
		}
		if data == "[DONE]" {
			if _, err := s.next(); err != io.EOF {
				t.Fatalf("data after [DONE]: %v", err)
			}
			return toks, final
		}
		if strings.Contains(data, `"finish_reason"`) {
			if err := json.Unmarshal([]byte(data), &final); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if final.FinishReason != "" {
			t.Fatalf("token event %s after the final event", data)
		}
		var ev tokenEvent
		dec := json.NewDecoder(strings.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("token event %s: %v", data, err)
		}
		toks = append(toks, ev)
	}
}

func TestGenerateStreamMatchesGenerate(t *testing.T) {
	h := newHarness(t)
	for _, body := range []string{
		`{"prompt": "The quick brown fox", "max_tokens": 20, "ignore_eos": true}`,
		`{"prompt": "The quick brown fox", "max_tokens": 20, "ignore_eos": true, "temperature": 0.9, "top_p": 0.9, "top_k": 40, "seed": 11}`,
		`{"prompt_ids": [256, 10, 20, 30, 40], "max_tokens": 6, "beam_width": 3, "length_penalty": 0.5}`,
	} {
		t.Run(body, func(t *testing.T) {
			want := h.generate(body)
			toks, final := readStream(t, h.stream("/generate_stream", body))
			var ids []int32
			var text strings.Builder
			for _, ev := range toks {
				ids = append(ids, ev.ID)
				text.WriteString(ev.Text)
			}
			text.WriteString(final.Text)
			if !slices.Equal(ids, want.IDs) {
				t.Errorf("streamed ids %v, want %v", ids, want.IDs)
			}
			if text.String() != want.Text {
				t.Errorf("streamed text %q, want %q", text.String(), want.Text)
			}
			if final.FinishReason != want.FinishReason || final.Usage.CompletionTokens != len(want.IDs) || final.Error != nil {
				t.Errorf("final event %+v, want finish %q and %d tokens", final, want.FinishReason, len(want.IDs))
			}
		})
	}
	h.checkDrained()
}

func TestStopTokensAndStrings(t *testing.T) {
	h := newHarness(t)
	base := `"prompt": "It was a dark and stormy night", "ignore_eos": true`
	full := h.generate(`{` + base + `, "max_tokens": 40}`)

	stopID := full.IDs[5]
	cut := slices.Index(full.IDs, stopID)
	r := h.generate(fmt.Sprintf(`{%s, "max_tokens": 40, "stop_ids": [%d]}`, base, stopID))
	if r.FinishReason != "stop" || !slices.Equal(r.IDs, full.IDs[:cut]) {
		t.Errorf("stop_ids [%d]: %v (%s), want %v (stop)", stopID, r.IDs, r.FinishReason, full.IDs[:cut])
	}

	// A stop string: the first printable ASCII byte after the start.
	k := slices.IndexFunc(full.IDs[2:], func(id int32) bool { return id > ' ' && id < 127 && id != '"' && id != '\\' })
	if k < 0 {
		t.Skip("no printable byte in the output to stop at")
	}
	stop := string(rune(full.IDs[2+k]))
	at := strings.Index(byteText(full.IDs), stop)
	want := jsontest.RoundTrip(t, byteText(full.IDs)[:at])
	body := fmt.Sprintf(`{%s, "max_tokens": 40, "stop": %q}`, base, stop)
	r = h.generate(body)
	if r.FinishReason != "stop" || r.Text != want {
		t.Errorf("stop %q: text %q (%s), want %q (stop)", stop, r.Text, r.FinishReason, want)
	}
	toks, final := readStream(t, h.stream("/generate_stream", body))
	var text strings.Builder
	for _, ev := range toks {
		text.WriteString(ev.Text)
	}
	if text.WriteString(final.Text); text.String() != want {
		t.Errorf("streamed with stop %q: %q, want %q", stop, text.String(), want)
	}
	h.checkDrained()
}

func TestCompletions(t *testing.T) {
	h := newHarness(t)
	body := `{"model": "prefixd-builtin-byte-3m", "prompt": "Hello there, general", "max_tokens": 10, "temperature": 0, "user": "u1"}`
	code, b, _ := h.do("POST", "/v1/completions", body)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	// Decode into a map too, to check the fields OpenAI clients read.
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	var r completionResponse
	json.Unmarshal(b, &r)
	if r.Object != "text_completion" || !strings.HasPrefix(r.ID, "cmpl-") || r.Model != "prefixd-builtin-byte-3m" || r.Created == 0 {
		t.Errorf("envelope %s", b)
	}
	if len(r.Choices) != 1 || r.Choices[0].Index != 0 || r.Choices[0].FinishReason == nil {
		t.Fatalf("choices %s", b)
	}
	choice := raw["choices"].([]any)[0].(map[string]any)
	if v, ok := choice["logprobs"]; !ok || v != nil {
		t.Errorf("logprobs must be present and null: %s", b)
	}
	u := r.Usage
	if u == nil || u.PromptTokens != len("Hello there, general")+1 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage %s", b)
	}

	// The repeat hits the cache; the stream carries the same text.
	code, b, _ = h.do("POST", "/v1/completions", body)
	var r2 completionResponse
	json.Unmarshal(b, &r2)
	if code != 200 || r2.Usage.PromptTokensDetails.CachedTokens == 0 || r2.Choices[0].Text != r.Choices[0].Text {
		t.Errorf("repeat: %d %s", code, b)
	}
	s := h.stream("/v1/completions", strings.Replace(body, `"user"`, `"stream": true, "stream_options": {"include_usage": true}, "user"`, 1))
	defer s.close()
	var text strings.Builder
	var last completionResponse
	var usage *completionUsage
	for {
		data, err := s.next()
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if data == "[DONE]" {
			break
		}
		var c completionResponse
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		if c.Usage != nil { // the usage chunk: last, no choices
			if len(c.Choices) != 0 || c.Usage.CompletionTokens != r.Usage.CompletionTokens {
				t.Fatalf("usage chunk %s", data)
			}
			usage = c.Usage
			continue
		}
		if usage != nil || c.ID != last.ID && last.ID != "" || c.Object != "text_completion" || len(c.Choices) != 1 {
			t.Fatalf("chunk %s", data)
		}
		if last.Choices != nil && last.Choices[0].FinishReason != nil {
			t.Fatalf("chunk %s after the finishing chunk", data)
		}
		text.WriteString(c.Choices[0].Text)
		last = c
	}
	if last.Choices[0].FinishReason == nil || *last.Choices[0].FinishReason != *r.Choices[0].FinishReason || usage == nil {
		t.Errorf("last chunk %+v", last)
	}
	if text.String() != r.Choices[0].Text {
		t.Errorf("streamed %q, want %q", text.String(), r.Choices[0].Text)
	}

	// Prompt forms: one-string array and token IDs.
	h.post("/v1/completions", `{"prompt": ["Hello"], "max_tokens": 2}`, &r)
	h.post("/v1/completions", `{"prompt": [256, 72, 105], "max_tokens": 2, "n": 1, "seed": 3, "top_p": 0.5, "stop": ["x", "y"]}`, &r)
	if r.Usage.PromptTokens != 3 {
		t.Errorf("prompt ids: %d prompt tokens, want 3", r.Usage.PromptTokens)
	}
	h.checkDrained()
}

func TestModelsHealthReady(t *testing.T) {
	h := newHarness(t)
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	code, b, _ := h.do("GET", "/v1/models", "")
	if err := json.Unmarshal(b, &models); err != nil || code != 200 {
		t.Fatalf("%d %s %v", code, b, err)
	}
	if models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != "prefixd-builtin-byte-3m" || models.Data[0].Object != "model" {
		t.Errorf("models %s", b)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, b, _ := h.do("GET", p, ""); code != 200 {
			t.Errorf("%s: %d %s", p, code, b)
		}
	}
}

func TestTenantIsolation(t *testing.T) {
	h := newHarness(t, withServer(func(c *Config) {
		c.APIKeys = map[string]string{"key-a": "tenant-a", "key-b": "tenant-b", "key-a2": "tenant-a"}
	}))
	body := `{"prompt": "A shared system prompt that is long enough to fill several blocks.", "max_tokens": 3}`
	a := h.generate(body, "Authorization", "Bearer key-a")
	if a.Usage.CachedTokens != 0 {
		t.Fatalf("first request cached %d tokens", a.Usage.CachedTokens)
	}
	if b := h.generate(body, "Authorization", "Bearer key-b"); b.Usage.CachedTokens != 0 {
		t.Errorf("tenant B reused tenant A's cache: %d cached tokens", b.Usage.CachedTokens)
	}
	if a2 := h.generate(body, "Authorization", "Bearer key-a"); a2.Usage.CachedTokens == 0 {
		t.Error("tenant A's repeat missed its own cache")
	}
	// Another key of the same tenant shares its namespace.
	if a3 := h.generate(body, "Authorization", "Bearer key-a2"); a3.Usage.CachedTokens == 0 {
		t.Error("a second key of tenant A missed the tenant's cache")
	}
	for _, auth := range []string{"", "Bearer", "Bearer nope", "Basic key-a", "key-a"} {
		code, b, hdr := h.do("POST", "/generate", body, "Authorization", auth)
		if code != 401 || !strings.Contains(string(b), "API key") || hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: %d %s", auth, code, b)
		}
	}
	if code, _, _ := h.do("GET", "/v1/models", ""); code != 401 {
		t.Errorf("/v1/models without a key: %d", code)
	}
	// The namespace never comes from the body.
	if code, b, _ := h.do("POST", "/generate", `{"prompt": "x", "namespace": "tenant-b"}`, "Authorization", "Bearer key-a"); code != 400 || !strings.Contains(string(b), "namespace") {
		t.Errorf("namespace in the body: %d %s", code, b)
	}
	h.checkDrained()
}

func TestEngineRequestShape(t *testing.T) {
	// What the handler passes on, for the fields the engine acts on.
	g := generateRequest{}
	if err := decodeStrict([]byte(`{"prompt": "ab", "max_tokens": 5, "stop": "x", "stop_ids": [1], "cache": {"ttl": "2m", "priority": -1}}`), &g); err != nil {
		t.Fatal(err)
	}
	lim := testLimits()
	req, err := g.toEngine(model.ByteTokenizer{}, lim)
	if err != nil {
		t.Fatal(err)
	}
	want := engine.Request{
		Prompt: []int32{model.ByteBOS, 'a', 'b'}, MaxTokens: 5, StopStrings: []string{"x"}, StopTokens: []int32{1},
		Cache: engine.Cache{TTL: 120e9, Priority: -1},
	}
	if fmt.Sprint(req) != fmt.Sprint(want) {
		t.Errorf("got %+v, want %+v", req, want)
	}
}

// TestTenantPriorityCap: with API keys a tenant's key may set
// cache.priority up to Config.MaxTenantPriority; above it is a 403 naming
// the limit unless the admin token rides along in X-Admin-Token, and a
// wrong admin token is a 401. Without keys there is no cap.
func TestTenantPriorityCap(t *testing.T) {
	h := newHarness(t, withServer(func(c *Config) {
		c.APIKeys = map[string]string{"key-a": "tenant-a"}
		c.AdminToken = "admin-secret"
		c.MaxTenantPriority = 50
	}))
	body := func(p int) string {
		return fmt.Sprintf(`{"prompt": "hello", "max_tokens": 1, "cache": {"priority": %d}}`, p)
	}
	key := []string{"Authorization", "Bearer key-a"}
	for _, p := range []int{-5, 0, 50} {
		if code, b, _ := h.do("POST", "/generate", body(p), key...); code != 200 {
			t.Errorf("priority %d within the cap: %d %s", p, code, b)
		}
	}
	code, b, _ := h.do("POST", "/generate", body(1000000), key...)
	var e struct{ Error apiError }
	if err := json.Unmarshal(b, &e); err != nil || code != 403 || e.Error.Type != typePermission ||
		e.Error.Param != "cache.priority" || !strings.Contains(e.Error.Message, "50") ||
		!strings.Contains(e.Error.Message, "the most an API key may set") {
		t.Errorf("priority above the cap: %d %s", code, b)
	}
	if code, b, _ := h.do("POST", "/generate", body(51), append(key, "X-Admin-Token", "admin-secret")...); code != 200 {
		t.Errorf("priority above the cap with the admin token: %d %s", code, b)
	}
	code, b, _ = h.do("POST", "/generate", body(51), append(key, "X-Admin-Token", "guess")...)
	if code != 401 || strings.Contains(string(b), "guess") || strings.Contains(string(b), "admin-secret") {
		t.Errorf("a wrong admin token: %d %s", code, b)
	}
	h.checkDrained()

	open := newHarness(t)
	if code, b, _ := open.do("POST", "/generate", body(1000000)); code != 200 {
		t.Errorf("without API keys, priority 1000000: %d %s", code, b)
	}
	open.checkDrained()
}
