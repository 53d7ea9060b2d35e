package server

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/prefixd/prefixd/model"
)

// testLimits matches the harness: the built-in model's vocabulary, a
// 1024-token model length and the engine's default cache TTLs.
func testLimits() limits {
	return limits{
		vocab: 258, maxModelLen: 1024, maxPrompt: 1023, maxTokens: 1023, defaultMax: 64, maxBeam: 8,
		maxStops: maxStopStrings, maxStopBytes: maxStopBytes, maxStopIDs: maxStopIDs,
		maxTTL: time.Hour, bos: model.ByteBOS, haveTokenizer: true,
	}
}

type badCase struct {
	name   string
	method string
	path   string
	body   string
	header []string
	status int
	want   string // substring of the error message
	param  string // expected error.param, if any
}

func badInputs() []badCase {
	ids := func(n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = "65"
		}
		return "[" + strings.Join(s, ",") + "]"
	}
	long := strings.Repeat("a", 1100)
	admin := []string{"Authorization", "Bearer admin-secret"}
	gz := []string{"Content-Encoding", "gzip"}
	return []badCase{
		{name: "gzip bomb", body: gzipped(`{"prompt": "` + strings.Repeat("a", 1<<20) + `"}`), header: gz, status: 413, want: "decoded request body is larger than the limit of 65536 bytes"},
		{name: "corrupt gzip", body: gzipped(`{"prompt": "a"}`)[:12], header: gz, status: 400, want: "not valid gzip"},
		{name: "gzipped bad input", body: gzipped(`{"prompt": "a", "top_k": -1}`), header: gz, status: 400, want: "top_k", param: "top_k"},
		{name: "brotli body", body: `{"prompt": "a"}`, header: []string{"Content-Encoding", "br"}, status: 415, want: `Content-Encoding "br" is not supported`},
		{name: "invalid UTF-8 prompt", body: "{\"prompt\": \"ab\xffcd\"}", status: 400, want: "not valid UTF-8: byte 0xff at offset 14"},
		{name: "truncated UTF-8 sequence", path: "/v1/completions", body: "{\"prompt\": \"\xe2\x82\"}", status: 400, want: "byte 0xe2 at offset 12"},
		{name: "lone high surrogate", body: `{"prompt": "ab\ud83dcd"}`, status: 400, want: `unpaired UTF-16 surrogate escape \ud83d at offset 14`},
		{name: "lone low surrogate", body: `{"prompt": "\n\"\ude00"}`, status: 400, want: `surrogate escape \ude00 at offset 16`},
		{name: "surrogate pair broken by a letter", body: `{"prompt": "\ud83dx\ude00"}`, status: 400, want: `\ud83d at offset 12`},
		{name: "field name in upper case", body: `{"PROMPT": "a"}`, status: 400, want: `unknown field "PROMPT": field names are case-sensitive; did you mean "prompt"?`, param: "PROMPT"},
		{name: "completions field name case", path: "/v1/completions", body: `{"prompt": "a", "Max_Tokens": 2}`, status: 400, want: `did you mean "max_tokens"`, param: "Max_Tokens"},
		{name: "nested field name case", body: `{"prompt": "a", "cache": {"TTL": "5s"}}`, status: 400, want: `unknown field "cache.TTL"`, param: "cache.TTL"},
		{name: "admin field name case", method: "PUT", path: "/v1/cache/ttl", body: `{"Default": "5m"}`, header: admin, status: 400, want: `did you mean "default"`, param: "Default"},
		{name: "field given twice", body: `{"prompt": "a", "max_tokens": 2, "max_tokens": 900}`, status: 400, want: `field "max_tokens" appears twice`, param: "max_tokens"},
		{name: "truncated JSON", body: `{"prompt": "a"`, status: 400, want: "unexpected end"},
		{name: "syntax error", body: `{"prompt": }`, status: 400, want: "invalid JSON"},
		{name: "array body", body: `[1, 2]`, status: 400, want: "must be a JSON object"},
		{name: "string body", body: `"hello"`, status: 400, want: "must be a JSON object"},
		{name: "empty body", body: ``, status: 400, want: "body is empty"},
		{name: "trailing data", body: `{"prompt": "a"} {"x": 1}`, status: 400, want: "data after the object"},
		{name: "unknown field", body: `{"prompt": "a", "temprature": 1}`, status: 400, want: `unknown field "temprature"`, param: "temprature"},
		{name: "prompt wrong type", body: `{"prompt": 5}`, status: 400, want: `"prompt" must be a string`, param: "prompt"},
		{name: "max_tokens wrong type", body: `{"prompt": "a", "max_tokens": "ten"}`, status: 400, want: `"max_tokens" must be an integer`, param: "max_tokens"},
		{name: "max_tokens fractional", body: `{"prompt": "a", "max_tokens": 1.5}`, status: 400, want: "max_tokens", param: "max_tokens"},
		{name: "ignore_eos wrong type", body: `{"prompt": "a", "ignore_eos": "yes"}`, status: 400, want: "must be a boolean", param: "ignore_eos"},
		{name: "negative seed", body: `{"prompt": "a", "seed": -1}`, status: 400, want: "non-negative integer", param: "seed"},
		{name: "empty prompt", body: `{"prompt": ""}`, status: 400, want: "prompt is empty", param: "prompt"},
		{name: "no prompt", body: `{"max_tokens": 3}`, status: 400, want: "prompt or prompt_ids is required", param: "prompt"},
		{name: "both prompts", body: `{"prompt": "a", "prompt_ids": [1]}`, status: 400, want: "not both", param: "prompt"},
		{name: "empty prompt_ids", body: `{"prompt_ids": []}`, status: 400, want: "prompt is empty", param: "prompt_ids"},
		{name: "token above vocabulary", body: `{"prompt_ids": [1, 258]}`, status: 400, want: "outside the vocabulary [0, 258)", param: "prompt_ids"},
		{name: "negative token", body: `{"prompt_ids": [-3]}`, status: 400, want: "outside the vocabulary", param: "prompt_ids"},
		{name: "token beyond int32", body: `{"prompt_ids": [4294967296]}`, status: 400, want: "32-bit integer", param: "prompt_ids"},
		{name: "oversize prompt", body: `{"prompt": "` + long + `"}`, status: 400, want: "prompt is 1101 tokens, the limit is 1023", param: "prompt"},
		{name: "zero max_tokens", body: `{"prompt": "a", "max_tokens": 0}`, status: 400, want: "max_tokens must be in [1, 1023]", param: "max_tokens"},
		{name: "negative max_tokens", body: `{"prompt": "a", "max_tokens": -5}`, status: 400, want: "max_tokens must be in", param: "max_tokens"},
		{name: "huge max_tokens", body: `{"prompt": "a", "max_tokens": 100000}`, status: 400, want: "max_tokens must be in", param: "max_tokens"},
		{name: "prompt plus max_tokens too long", body: `{"prompt_ids": ` + ids(1000) + `, "max_tokens": 100}`, status: 400, want: "exceeds the model's maximum length 1024", param: "max_tokens"},
		{name: "temperature too high", body: `{"prompt": "a", "temperature": 2.5}`, status: 400, want: "temperature must be in [0, 2]", param: "temperature"},
		{name: "negative temperature", body: `{"prompt": "a", "temperature": -0.1}`, status: 400, want: "temperature must be in", param: "temperature"},
		{name: "top_p zero", body: `{"prompt": "a", "top_p": 0}`, status: 400, want: "top_p must be in (0, 1]", param: "top_p"},
		{name: "top_p above one", body: `{"prompt": "a", "top_p": 1.5}`, status: 400, want: "top_p must be in", param: "top_p"},
		{name: "negative top_k", body: `{"prompt": "a", "top_k": -1}`, status: 400, want: "top_k must be >= 0", param: "top_k"},
		{name: "beam too wide", body: `{"prompt": "a", "beam_width": 9}`, status: 400, want: "beam_width must be in [1, 4]", param: "beam_width"},
		{name: "beam zero", body: `{"prompt": "a", "beam_width": 0}`, status: 400, want: "beam_width must be in", param: "beam_width"},
		{name: "beam with temperature", body: `{"prompt": "a", "beam_width": 2, "temperature": 0.7}`, status: 400, want: "beam search is deterministic", param: "beam_width"},
		{name: "length_penalty without beam", body: `{"prompt": "a", "length_penalty": 1}`, status: 400, want: "set beam_width", param: "length_penalty"},
		{name: "bad TTL string", body: `{"prompt": "a", "cache": {"ttl": "soon"}}`, status: 400, want: `"soon" is not a duration`, param: "cache.ttl"},
		{name: "negative TTL", body: `{"prompt": "a", "cache": {"ttl": "-5s"}}`, status: 400, want: "cache.ttl must be in (0, 1h0m0s]", param: "cache.ttl"},
		{name: "TTL above max", body: `{"prompt": "a", "cache": {"ttl": "2h"}}`, status: 400, want: "cache.ttl must be in", param: "cache.ttl"},
		{name: "TTL wrong type", body: `{"prompt": "a", "cache": {"ttl": 30}}`, status: 400, want: `"cache.ttl" must be a string`, param: "cache.ttl"},
		{name: "unknown cache field", body: `{"prompt": "a", "cache": {"namespace": "x"}}`, status: 400, want: `unknown field "cache.namespace"`, param: "cache.namespace"},
		{name: "empty stop string", body: `{"prompt": "a", "stop": [""]}`, status: 400, want: "must not be empty", param: "stop"},
		{name: "too many stops", body: `{"prompt": "a", "stop": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]}`, status: 400, want: "at most 16 stop strings", param: "stop"},
		{name: "stop wrong type", body: `{"prompt": "a", "stop": [1]}`, status: 400, want: "stop must be a string or an array of strings", param: "stop"},
		{name: "stop id outside vocabulary", body: `{"prompt": "a", "stop_ids": [999]}`, status: 400, want: "stop id 999 is outside", param: "stop_ids"},
		{name: "completion with no token IDs", path: "/v1/completions", body: `{"prompt": []}`, status: 400, want: "empty", param: "prompt"},
		{name: "null token ID", body: `{"prompt_ids": [256, null, 5]}`, status: 400, want: "got null at index 1", param: "prompt_ids"},
		{name: "null stop ID", body: `{"prompt": "a", "stop_ids": [null]}`, status: 400, want: "got null at index 0", param: "stop_ids"},
		{name: "headers too large", body: `{"prompt": "a"}`, header: []string{"X-Padding", strings.Repeat("p", 9000)}, status: 431, want: "headers are too large"},
		{name: "body too large", body: `{"prompt": "` + strings.Repeat("x", 70000) + `"}`, status: 413, want: "larger than the limit of 65536 bytes"},
		{name: "stream bad input", path: "/generate_stream", body: `{"prompt": "a", "top_k": -2}`, status: 400, want: "top_k", param: "top_k"},
		{name: "wrong method", method: "GET", path: "/generate", status: 405, want: "method GET not allowed on /generate; allowed: POST"},
		{name: "wrong method on metrics", method: "POST", path: "/metrics", body: "{}", status: 405, want: "allowed: GET"},
		{name: "unknown path", method: "GET", path: "/v2/generate", status: 404, want: "no endpoint /v2/generate"},
		{name: "completions n=99", path: "/v1/completions", body: `{"prompt": "a", "n": 99}`, status: 400, want: "n must be in [1, ", param: "n"},
		{name: "completions unknown model", path: "/v1/completions", body: `{"model": "gpt-9", "prompt": "a"}`, status: 404, want: "model gpt-9 does not exist", param: "model"},
		{name: "completions batch", path: "/v1/completions", body: `{"prompt": ["a", "b"]}`, status: 400, want: "batch of 2 prompts", param: "prompt"},
		{name: "completions prompt number", path: "/v1/completions", body: `{"prompt": 7}`, status: 400, want: "prompt must be a string", param: "prompt"},
		{name: "completions no prompt", path: "/v1/completions", body: `{"max_tokens": 2}`, status: 400, want: "prompt is required", param: "prompt"},
		{name: "completions unsupported field", path: "/v1/completions", body: `{"prompt": "a", "echo": true}`, status: 400, want: `"echo" is not supported`, param: "echo"},
		{name: "completions unknown field", path: "/v1/completions", body: `{"prompt": "a", "logprobz": 2}`, status: 400, want: `unknown field "logprobz"`, param: "logprobz"},
		{name: "completions five stops", path: "/v1/completions", body: `{"prompt": "a", "stop": ["a","b","c","d","e"]}`, status: 400, want: "at most 4 stop sequences", param: "stop"},
		{name: "completions temperature", path: "/v1/completions", body: `{"prompt": "a", "temperature": 9}`, status: 400, want: "temperature", param: "temperature"},
		// Decoding errors name the field as the client sent it, and say
		// what is wrong with its value.
		{name: "completions temperature 1e308", path: "/v1/completions", body: `{"prompt": "a", "temperature": 1e308}`, status: 400, want: "temperature must be in [0, 2], got 1e+308", param: "temperature"},
		{name: "chat temperature 1e308", path: "/v1/chat/completions", body: `{"messages": [{"role": "user", "content": "a"}], "temperature": 1e308}`, status: 400, want: "temperature must be in [0, 2], got 1e+308", param: "temperature"},
		{name: "generate temperature 1e308", body: `{"prompt": "a", "temperature": 1e308}`, status: 400, want: "temperature must be in [0, 2], got 1e+308", param: "temperature"},
		{name: "temperature beyond float64", path: "/v1/completions", body: `{"prompt": "a", "temperature": 1e400}`, status: 400, want: `"temperature": 1e400 is out of range for a number`, param: "temperature"},
		{name: "chat temperature string", path: "/v1/chat/completions", body: `{"messages": [{"role": "user", "content": "a"}], "temperature": "hot"}`, status: 400, want: `field "temperature" must be a number, got string`, param: "temperature"},
		{name: "completions top_p string", path: "/v1/completions", body: `{"prompt": "a", "top_p": "all"}`, status: 400, want: `field "top_p" must be a number, got string`, param: "top_p"},
		{name: "completions huge frequency_penalty", path: "/v1/completions", body: `{"prompt": "a", "frequency_penalty": 1e39}`, status: 400, want: "frequency_penalty must be in [-2, 2], got 1e+39", param: "frequency_penalty"},
		{name: "chat n string", path: "/v1/chat/completions", body: `{"messages": [{"role": "user", "content": "a"}], "n": "2"}`, status: 400, want: `field "n" must be an integer, got string`, param: "n"},
		{name: "completions max_tokens fractional", path: "/v1/completions", body: `{"prompt": "a", "max_tokens": 1e3}`, status: 400, want: `field "max_tokens" must be an integer, got 1e3`, param: "max_tokens"},
		{name: "chat max_completion_tokens beyond int", path: "/v1/chat/completions", body: `{"messages": [{"role": "user", "content": "a"}], "max_completion_tokens": 99999999999999999999}`, status: 400, want: `field "max_completion_tokens": 99999999999999999999 is out of range for an integer`, param: "max_completion_tokens"},
		{name: "chat logit_bias value string", path: "/v1/chat/completions", body: `{"messages": [{"role": "user", "content": "a"}], "logit_bias": {"5": "x"}}`, status: 400, want: `must be a number, got string`, param: "logit_bias"},
		{name: "completions include_usage number", path: "/v1/completions", body: `{"prompt": "a", "stream": true, "stream_options": {"include_usage": 1}}`, status: 400, want: `field "stream_options.include_usage" must be a boolean, got number`, param: "stream_options.include_usage"},
		{name: "chat user number", path: "/v1/chat/completions", body: `{"messages": [{"role": "user", "content": "a"}], "user": 5}`, status: 400, want: `field "user" must be a string, got number`, param: "user"},
		{name: "chat seed negative", path: "/v1/chat/completions", body: `{"messages": [{"role": "user", "content": "a"}], "seed": -1}`, status: 400, want: `field "seed" must be a non-negative integer, got -1`, param: "seed"},
		{name: "chat message a number", path: "/v1/chat/completions", body: `{"messages": [5]}`, status: 400, want: `field "messages" must be an array of objects, got number`, param: "messages"},
		{name: "chat messages string", path: "/v1/chat/completions", body: `{"messages": "hi"}`, status: 400, want: `field "messages" must be an array of objects, got string`, param: "messages"},
		{name: "chat top_logprobs fractional", path: "/v1/chat/completions", body: `{"messages": [{"role": "user", "content": "a"}], "logprobs": true, "top_logprobs": 1.5}`, status: 400, want: `field "top_logprobs" must be an integer, got 1.5`, param: "top_logprobs"},
		{name: "completions logprobs boolean", path: "/v1/completions", body: `{"prompt": "a", "logprobs": true}`, status: 400, want: `field "logprobs" must be an integer, got bool`, param: "logprobs"},
		{name: "generate stop_ids string", body: `{"prompt": "a", "stop_ids": "x"}`, status: 400, want: `field "stop_ids" must be an array of 32-bit integers, got string`, param: "stop_ids"},
		{name: "generate priority beyond int32", body: `{"prompt": "a", "cache": {"priority": 3000000000}}`, status: 400, want: `field "cache.priority": 3000000000 is out of range for a 32-bit integer`, param: "cache.priority"},
		{name: "tokenize prompt number", path: "/tokenize", body: `{"prompt": 5}`, status: 400, want: `field "prompt" must be a string, got number`, param: "prompt"},
		{name: "tokenize add_special_tokens string", path: "/tokenize", body: `{"prompt": "a", "add_special_tokens": "yes"}`, status: 400, want: `field "add_special_tokens" must be a boolean, got string`, param: "add_special_tokens"},
		{name: "detokenize tokens string", path: "/detokenize", body: `{"tokens": "abc"}`, status: 400, want: `field "tokens" must be`, param: "tokens"},
		{name: "admin pin prompt_ids string", path: "/v1/cache/pin", body: `{"prompt_ids": "x"}`, header: admin, status: 400, want: `field "prompt_ids" must be`, param: "prompt_ids"},
		{name: "denormal repetition_penalty", path: "/v1/completions", body: `{"prompt": "Hi", "max_tokens": 3, "logprobs": 1, "repetition_penalty": 1e-45}`, status: 400, want: "repetition_penalty must be in [0.01, 10], got 1e-45", param: "repetition_penalty"},
		{name: "zero repetition_penalty", path: "/v1/chat/completions", body: `{"messages": [{"role": "user", "content": "a"}], "repetition_penalty": 0}`, status: 400, want: "repetition_penalty must be in [0.01, 10]", param: "repetition_penalty"},
		// Per-request memory is bounded by documented limits.
		{name: "tokenize prompt far too long", path: "/tokenize", body: `{"prompt": "` + strings.Repeat("x", 9000) + `"}`, status: 400, want: "prompt is 9000 bytes, far above the limit of 1023 tokens", param: "prompt"},
		{name: "tokenize prompt too long", path: "/tokenize", body: `{"prompt": "` + long + `"}`, status: 400, want: "prompt is 1101 tokens, the limit is 1023", param: "prompt"},
		{name: "tokenize messages far too long", path: "/tokenize", body: `{"messages": [{"role": "user", "content": "` + strings.Repeat("x", 9000) + `"}]}`, status: 400, want: "messages is 9000 bytes, far above the limit of 1023 tokens", param: "messages"},
		{name: "tokenize messages too long", path: "/tokenize", body: `{"messages": [{"role": "user", "content": "` + long + `"}]}`, status: 400, want: "the limit is 1023", param: "messages"},
		{name: "detokenize too many tokens", path: "/detokenize", body: `{"tokens": ` + ids(1025) + `}`, status: 400, want: "tokens holds 1025 tokens, the limit is 1024", param: "tokens"},
		{name: "admin without token", method: "GET", path: "/v1/cache", status: 401, want: "missing admin token"},
		{name: "admin wrong token", method: "GET", path: "/v1/cache", header: []string{"Authorization", "Bearer nope"}, status: 401, want: "invalid admin token"},
		{name: "admin tenant key is no admin token", method: "POST", path: "/v1/cache/flush", body: `{"all": true}`, header: []string{"Authorization", "Bearer key"}, status: 401, want: "invalid admin token"},
		{name: "flush neither", path: "/v1/cache/flush", body: `{}`, header: admin, status: 400, want: "exactly one of"},
		{name: "flush both", path: "/v1/cache/flush", body: `{"namespace": "a", "all": true}`, header: admin, status: 400, want: "exactly one of"},
		{name: "prefixes bad limit", method: "GET", path: "/v1/cache/prefixes?limit=0", header: admin, status: 400, want: "limit must be an integer in [1, 1000]", param: "limit"},
		{name: "prefixes limit not a number", method: "GET", path: "/v1/cache/prefixes?limit=ten", header: admin, status: 400, want: "limit must be"},
		{name: "ttl bad duration", method: "PUT", path: "/v1/cache/ttl", body: `{"default": "forever"}`, header: admin, status: 400, want: `got "forever"`, param: "default"},
		{name: "ttl default above max", method: "PUT", path: "/v1/cache/ttl", body: `{"default": "2h", "max": "1h"}`, header: admin, status: 400, want: "above the maximum"},
		{name: "ttl empty", method: "PUT", path: "/v1/cache/ttl", body: `{}`, header: admin, status: 400, want: `send "default", "max" or both`},
		{name: "ttl wrong method", method: "POST", path: "/v1/cache/ttl", body: `{}`, header: admin, status: 405, want: "allowed: PUT"},
		{name: "pin not cached", path: "/v1/cache/pin", body: `{"prompt_ids": [1,2,3,4,5,6,7,8,9,10]}`, header: admin, status: 404, want: "not cached"},
		{name: "pin no prompt", path: "/v1/cache/pin", body: `{"namespace": "x"}`, header: admin, status: 400, want: "exactly one of prompt and prompt_ids"},
		{name: "pin token outside vocabulary", path: "/v1/cache/unpin", body: `{"prompt_ids": [1, 999]}`, header: admin, status: 400, want: "outside the vocabulary"},
	}
}

