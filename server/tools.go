package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/grammar"
)

// Tools in chat: the tools are rendered by the model's chat template (its
// `tools` variable), a call is written as the model's family writes one
// (see callStyle), forced calls are constrained to that form with each
// function's parameters as the arguments' schema, and a reply that is a
// call comes back as tool_calls.

// chatTool is one entry of a chat request's tools.
type chatTool struct {
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

// toolFunction is a tool's function.
type toolFunction struct {
	schemaLabel
	Parameters json.RawMessage `json:"parameters"`
}

// toolCall is a call in a reply's tool_calls.
type toolCall struct {
	Index    *int         `json:"index,omitempty"` // streamed deltas only
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function toolCallFunc `json:"function"`
}

// toolCallFunc is a call's function and its arguments as JSON text.
type toolCallFunc struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// maxTools bounds a request's tools.
const maxTools = 128

// toolPlan is what a chat request's tools ask for.
type toolPlan struct {
	tools []chatTool
	mode  string // none, auto, required, or "function" for a named one
	name  string // the named function
	style callStyle
}

// callStyle is how a model family writes a tool call: the JSON object
// {"name": ..., argsKey: {...}} between prefix and suffix.
type callStyle struct {
	name           string
	prefix, suffix string
	argsKey        string
}

// The call styles of the families whose templates take tools.
var (
	hermesStyle  = callStyle{"hermes", "<tool_call>\n", "\n</tool_call>", "arguments"} // Hermes, Qwen 2.5 and 3
	mistralStyle = callStyle{"mistral", "[TOOL_CALLS][", "]", "arguments"}             // Mistral's v3 tokenizer
	llama3Style  = callStyle{"llama3", "", "", "parameters"}                           // Llama 3.1+ JSON calls
	jsonStyle    = callStyle{"json", "", "", "arguments"}                              // anything else
)

// active reports whether the reply may be a tool call.
func (tp *toolPlan) active() bool { return tp != nil && tp.mode != "none" }

// toolStyle picks how the model writes a call from the marker tokens its
// vocabulary holds: <tool_call> (Hermes, Qwen), [TOOL_CALLS] (Mistral),
// <|python_tag|> (Llama 3.1 and later); else the bare JSON object.
func (s *Server) toolStyle() callStyle {
	se, ok := s.cfg.Tokenizer.(specialEncoder)
	if !ok {
		return jsonStyle
	}
	one := func(marker string) bool { return len(se.EncodeSpecial(marker)) == 1 }
	switch {
	case one("<tool_call>"):
		return hermesStyle
	case one("[TOOL_CALLS]"):
		return mistralStyle
	case one("<|python_tag|>"):
		return llama3Style
	}
	return jsonStyle
}

// parseTools validates tools and tool_choice.
func (c *chatRequest) parseTools(style callStyle) (*toolPlan, *apiError) {
	hasChoice := len(c.ToolChoice) > 0 && string(c.ToolChoice) != "null"
	if len(c.Tools) == 0 {
		if hasChoice {
			return nil, badRequest("tool_choice", "tool_choice needs tools")
		}
		return nil, nil
	}
	if len(c.Tools) > maxTools {
		return nil, badRequest("tools", "at most %d tools, got %d", maxTools, len(c.Tools))
	}
	tp := &toolPlan{tools: c.Tools, mode: "auto", style: style}
	seen := map[string]bool{}
	for i, t := range c.Tools {
		param := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Type != "function":
			return nil, badRequest(param+".type", "tool type must be function, got %q", t.Type)
		case t.Function.Name == "" || len(t.Function.Name) > 64 || strings.Trim(t.Function.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "":
			return nil, badRequest(param+".function.name", "a function name is 1 to 64 letters, digits, _ and -, got %q", t.Function.Name)
		case seen[t.Function.Name]:
			return nil, badRequest(param+".function.name", "function %q is defined twice", t.Function.Name)
		}
		seen[t.Function.Name] = true
	}
	if hasChoice {
		var mode string
		if json.Unmarshal(c.ToolChoice, &mode) == nil {
			switch mode {
			case "none", "auto", "required":
				tp.mode = mode
			default:
				return nil, badRequest("tool_choice", "tool_choice must be none, auto, required or a function, got %q", mode)
			}
		} else {
			var named struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if err := decodeStrict(c.ToolChoice, &named); err != nil {
				err.Param = joinParam("tool_choice", err.Param)
				return nil, err
			}
			if named.Type != "function" || !seen[named.Function.Name] {
				return nil, badRequest("tool_choice", "tool_choice names function %q, which is not among the tools", named.Function.Name)
			}
			tp.mode, tp.name = "function", named.Function.Name
		}
	}
	return tp, nil
}

// templateTools is the tools as a chat template reads them (OpenAI's
// shape, parameters decoded).
func (tp *toolPlan) templateTools() ([]any, *apiError) {
	out := make([]any, len(tp.tools))
	for i, t := range tp.tools {
		fn := map[string]any{"name": t.Function.Name}
		if t.Function.Description != "" {
			fn["description"] = t.Function.Description
		}
		if len(t.Function.Parameters) > 0 {
			var p any
			if err := json.Unmarshal(t.Function.Parameters, &p); err != nil {
				return nil, badRequest(fmt.Sprintf("tools[%d].function.parameters", i), "parameters must be a JSON Schema: %v", err)
			}
			fn["parameters"] = p
		}
		out[i] = map[string]any{"type": "function", "function": fn}
	}
	return out, nil
}

// callSchema is the JSON Schema of a call to one of the tools (all, or
// the named one): {"name": const, argsKey: the parameters}.
func (tp *toolPlan) callSchema() []byte {
	var alts []string
	for _, t := range tp.tools {
		if tp.mode == "function" && t.Function.Name != tp.name {
			continue
		}
		params := t.Function.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object","additionalProperties":false}`)
		}
		name, _ := json.Marshal(t.Function.Name)
		alts = append(alts, fmt.Sprintf(`{"type":"object","properties":{"name":{"const":%s},%q:%s},"required":["name",%q],"additionalProperties":false}`,
			name, tp.style.argsKey, params, tp.style.argsKey))
	}
	return []byte(`{"anyOf":[` + strings.Join(alts, ",") + `]}`)
}

