package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/model"
)

// chatModel is a tiny random Llama around GPT-2's vocabulary plus ChatML's
// markers and a chat template (model.ChatMLTemplate), loaded once.
var chatModel = sync.OnceValues(func() (*model.Model, error) {
	meta, tokens, err := model.TokenizerMetadata(filepath.Join("..", "..", "shared", "models", "vocab", "ggml-vocab-gpt-2.gguf"))
	if err != nil {
		return nil, err
	}
	if meta, err = model.WithChatML(meta, model.ChatMLTemplate); err != nil {
		return nil, err
	}
	c := model.Config{Dim: 16, Hidden: 32, Layers: 1, Heads: 2, KVHeads: 1, Vocab: tokens + 2 + 8, MaxSeqLen: 1024,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1}
	m := model.Random(c, 1)
	m.Name = "tiny-chat"
	var buf bytes.Buffer
	if err := model.WriteGGUF(&buf, m, kernels.F32, meta...); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "prefixd-chat")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "chat.gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return model.Load(path)
})

// GPT-2's token IDs (its published vocabulary) and the two markers the
// chat model appends to it.
const (
	tokIMStart = 50257
	tokIMEnd   = 50258
)

func newChatHarness(t *testing.T, opts ...option) *harness {
	t.Helper()
	m, err := chatModel()
	if err != nil {
		t.Fatal(err)
	}
	return newHarness(t, append([]option{withModel(m)}, opts...)...)
}

