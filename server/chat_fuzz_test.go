package server

import (
	"testing"

	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/model"
)

// chatFuzzSeeds are chat and OpenAI-parameter bodies, good and bad.
var chatFuzzSeeds = []string{
	`{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "n": 2, "logprobs": true, "top_logprobs": 3}`,
	`{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "a"}]}], "stream": true, "stream_options": {"include_usage": true}}`,
	`{"messages": [{"role": "user", "content": "a"}], "frequency_penalty": 1, "presence_penalty": -1, "repetition_penalty": 1.2, "min_p": 0.1, "top_k": 5, "logit_bias": {"65": -100}}`,
	`{"messages": [{"role": "assistant", "content": null}], "tools": []}`,
	`{"prompt": "x", "logprobs": 3, "max_completion_tokens": 5, "echo": true}`,
	`{"prompt": "x", "logit_bias": {"300": 1}, "n": 9}`,
	`{"messages": [{"role": "user", "content": "a"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 1, "maximum": 9}}}}}}`,
	`{"messages": [{"role": "user", "content": "a"}], "structured_outputs": {"regex": "[a-c]+", "choice": ["x"]}}`,
	`{"messages": [{"role": "user", "content": "a"}], "structured_outputs": {"grammar": "root ::= \"a\" root?"}}`,
	`{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c", "content": "ok"}],
	  "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"q": {"type": "string", "maxLength": 4}}}}}], "tool_choice": "required"}`,
}

// FuzzDecodeChat fuzzes /v1/chat/completions' decoding and validation on
// the built-in byte vocabulary with the built-in ChatML template.
func FuzzDecodeChat(f *testing.F) {
	setup, err := newChatSetup(model.ByteTokenizer{}, nil, false)
	if err != nil {
		f.Fatal(err)
	}
	s := &Server{cfg: Config{Tokenizer: model.ByteTokenizer{}, MaxPromptTokens: 1023}, chat: setup}
	for _, b := range chatFuzzSeeds {
		f.Add(b)
	}
	fuzzBodies(f, func(body []byte) (engine.Request, *apiError) {
		var c chatRequest
		if err := decodeRefusing(body, &c, unsupportedOpenAI); err != nil {
			return engine.Request{}, err
		}
		return c.toEngine(s, fuzzLimits())
	})
}
