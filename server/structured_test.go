package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/prefixd/prefixd/internal/schematest"
)

type completionResp struct {
	Choices []struct {
		Text         string `json:"text"`
		Index        int    `json:"index"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

func mustValidate(t *testing.T, s *jsonschema.Schema, text string) {
	t.Helper()
	if err := schematest.Validate(s, text); err != nil {
		t.Fatalf("output %q: %v", text, err)
	}
}

const personSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":6},"age":{"type":"integer","minimum":0,"maximum":120},"pets":{"type":"array","items":{"enum":["cat","dog"]},"maxItems":2}},"required":["name","age"],"additionalProperties":false}`

// TestStructuredCompletions: the built-in random model (byte vocabulary)
// at temperature 1 answers completions under response_format and every
// structured_outputs kind with text the constraint admits.
func TestStructuredCompletions(t *testing.T) {
	h := newHarness(t)
	val := schematest.MustCompile(t, personSchema)
	for seed := range 5 {
		var r completionResp
		h.post("/v1/completions", fmt.Sprintf(`{"prompt": "Person:", "max_tokens": 120, "seed": %d, "n": 2,
			"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": %s, "strict": true}}}`, seed, personSchema), &r)
		for _, c := range r.Choices {
			if c.FinishReason != "stop" {
				t.Fatalf("finish %q after %q", c.FinishReason, c.Text)
			}
			mustValidate(t, val, c.Text)
		}
	}
	var r completionResp
	h.post("/v1/completions", `{"prompt": "x", "max_tokens": 200, "seed": 3, "response_format": {"type": "json_object"}}`, &r)
	var obj map[string]any
	if got := r.Choices[0]; got.FinishReason == "stop" && json.Unmarshal([]byte(got.Text), &obj) != nil {
		t.Fatalf("json_object output %q is not an object", got.Text)
	}
	for _, c := range []struct {
		so    string
		check func(string) bool
	}{
		{`{"choice": ["yes", "no", "not sure"]}`, func(s string) bool { return s == "yes" || s == "no" || s == "not sure" }},
		{`{"regex": "[a-c]{2}-[0-9]{3}"}`, func(s string) bool {
			return len(s) == 6 && strings.IndexByte("abc", s[0]) >= 0 && strings.IndexByte("abc", s[1]) >= 0 && s[2] == '-'
		}},
		{`{"grammar": "root ::= \"(\" [0-9]+ (\",\" [0-9]+)? \")\""}`, func(s string) bool { return strings.HasPrefix(s, "(") && strings.HasSuffix(s, ")") }},
		{`{"json": "{\"type\":\"boolean\"}"}`, func(s string) bool { return s == "true" || s == "false" }},
		{`{"json": {"type":"integer","minimum":3,"maximum":7}}`, func(s string) bool { return len(s) == 1 && s[0] >= '3' && s[0] <= '7' }},
	} {
		for seed := range 3 {
			var r completionResp
			h.post("/v1/completions", fmt.Sprintf(`{"prompt": "x", "max_tokens": 40, "seed": %d, "structured_outputs": %s}`, seed, c.so), &r)
			if got := r.Choices[0]; got.FinishReason != "stop" || !c.check(got.Text) {
				t.Fatalf("%s: %q (%s)", c.so, got.Text, got.FinishReason)
			}
		}
	}
	h.checkDrained()
}

// TestStructuredChat runs chat on a GPT-2-vocabulary random model: the
// masks come from a real 50k BPE vocabulary.
func TestStructuredChat(t *testing.T) {
	h := newChatHarness(t)
	val := schematest.MustCompile(t, personSchema)
	for seed := range 3 {
		var r chatResp
		h.post("/v1/chat/completions", fmt.Sprintf(`{"messages": [{"role": "user", "content": "Who?"}], "max_tokens": 80, "seed": %d,
			"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": %s}}}`, seed, personSchema), &r)
		mustValidate(t, val, r.Choices[0].Message.Content)
	}
	h.checkDrained()
}

func TestStructuredErrors(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		body, param, want string
	}{
		{`"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"properties": {"a": {"type": "strin"}}}}}`,
			"response_format.json_schema.schema", "#/properties/a/type"},
		{`"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}`, "response_format.json_schema.schema", "needs"},
		{`"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}, "extra": 1}}`, "response_format.json_schema.extra", "unknown field"},
		{`"response_format": {"type": "yaml"}`, "response_format.type", "must be"},
		{`"structured_outputs": {"grammar": "root ::= \"a\"\nb ::= [x"}`, "structured_outputs.grammar", "line 2"},
		{`"structured_outputs": {"regex": "a(b"}`, "structured_outputs.regex", "bad regular expression"},
		{`"structured_outputs": {"regex": "a", "choice": ["b"]}`, "structured_outputs", "exactly one"},
		{`"structured_outputs": {}`, "structured_outputs", "exactly one"},
		{`"structured_outputs": {"whitespace_pattern": " "}`, "structured_outputs.whitespace_pattern", "unknown field"},
		{`"structured_outputs": {"choice": []}`, "structured_outputs.choice", "no options"},
		{`"structured_outputs": {"json": {"type": "object"}}, "response_format": {"type": "json_object"}`, "structured_outputs", "not both"},
		{`"structured_outputs": {"json": {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}}`, "structured_outputs.json", "left recursion"},
		{`"structured_outputs": {"grammar": "root ::= ((\"a\"?) | (\"b\"?)){0,40} \"c\""}`, "structured_outputs.grammar", "too ambiguous"},
	} {
		h.expect400("/v1/completions", `{"prompt": "x", "max_tokens": 4, `+c.body+`}`, c.param, c.want)
	}
	h.checkDrained()
}

// TestStructuredGenerate: /generate takes llama.cpp's json_schema and
// grammar fields.
func TestStructuredGenerate(t *testing.T) {
	h := newHarness(t)
	val := schematest.MustCompile(t, personSchema)
	for seed := range 3 {
		r := h.generate(fmt.Sprintf(`{"prompt": "Person:", "max_tokens": 120, "temperature": 1, "seed": %d, "json_schema": %s}`, seed, personSchema))
		mustValidate(t, val, r.Text)
	}
	r := h.generate(`{"prompt": "x", "max_tokens": 10, "temperature": 1, "grammar": "root ::= [ab]{3}"}`)
	if len(r.Text) != 3 || strings.Trim(r.Text, "ab") != "" {
		t.Fatalf("grammar [ab]{3} produced %q", r.Text)
	}
	for _, c := range []struct{ body, param, want string }{
		{`"json_schema": {"type": 1}`, "json_schema", "#/type"},
		{`"grammar": "root ::= ("`, "grammar", "line 1"},
		{`"grammar": "root ::= \"a\"", "json_schema": {}`, "grammar", "not both"},
		{`"grammar": "root ::= \"a\"", "beam_width": 2`, "grammar", "beam search"},
	} {
		h.expect400("/generate", `{"prompt": "x", "max_tokens": 4, `+c.body+`}`, c.param, c.want)
	}
	h.checkDrained()
}

// expect400 posts body to path and checks the answer is a 400 whose
// param is param and whose message holds want.
func (h *harness) expect400(path, body, param, want string) {
	h.t.Helper()
	code, b, _ := h.do("POST", path, body)
	var e struct{ Error apiError }
	json.Unmarshal(b, &e)
	if code != 400 || e.Error.Param != param || !strings.Contains(e.Error.Message, want) {
		h.t.Errorf("%s: %d %s, want 400 naming %s (%q)", body, code, b, param, want)
	}
}

// TestStructuredStreaming: streamed chat deltas under a schema join into
// text that validates, on the GPT-2-vocabulary model (tokens that hold
// part of a character are held back until it completes).
func TestStructuredStreaming(t *testing.T) {
	h := newChatHarness(t)
	val := schematest.MustCompile(t, personSchema)
	s := h.stream("/v1/chat/completions", `{"messages": [{"role": "user", "content": "Who?"}], "max_tokens": 80, "seed": 5, "stream": true,
		"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": `+personSchema+`}}}`)
	defer s.close()
	var text strings.Builder
	finish := ""
	for _, ch := range s.chatChunks(t) {
		for _, c := range ch.Choices {
			if c.Delta.Content != nil {
				text.WriteString(*c.Delta.Content)
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if finish != "stop" {
		t.Fatalf("finish %q after %q", finish, text.String())
	}
	mustValidate(t, val, text.String())
	h.checkDrained()
}

// chatChunks reads a chat stream's chunks up to [DONE].
func (s *sse) chatChunks(t *testing.T) []chatChunk {
	t.Helper()
	var chunks []chatChunk
	for {
		data, err := s.next()
		if err != nil {
			t.Fatal(err)
		}
		if data == "[DONE]" {
			return chunks
		}
		var ch chatChunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		chunks = append(chunks, ch)
	}
}