// gzipped returns s gzip-encoded.
func gzipped(s string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

func TestBadInput(t *testing.T) {
	h := newHarness(t, withServer(func(c *Config) { c.MaxBodyBytes = 64 << 10 }))
	cases := badInputs()
	if len(cases) < 25 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method, path := c.method, c.path
			if method == "" {
				method = "POST"
			}
			if path == "" {
				path = "/generate"
			}
			code, b, hdr := h.do(method, path, c.body, c.header...)
			if code != c.status {
				t.Fatalf("status %d, want %d; body %s", code, c.status, b)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Param   string `json:"param"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("error body %s: %v", b, err)
			}
			if strings.Contains(string(b), "openAIParams") || strings.HasSuffix(e.Error.Message, "got number number") {
				t.Errorf("error names Go internals: %s", b)
			}
			if !strings.Contains(e.Error.Message, c.want) {
				t.Errorf("message %q does not say %q", e.Error.Message, c.want)
			}
			if e.Error.Type == "" {
				t.Errorf("no error type in %s", b)
			}
			if c.param != "" && e.Error.Param != c.param {
				t.Errorf("param %q, want %q", e.Error.Param, c.param)
			}
			if code == 405 && hdr.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
	// The server still works, and no bad request left anything behind.
	h.generate(`{"prompt": "still alive", "max_tokens": 2}`)
	h.checkDrained()
}

func TestAdminDisabled(t *testing.T) {
	h := newHarness(t, withServer(func(c *Config) { c.AdminToken = "" }))
	for _, p := range []string{"/v1/cache", "/v1/cache/prefixes"} {
		code, b, _ := h.do("GET", p, "", "Authorization", "Bearer anything")
		if code != 403 || !strings.Contains(string(b), "admin endpoints are disabled") {
			t.Errorf("%s: %d %s", p, code, b)
		}
	}
}

func TestPanicIsA500(t *testing.T) {
	h := newHarness(t)
	// Called directly: the route table is not changed under the listener.
	h.srv.routes["/boom"] = &route{name: "/boom", allow: "GET", methods: map[string]fasthttp.RequestHandler{
		"GET": func(*fasthttp.RequestCtx) { panic("boom") },
	}}
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/boom")
	h.srv.Handler()(&ctx)
	if code, b := ctx.Response.StatusCode(), ctx.Response.Body(); code != 500 || !strings.Contains(string(b), `"internal error"`) {
		t.Errorf("%d %s", code, b)
	}
}

func TestHeadOnGetRoutes(t *testing.T) {
	h := newHarness(t)
	for _, p := range []string{"/metrics", "/healthz", "/v1/models"} {
		code, body, _ := h.do("HEAD", p, "")
		if code != 200 || len(body) != 0 {
			t.Errorf("HEAD %s: %d with %d body bytes", p, code, len(body))
		}
	}
	if code, _, _ := h.do("HEAD", "/generate", ""); code != 405 {
		t.Errorf("HEAD /generate: %d, want 405", code)
	}
}

// TestLogprobEntriesBounded: an answer that is not streamed is built whole
// in memory, so n × max_tokens × (1 + top_logprobs) is bounded by
// MaxLogprobEntries, and a 400 names the limit; a streamed request, or one
// within the limit, runs.
func TestLogprobEntriesBounded(t *testing.T) {
	h := newHarness(t, withServer(func(c *Config) { c.MaxLogprobEntries = 100 }))
	chat := func(extra string) string {
		return `{"messages": [{"role": "user", "content": "a"}], "logprobs": true, "top_logprobs": 20, "n": 2` + extra + `}`
	}
	for _, c := range []struct {
		path, body, param string
	}{
		{"/v1/chat/completions", chat(`, "max_tokens": 3`), "max_tokens"}, // 2 × 3 × 21 = 126
		{"/v1/chat/completions", chat(`, "max_completion_tokens": 3`), "max_completion_tokens"},
		{"/v1/completions", `{"prompt": "a", "logprobs": 4, "max_tokens": 21}`, "max_tokens"},
	} {
		code, b, _ := h.do("POST", c.path, c.body)
		var e struct {
			Error apiError `json:"error"`
		}
		if code != 400 || json.Unmarshal(b, &e) != nil || e.Error.Param != c.param ||
			!strings.Contains(e.Error.Message, "above the limit of 100") || !strings.Contains(e.Error.Message, "not streamed on this server") {
			t.Errorf("%s %s: %d %s, want a 400 naming %s and the limit", c.path, c.body, code, b, c.param)
		}
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt": "a", "logprobs": 4, "max_tokens": 20}`}, // 100: at the limit
		{"/v1/chat/completions", chat(`, "max_tokens": 2`)},                     // 2 × 2 × 21 = 84
		{"/v1/completions", `{"prompt": "a", "n": 4, "max_tokens": 30}`},        // no logprobs
	} {
		if code, b, _ := h.do("POST", c.path, c.body); code != 200 {
			t.Errorf("%s %s: %d %s, want 200", c.path, c.body, code, b)
		}
	}
	s := h.stream("/v1/chat/completions", chat(`, "max_tokens": 3, "stream": true`))
	for {
		if _, err := s.next(); err != nil {
			if err != io.EOF {
				t.Errorf("streamed request above the limit: %v", err)
			}
			break
		}
	}
	s.close()
	h.checkDrained()
}