// chatResp mirrors what an OpenAI client reads from a chat completion.
type chatResp struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Logprobs *struct {
			Content []struct {
				Token       string  `json:"token"`
				Logprob     float64 `json:"logprob"`
				Bytes       []byte  `json:"-"`
				TopLogprobs []struct {
					Token   string  `json:"token"`
					Logprob float64 `json:"logprob"`
				} `json:"top_logprobs"`
			} `json:"content"`
		} `json:"logprobs"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage completionUsage `json:"usage"`
}

func TestTokenizeAndDetokenize(t *testing.T) {
	h := newChatHarness(t)
	var tr tokenizeResponse
	// The model's own template (with its default system message), its
	// markers as single tokens, the rest GPT-2's tokens: system \n You are
	// a tiny test model . / user \n Hi / ass istant \n.
	h.post("/tokenize", `{"messages": [{"role": "user", "content": "Hi"}]}`, &tr)
	want := []int32{tokIMStart, 10057, 198, 1639, 389, 257, 7009, 1332, 2746, 13, tokIMEnd, 198,
		tokIMStart, 7220, 198, 17250, tokIMEnd, 198, tokIMStart, 562, 10167, 198}
	if !slices.Equal(tr.Tokens, want) || tr.Count != len(want) || tr.MaxModelLen != 1024 {
		t.Fatalf("tokenize messages: %+v, want tokens %v", tr, want)
	}
	h.post("/tokenize", `{"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": false}`, &tr)
	if !slices.Equal(tr.Tokens, want[:len(want)-4]) {
		t.Fatalf("without the generation prompt: %v", tr.Tokens)
	}
	// A prompt that spells a marker gets the marker; GPT-2 adds no BOS.
	h.post("/tokenize", `{"prompt": "<|im_start|>Hi"}`, &tr)
	if !slices.Equal(tr.Tokens, []int32{tokIMStart, 17250}) {
		t.Fatalf("tokenize prompt: %v", tr.Tokens)
	}
	var dr detokenizeResponse
	h.post("/detokenize", `{"tokens": [15496, 995]}`, &dr)
	if dr.Prompt != "Hello world" {
		t.Fatalf("detokenize: %q", dr.Prompt)
	}
	for _, c := range []struct{ path, body, param string }{
		{"/tokenize", `{}`, "prompt"},
		{"/tokenize", `{"prompt": "a", "messages": [{"role": "user", "content": "b"}]}`, "prompt"},
		{"/tokenize", `{"messages": [{"role": "function", "content": "b"}]}`, "messages[0].role"},
		{"/tokenize", `{"messages": [{"role": "tool", "content": "b"}]}`, "messages[0].tool_call_id"},
		{"/tokenize", `{"prompt": "a", "extra": 1}`, "extra"},
		{"/detokenize", `{"tokens": [1, 99999999]}`, "tokens"},
		{"/detokenize", `{}`, "tokens"},
	} {
		code, b, _ := h.do("POST", c.path, c.body)
		var e struct{ Error apiError }
		json.Unmarshal(b, &e)
		if code != 400 || e.Error.Param != c.param {
			t.Errorf("%s %s: %d %s, want 400 naming %s", c.path, c.body, code, b, c.param)
		}
	}
}

func TestChatCompletions(t *testing.T) {
	h := newChatHarness(t)
	body := `{"model": "tiny-chat", "messages": [{"role": "user", "content": "Tell me a story about a dragon who lived in a cave by the sea."}],
		"max_tokens": 6, "seed": 7, "user": "u1"}`
	var r chatResp
	h.post("/v1/chat/completions", body, &r)
	if r.Object != "chat.completion" || !strings.HasPrefix(r.ID, "chatcmpl-") || r.Model != "tiny-chat" || len(r.Choices) != 1 {
		t.Fatalf("envelope %+v", r)
	}
	c := r.Choices[0]
	if c.Message.Role != "assistant" || c.FinishReason != "length" || c.Logprobs != nil ||
		r.Usage.CompletionTokens != 6 || r.Usage.TotalTokens != r.Usage.PromptTokens+6 {
		t.Fatalf("choice %+v usage %+v", c, r.Usage)
	}
	var tr tokenizeResponse
	h.post("/tokenize", `{"messages": [{"role": "user", "content": "Tell me a story about a dragon who lived in a cave by the sea."}]}`, &tr)
	if r.Usage.PromptTokens != tr.Count {
		t.Fatalf("prompt tokens %d, /tokenize counts %d", r.Usage.PromptTokens, tr.Count)
	}

	// Streaming: the role first, then content that adds up to the same
	// reply (same seed), a finishing chunk, the usage chunk, [DONE].
	s := h.stream("/v1/chat/completions", strings.Replace(body, `"seed": 7`, `"seed": 7, "stream": true, "stream_options": {"include_usage": true}`, 1))
	defer s.close()
	var text strings.Builder
	var events []chatChunk
	for {
		data, err := s.next()
		if err != nil {
			t.Fatal(err)
		}
		if data == "[DONE]" {
			break
		}
		var ch chatChunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		if ch.Object != "chat.completion.chunk" {
			t.Fatalf("chunk %s", data)
		}
		events = append(events, ch)
		for _, c := range ch.Choices {
			if c.Delta.Content != nil {
				text.WriteString(*c.Delta.Content)
			}
		}
	}
	first, fin, usage := events[0], events[len(events)-2], events[len(events)-1]
	if first.Choices[0].Delta.Role != "assistant" || fin.Choices[0].FinishReason == nil || *fin.Choices[0].FinishReason != "length" ||
		len(usage.Choices) != 0 || usage.Usage == nil || usage.Usage.CompletionTokens != 6 {
		t.Fatalf("first %+v, finishing %+v, usage %+v", first, fin, usage)
	}
	if text.String() != c.Message.Content {
		t.Fatalf("streamed %q, reply %q", text.String(), c.Message.Content)
	}
	h.checkDrained()
}

// TestChatStopsAtEndOfTurn: a reply ends at <|im_end|>, the end-of-turn
// token, which it does not include. logit_bias makes the model say it.
func TestChatStopsAtEndOfTurn(t *testing.T) {
	h := newChatHarness(t)
	var r chatResp
	h.post("/v1/chat/completions", fmt.Sprintf(`{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 20,
		"logit_bias": {"%d": 100}}`, tokIMEnd), &r)
	if c := r.Choices[0]; c.FinishReason != "stop" || c.Message.Content != "" || r.Usage.CompletionTokens != 0 {
		t.Fatalf("choice %+v usage %+v: want an empty reply stopped at <|im_end|>", c, r.Usage)
	}
	h.checkDrained()
}

// TestChatTurnsHitThePrefixCache: the second turn of a conversation reuses
// the first turn's blocks.
func TestChatTurnsHitThePrefixCache(t *testing.T) {
	h := newChatHarness(t)
	user1 := `{"role": "user", "content": "I am planning a long trip through the mountains of Norway next summer, with a tent and a small stove."}`
	var r1, r2 chatResp
	h.post("/v1/chat/completions", `{"messages": [`+user1+`], "max_tokens": 8, "temperature": 0}`, &r1)
	reply, _ := json.Marshal(r1.Choices[0].Message.Content)
	h.post("/v1/chat/completions", `{"messages": [`+user1+`, {"role": "assistant", "content": `+string(reply)+`},
		{"role": "user", "content": "What should I pack?"}], "max_tokens": 4, "temperature": 0}`, &r2)
	const blockSize = 8 // the harness's
	want := r1.Usage.PromptTokens / blockSize * blockSize
	if r1.Usage.PromptTokensDetails.CachedTokens != 0 || r2.Usage.PromptTokensDetails.CachedTokens < want {
		t.Fatalf("turn 1 cached %d, turn 2 cached %d of %d: want turn 1's %d prompt tokens' whole blocks (%d)",
			r1.Usage.PromptTokensDetails.CachedTokens, r2.Usage.PromptTokensDetails.CachedTokens, r2.Usage.PromptTokens,
			r1.Usage.PromptTokens, want)
	}
	h.checkDrained()
}

func TestChatChoicesAndLogprobs(t *testing.T) {
	h := newChatHarness(t)
	var r chatResp
	h.post("/v1/chat/completions", `{"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 5, "n": 3, "seed": 1,
		"logprobs": true, "top_logprobs": 2, "frequency_penalty": 0.5, "presence_penalty": 0.2, "top_k": 50, "repetition_penalty": 1.1}`, &r)
	if len(r.Choices) != 3 || r.Usage.CompletionTokens != 15 {
		t.Fatalf("%d choices, usage %+v", len(r.Choices), r.Usage)
	}
	for i, c := range r.Choices {
		if c.Index != i || c.Logprobs == nil || len(c.Logprobs.Content) != 5 {
			t.Fatalf("choice %d: %+v", i, c)
		}
		for _, e := range c.Logprobs.Content {
			if e.Logprob > 0 || len(e.TopLogprobs) != 2 || e.TopLogprobs[0].Logprob < e.TopLogprobs[1].Logprob ||
				e.Logprob > e.TopLogprobs[0].Logprob+1e-6 || math.IsNaN(e.Logprob) {
				t.Fatalf("choice %d entry %+v", i, e)
			}
		}
	}
	h.checkDrained()
}

func TestChatRefusals(t *testing.T) {
	h := newChatHarness(t)
	for _, c := range []struct {
		body, param, want string
	}{
		{`{"messages": [{"role": "user", "content": "a"}], "functions": []}`, "functions", "not supported"},
		{`{"messages": [{"role": "user", "content": "a"}], "response_format": {"type": "xml"}}`, "response_format.type", "must be text, json_object or json_schema"},
		{`{"messages": [{"role": "user", "content": "a"}], "audio": {}}`, "audio", "not supported"},
		{`{"messages": [{"role": "user", "content": "a"}], "frobnicate": 1}`, "frobnicate", "unknown field"},
		{`{"messages": []}`, "messages", "at least one"},
		{`{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}`, "messages[0].content[0]", "text parts only"},
		{`{"messages": [{"role": "user", "content": "a"}], "top_logprobs": 2}`, "top_logprobs", "needs logprobs"},
		{`{"messages": [{"role": "user", "content": "a"}], "n": 0}`, "n", "n must be in"},
		{`{"messages": [{"role": "user", "content": "a"}], "frequency_penalty": 3}`, "frequency_penalty", "[-2, 2]"},
		{`{"messages": [{"role": "user", "content": "a"}], "logit_bias": {"x": 1}}`, "logit_bias", "not a token ID"},
		{`{"messages": [{"role": "user", "content": "a"}], "stream_options": {"include_usage": true}}`, "stream_options", "needs stream"},
		{`{"messages": [{"role": "user", "content": "a"}], "max_completion_tokens": 0}`, "max_tokens", "max_tokens must be in"},
	} {
		h.expect400("/v1/chat/completions", c.body, c.param, c.want)
	}
	h.checkDrained()
}

// TestChatOnTheBuiltinModel: a byte vocabulary has no control tokens;
// chat still works, with ChatML's markers as plain text.
func TestChatOnTheBuiltinModel(t *testing.T) {
	h := newHarness(t)
	var r chatResp
	h.post("/v1/chat/completions", `{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}`, &r)
	// BOS, then the bytes of <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n.
	if want := 1 + len("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"); r.Usage.PromptTokens != want || len(r.Choices) != 1 {
		t.Fatalf("usage %+v, want %d prompt tokens", r.Usage, want)
	}
	h.checkDrained()
}

// TestCompletionsChoicesStream: n = 2 streams both choices, each adding up
// to the non-streamed choice of the same seed, with completions' logprobs.
func TestCompletionsChoicesStream(t *testing.T) {
	h := newHarness(t)
	body := `{"prompt": "Once upon a time", "max_tokens": 5, "n": 2, "seed": 4, "logprobs": 2}`
	var r completionResponse
	h.post("/v1/completions", body, &r)
	if len(r.Choices) != 2 || r.Usage.CompletionTokens != 10 {
		t.Fatalf("choices %+v usage %+v", r.Choices, r.Usage)
	}
	for i, c := range r.Choices {
		lp, _ := json.Marshal(c.Logprobs)
		var l completionLogprobs
		json.Unmarshal(lp, &l)
		if c.Index != i || len(l.Tokens) != 5 || len(l.TokenLogprobs) != 5 || len(l.TopLogprobs) != 5 || l.TextOffset[0] != 0 {
			t.Fatalf("choice %d logprobs %s", i, lp)
		}
		for j, v := range l.TokenLogprobs {
			if v > 0 || len(l.TopLogprobs[j]) == 0 || len(l.TopLogprobs[j]) > 2 {
				t.Fatalf("choice %d token %d: %s", i, j, lp)
			}
		}
	}
	s := h.stream("/v1/completions", strings.Replace(body, `"n": 2`, `"n": 2, "stream": true`, 1))
	defer s.close()
	texts := make([]strings.Builder, 2)
	finished := 0
	for {
		data, err := s.next()
		if err != nil {
			t.Fatal(err)
		}
		if data == "[DONE]" {
			break
		}
		var c completionResponse
		if err := json.Unmarshal([]byte(data), &c); err != nil || len(c.Choices) != 1 || c.Usage != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		ch := c.Choices[0]
		texts[ch.Index].WriteString(ch.Text)
		if ch.FinishReason != nil {
			finished++
		}
	}
	for i := range texts {
		if texts[i].String() != r.Choices[i].Text {
			t.Errorf("choice %d streamed %q, want %q", i, texts[i].String(), r.Choices[i].Text)
		}
	}
	if finished != 2 {
		t.Fatalf("%d finishing chunks, want 2", finished)
	}
	h.checkDrained()
}

// TestUserIsALabel: an OpenAI request's user field reaches the access log,
// cut to 64 bytes, and the request's text does not.
func TestUserIsALabel(t *testing.T) {
	var logs logBuffer
	h := newChatHarness(t, withLogCapture(&logs))
	long := strings.Repeat("u", 100)
	var r chatResp
	h.post("/v1/chat/completions", `{"messages": [{"role": "user", "content": "secret words"}], "max_tokens": 2, "user": "alice", "n": 2}`, &r)
	var c completionResponse
	h.post("/v1/completions", `{"prompt": "more secret words", "max_tokens": 2, "user": "`+long+`", "stream": false}`, &c)
	h.srv.Shutdown(t.Context())
	out := logs.String()
	if !strings.Contains(out, "path=/v1/chat/completions status=200 namespace=\"\" user=alice prompt_tokens=") ||
		!strings.Contains(out, "completion_tokens=4 ") || !strings.Contains(out, "user="+long[:64]+" ") {
		t.Fatalf("access log lacks the user labels or the choices' tokens:\n%s", out)
	}
	if strings.Contains(out, "secret") {
		t.Fatalf("the log holds request text:\n%s", out)
	}
}

func TestTokenString(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want string
	}{{[]byte(" verse"), " verse"}, {[]byte{0xe2, 0x80}, `bytes:\xe2\x80`}, {[]byte{}, ""}} {
		if got := tokenString(c.in); got != c.want {
			t.Errorf("tokenString(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