// constrain sets a forced call's grammar on req (tool_choice required or
// a named function). Each function's parameters are checked to compile
// even when not forced, so a bad schema is a 400 naming it.
func (tp *toolPlan) constrain(req *engine.Request, lim limits) *apiError {
	for i, t := range tp.tools {
		if len(t.Function.Parameters) == 0 || string(t.Function.Parameters) == "null" {
			continue
		}
		if _, err := grammar.CompileSchema(t.Function.Parameters, grammar.Limits{}); err != nil {
			return grammarError(fmt.Sprintf("tools[%d].function.parameters", i), err)
		}
	}
	if tp.mode != "required" && tp.mode != "function" {
		return nil
	}
	if req.Constraint != nil {
		return badRequest("tool_choice", "a forced tool call cannot be combined with response_format or structured_outputs")
	}
	schema := tp.callSchema()
	spec := &grammarSpec{"tools", "tools", append([]byte(tp.style.name+"\x00"), schema...),
		func() (*grammar.Grammar, error) {
			return grammar.CompileSchemaWithin(schema, tp.style.prefix, tp.style.suffix, grammar.Limits{})
		}}
	return spec.apply(req, lim)
}

// parseCall reads a reply as a tool call: the call style's wrapper (if
// any) around {"name", argsKey} naming one of the tools ("arguments" and
// "parameters" are both taken). ok is false for a reply that is not a
// call.
func (tp *toolPlan) parseCall(text string, id string) (toolCall, bool) {
	body := strings.TrimSpace(text)
	if tp.style.prefix != "" {
		p, s := strings.TrimSpace(tp.style.prefix), strings.TrimSpace(tp.style.suffix)
		if !strings.HasPrefix(body, p) || !strings.HasSuffix(body, s) {
			return toolCall{}, false
		}
		body = strings.TrimSpace(body[len(p) : len(body)-len(s)])
	}
	var call struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	if dec.Decode(&call) != nil || dec.More() {
		return toolCall{}, false
	}
	if len(call.Arguments) == 0 {
		call.Arguments = call.Parameters
	}
	if len(call.Arguments) == 0 {
		return toolCall{}, false
	}
	known := false
	for _, t := range tp.tools {
		known = known || t.Function.Name == call.Name
	}
	if !known {
		return toolCall{}, false
	}
	var args bytes.Buffer
	if json.Compact(&args, call.Arguments) != nil {
		return toolCall{}, false
	}
	return toolCall{ID: id, Type: "function", Function: toolCallFunc{Name: call.Name, Arguments: args.String()}}, true
}

// toolFields reads an assistant turn's tool_calls and a tool result's
// tool_call_id into the fields a chat template reads, nil when the
// message has neither.
func toolFields(m chatMessage, param string) (map[string]any, *apiError) {
	hasCalls, hasID := !isNull(m.ToolCalls), !isNull(m.ToolCallID)
	switch {
	case hasCalls && m.Role != "assistant":
		return nil, badRequest(param+".tool_calls", "only assistant messages carry tool_calls")
	case hasID && m.Role != "tool":
		return nil, badRequest(param+".tool_call_id", "only tool messages carry tool_call_id")
	case m.Role == "tool" && !hasID:
		return nil, badRequest(param+".tool_call_id", "a tool message needs the tool_call_id it answers")
	}
	if hasID {
		var id string
		if json.Unmarshal(m.ToolCallID, &id) != nil {
			return nil, badRequest(param+".tool_call_id", "tool_call_id must be a string")
		}
		return map[string]any{"tool_call_id": id}, nil
	}
	if !hasCalls {
		return nil, nil
	}
	var calls []toolCall
	if err := json.Unmarshal(m.ToolCalls, &calls); err != nil {
		return nil, badRequest(param+".tool_calls", "tool_calls must be an array of calls: %v", err)
	}
	out := make([]any, len(calls))
	for j, c := range calls {
		if c.Type != "function" || c.Function.Name == "" {
			return nil, badRequest(fmt.Sprintf("%s.tool_calls[%d]", param, j), "a call needs type function and a function name")
		}
		// Templates read the arguments as an object (vLLM decodes them
		// too); text that is not JSON stays text.
		var args any = c.Function.Arguments
		var decoded any
		if d := json.NewDecoder(strings.NewReader(c.Function.Arguments)); d.Decode(&decoded) == nil && !d.More() {
			args = decoded
		}
		out[j] = map[string]any{"id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Function.Name, "arguments": args}}
	}
	return map[string]any{"tool_calls": out}, nil
}
