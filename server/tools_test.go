package server

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/chat"
	"github.com/prefixd/prefixd/grammar"
	"github.com/prefixd/prefixd/internal/schematest"
	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/tokenizer/bpe"
)

const weatherTools = `[
 {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}, "unit": {"enum": ["C", "F"]}}, "required": ["city", "unit"], "additionalProperties": false}}},
 {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "integer", "minimum": -12, "maximum": 14}}, "required": ["zone"]}}}]`

type toolChatResp struct {
	Choices []struct {
		Message struct {
			Content   *string    `json:"content"`
			ToolCalls []toolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

// TestToolCallsForced: with tool_choice required (or naming a function)
// a random model's reply is always a call of a listed function whose
// arguments validate against its parameters: 200 of 200 seeded replies.
func TestToolCallsForced(t *testing.T) {
	h := newChatHarness(t)
	params := map[string]string{
		"get_weather": `{"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}, "unit": {"enum": ["C", "F"]}}, "required": ["city", "unit"], "additionalProperties": false}`,
		"get_time":    `{"type": "object", "properties": {"zone": {"type": "integer", "minimum": -12, "maximum": 14}}, "required": ["zone"]}`,
	}
	seeds := 25 // 2 choices x 25 seeds x n = 4: 200 replies
	if testing.Short() {
		seeds = 3
	}
	calls := 0
	for _, choice := range []string{`"required"`, `{"type": "function", "function": {"name": "get_time"}}`} {
		for seed := range seeds {
			var r toolChatResp
			h.post("/v1/chat/completions", fmt.Sprintf(`{"messages": [{"role": "user", "content": "Weather?"}], "max_tokens": 80, "seed": %d, "n": 4,
				"tools": %s, "tool_choice": %s}`, seed, weatherTools, choice), &r)
			for _, c := range r.Choices {
				calls++
				if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.Content != nil {
					t.Fatalf("%s seed %d: %+v", choice, seed, c)
				}
				call := c.Message.ToolCalls[0]
				if !strings.HasPrefix(call.ID, "call_") || call.Type != "function" {
					t.Fatalf("call %+v", call)
				}
				if strings.Contains(choice, "get_time") && call.Function.Name != "get_time" {
					t.Fatalf("tool_choice named get_time, the call is to %s", call.Function.Name)
				}
				schema, ok := params[call.Function.Name]
				if !ok {
					t.Fatalf("call to unknown function %q", call.Function.Name)
				}
				mustValidate(t, schematest.MustCompile(t, schema), call.Function.Arguments)
			}
		}
	}
	if calls != 2*seeds*4 {
		t.Fatalf("%d calls checked, want %d", calls, 2*seeds*4)
	}
	h.checkDrained()
}

// TestToolCallsStreamed: a forced call streams as one tool_calls delta.
func TestToolCallsStreamed(t *testing.T) {
	h := newChatHarness(t)
	s := h.stream("/v1/chat/completions", `{"messages": [{"role": "user", "content": "Time?"}], "max_tokens": 60, "seed": 2, "stream": true,
		"tools": `+weatherTools+`, "tool_choice": {"type": "function", "function": {"name": "get_time"}}}`)
	defer s.close()
	var calls []toolCall
	finish := ""
	for _, ch := range s.chatChunks(t) {
		for _, c := range ch.Choices {
			if c.Delta.Content != nil && *c.Delta.Content != "" {
				t.Fatalf("content %q streamed in a forced call", *c.Delta.Content)
			}
			calls = append(calls, c.Delta.ToolCalls...)
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if finish != "tool_calls" || len(calls) != 1 || calls[0].Index == nil || *calls[0].Index != 0 || calls[0].Function.Name != "get_time" {
		t.Fatalf("finish %q, calls %+v", finish, calls)
	}
	h.checkDrained()
}

// TestToolChoiceNone: tools rendered, the reply is plain content.
func TestToolChoiceNone(t *testing.T) {
	h := newChatHarness(t)
	var r toolChatResp
	h.post("/v1/chat/completions", `{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5, "tools": `+weatherTools+`, "tool_choice": "none"}`, &r)
	if c := r.Choices[0]; c.Message.Content == nil || len(c.Message.ToolCalls) != 0 || c.FinishReason == "tool_calls" {
		t.Fatalf("tool_choice none: %+v", c)
	}
	h.checkDrained()
}

func TestToolErrors(t *testing.T) {
	h := newChatHarness(t)
	msg := `"messages": [{"role": "user", "content": "a"}], "max_tokens": 4`
	for _, c := range []struct{ body, param, want string }{
		{`"tool_choice": "required"`, "tool_choice", "needs tools"},
		{`"tools": [{"type": "retrieval", "function": {"name": "x"}}]`, "tools[0].type", "must be function"},
		{`"tools": [{"type": "function", "function": {"name": "a b"}}]`, "tools[0].function.name", "letters"},
		{`"tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]`, "tools[1].function.name", "twice"},
		{`"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"not": {}}}}}}]`,
			"tools[0].function.parameters", "#/properties/a/not"},
		{`"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "sometimes"`, "tool_choice", "must be none"},
		{`"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}`, "tool_choice", "not among the tools"},
		{`"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required", "response_format": {"type": "json_object"}`, "tool_choice", "cannot be combined"},
	} {
		h.expect400("/v1/chat/completions", `{`+msg+`, `+c.body+`}`, c.param, c.want)
	}
	h.checkDrained()
}

func TestToolCallParsing(t *testing.T) {
	tools := []chatTool{{Type: "function", Function: toolFunction{schemaLabel: schemaLabel{Name: "f"}}}}
	hermes := &toolPlan{tools: tools, mode: "auto", style: hermesStyle}
	mistral := &toolPlan{tools: tools, mode: "auto", style: mistralStyle}
	bare := &toolPlan{tools: tools, mode: "auto", style: jsonStyle}
	for _, c := range []struct {
		tp   *toolPlan
		text string
		ok   bool
		args string
	}{
		{hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}\n</tool_call>", true, `{"a":[1,2]}`},
		{hermes, `{"name":"f","arguments":{}}`, false, ""},
		{mistral, `[TOOL_CALLS][{"name":"f","arguments":{"x":1}}]`, true, `{"x":1}`},
		{bare, ` {"name":"f","arguments":{}} `, true, `{}`},
		{bare, `{"name":"f","parameters":{"b":true}}`, true, `{"b":true}`},
		{bare, `{"name":"g","arguments":{}}`, false, ""},
		{bare, `{"name":"f","arguments":{}} and more`, false, ""},
		{bare, `{"name":"f"}`, false, ""},
		{bare, `hello`, false, ""},
	} {
		call, ok := c.tp.parseCall(c.text, "call_1")
		if ok != c.ok || ok && (call.Function.Name != "f" || call.Function.Arguments != c.args || call.ID != "call_1") {
			t.Errorf("parseCall(%q) = %+v, %v", c.text, call, ok)
		}
	}
}

// TestToolsReachTheTemplate: the template sees tools in OpenAI's shape.
func TestToolsReachTheTemplate(t *testing.T) {
	tpl, err := chat.Parse(`{% for t in tools %}[{{ t.function.name }}:{{ t.function.parameters.type }}]{% endfor %}{% for m in messages %}{{ m.content }}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, withServer(func(c *Config) { c.ChatTemplate = tpl }))
	var plain, with chatResp
	h.post("/v1/chat/completions", `{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "temperature": 0}`, &plain)
	h.post("/v1/chat/completions", `{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "temperature": 0, "tool_choice": "none",
		"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}`, &with)
	if got, want := with.Usage.PromptTokens-plain.Usage.PromptTokens, len("[f:object]"); got != want {
		t.Fatalf("the tools added %d prompt tokens, want %d (the template's [f:object])", got, want)
	}
	h.checkDrained()
}

// TestToolTurnsReachTheTemplate: an assistant turn's tool_calls (with
// arguments decoded) and a tool result's tool_call_id reach the template.
func TestToolTurnsReachTheTemplate(t *testing.T) {
	tpl, err := chat.Parse(`{% for m in messages %}{{ m.role }}:{% if m.tool_calls %}{{ m.tool_calls[0].function.name }}({{ m.tool_calls[0].function.arguments.city }}){% else %}{{ m.content }}{% endif %}{% if m.tool_call_id %}#{{ m.tool_call_id }}{% endif %};{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, withServer(func(c *Config) { c.ChatTemplate = tpl }))
	var tr tokenizeResponse
	h.post("/tokenize", `{"add_generation_prompt": false, "messages": [{"role": "user", "content": "Weather?"},
		{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
		{"role": "tool", "tool_call_id": "c1", "content": "21C"}]}`, &tr)
	want := "user:Weather?;assistant:get_weather(Oslo);tool:21C#c1;"
	if got := (model.ByteTokenizer{}).Decode(tr.Tokens); !strings.HasSuffix(got, want) {
		t.Fatalf("rendered %q, want it to end %q", got, want)
	}
	msg := `{"role": "user", "content": "a"}`
	for _, c := range []struct{ body, param, want string }{
		{`{"role": "tool", "content": "x"}`, "messages[1].tool_call_id", "needs the tool_call_id"},
		{`{"role": "user", "content": "x", "tool_call_id": "c"}`, "messages[1].tool_call_id", "only tool messages"},
		{`{"role": "user", "content": "x", "tool_calls": []}`, "messages[1].tool_calls", "only assistant"},
		{`{"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {}}]}`, "messages[1].tool_calls[0]", "function name"},
		{`{"role": "assistant", "content": null, "tool_calls": 3}`, "messages[1].tool_calls", "array of calls"},
	} {
		h.expect400("/v1/chat/completions", `{"max_tokens": 2, "messages": [`+msg+`, `+c.body+`]}`, c.param, c.want)
	}
	h.checkDrained()
}

// TestToolStyles: the call style follows the vocabulary's markers, and a
// forced call's grammar admits that style's calls only.
func TestToolStyles(t *testing.T) {
	for _, c := range []struct {
		dir  string
		want callStyle
		call string
	}{
		{"qwen3", hermesStyle, "<tool_call>\n{\"name\":\"f\",\"arguments\":{\"n\":1}}\n</tool_call>"},
		{"llama3", jsonStyle, `{"name":"f","arguments":{"n":1}}`}, // Llama 3.0: no <|python_tag|>
	} {
		tk, err := bpe.LoadHF(filepath.Join("..", "..", "shared", "models", "tokenizers", c.dir))
		if err != nil {
			t.Skipf("tokenizer %s: %v", c.dir, err)
		}
		s := &Server{cfg: Config{Tokenizer: tk}}
		if got := s.toolStyle(); got != c.want {
			t.Fatalf("%s: style %+v, want %+v", c.dir, got, c.want)
		}
		tp := &toolPlan{mode: "required", style: c.want, tools: []chatTool{{Type: "function", Function: toolFunction{
			schemaLabel: schemaLabel{Name: "f"}, Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}}}}
		g, err := grammar.CompileSchemaWithin(tp.callSchema(), c.want.prefix, c.want.suffix, grammar.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if !g.Match([]byte(c.call)) || g.Match([]byte(`{"name":"g","arguments":{"n":1}}`)) {
			t.Fatalf("%s: the forced-call grammar does not admit exactly %q", c.dir, c.call)
		}
		if call, ok := tp.parseCall(c.call, "id"); !ok || call.Function.Arguments != `{"n":1}` {
			t.Fatalf("%s: parseCall(%q) = %+v, %v", c.dir, c.call, call, ok)
		}
	}
}
