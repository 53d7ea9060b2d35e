package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/prefixd/prefixd/chat"
	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/tokenizer/bpe"
)

// The tokenizer capabilities chat and /tokenize use when a Tokenizer has
// them (bpe.Tokenizer has all).
type (
	// specialEncoder encodes text in which the texts of control tokens
	// (<|im_start|>) become those tokens.
	specialEncoder interface {
		EncodeSpecial(text string) []int32
	}
	// turnEnder lists the tokens that end a turn besides EOS.
	turnEnder interface{ EOT() []int32 }
	// tokenTexter gives a token's text and a text's token.
	tokenTexter interface {
		TokenText(id int32) string
		TokenID(text string) (int32, bool)
	}
	// templated carries the model's own chat template ("" if none).
	templated interface{ ChatTemplate() string }
	// pieceHaver says whether a vocabulary without tokenTexter (a
	// SentencePiece one) holds a piece, for detecting its chat template.
	pieceHaver interface{ HasPiece(text string) bool }
	// bosAdder says whether prompts start with BOS.
	bosAdder interface{ AddBOS() bool }
)

// chatSetup is what chat rendering needs, fixed when the server starts.
type chatSetup struct {
	tpl      *chat.Template
	source   string  // where the template came from, for the log and errors
	bos, eos string  // the BOS and EOS tokens' texts, for templates
	eot      []int32 // stop tokens of a chat reply besides EOS
	// control are the texts of the tokenizer's control tokens, which stay
	// text in messages' contents; nil with Config.ChatSpecialInContent or
	// a tokenizer that cannot encode so (the whole rendered text is then
	// encoded with EncodeSpecial).
	control *chat.Plain
}

// plainEncoder encodes a rendered conversation with its messages' control
// token texts kept as text; bpe.Tokenizer is one.
type plainEncoder interface {
	EncodeSpecialExcept(text string, plain [][2]int) []int32
	VocabSize() int
	Type(id int32) bpe.TokenType
	TokenText(id int32) string
}

// ErrModelChatTemplate marks New's error when the model's own chat
// template does not parse or render: Config.ChatTemplate overrides it.
var ErrModelChatTemplate = errors.New("server: the model's chat template is unusable")

// newChatSetup resolves the chat template: tpl if given (Config.ChatTemplate,
// a file or a built-in name), else the tokenizer's own, else the built-in
// one its vocabulary's marker tokens call for (chat.BuiltinFor), else
// ChatML (its markers then are plain text); source, which the start-up
// log shows, says which and why. It
// renders the template on sample conversations, so that one that fails
// or passes its bounds on them stops the server at start rather than
// every chat request after. specialInContent lets messages' contents
// spell control tokens, as Hugging Face tokenizers do.
func newChatSetup(tk Tokenizer, tpl *chat.Template, specialInContent bool) (*chatSetup, error) {
	c := &chatSetup{tpl: tpl, source: "configured"}
	if tpl != nil && tpl.Name() != "" {
		c.source = "configured built-in " + tpl.Name()
	}
	if tt, ok := tk.(tokenTexter); ok {
		if id := tk.BOS(); id >= 0 {
			c.bos = tt.TokenText(id)
		}
		if e, ok := tk.(interface{ EOS() int32 }); ok && e.EOS() >= 0 {
			c.eos = tt.TokenText(e.EOS())
		}
	}
	if te, ok := tk.(turnEnder); ok {
		c.eot = te.EOT()
	}
	if pe, ok := tk.(plainEncoder); ok && !specialInContent {
		var texts []string
		for id := range int32(pe.VocabSize()) {
			if typ := pe.Type(id); typ == bpe.Control || typ == bpe.Unknown {
				texts = append(texts, pe.TokenText(id))
			}
		}
		c.control = chat.NewPlain(texts)
	}
	var err error
	if tpl == nil {
		if t, ok := tk.(templated); ok && t.ChatTemplate() != "" {
			if c.tpl, err = chat.Parse(t.ChatTemplate()); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrModelChatTemplate, err)
			}
			c.source = "the model's"
		} else {
			var has func(text string) bool
			switch v := tk.(type) {
			case tokenTexter:
				has = func(text string) bool { _, ok := v.TokenID(text); return ok }
			case pieceHaver:
				has = v.HasPiece
			}
			name, how := "chatml", "the default: no marker tokens"
			if has != nil {
				if n, ok := chat.BuiltinFor(has); ok {
					name, how = n, "detected from the vocabulary's marker tokens"
				}
			}
			if c.tpl, err = chat.Builtin(name); err != nil {
				return nil, err
			}
			c.source = "built-in " + name + " (" + how + ")"
		}
	}
	if err := c.check(); err != nil {
		err = fmt.Errorf("server: the chat template (%s) does not render sample conversations: %w", c.source, err)
		if c.source == "the model's" {
			err = fmt.Errorf("%w: %w", ErrModelChatTemplate, err)
		}
		return nil, err
	}
	return c, nil
}

// sampleChats are the conversations newChatSetup renders: one with a
// system message, and two without for templates (Mistral's) that refuse
// system messages.
var sampleChats = [][]chat.Message{
	{{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: "Hello!"},
		{Role: "assistant", Content: "Hi! How can I help?"}, {Role: "user", Content: "What is 2+2?"}},
	{{Role: "user", Content: "Hello!"}, {Role: "assistant", Content: "Hi! How can I help?"}, {Role: "user", Content: "What is 2+2?"}},
	{{Role: "user", Content: "Hello!"}},
}

// check renders the sample conversations, with and without the
// generation prompt: each must render or be refused by raise_exception,
// and one at least must render.
func (c *chatSetup) check() error {
	var refusal error
	rendered := false
	for _, msgs := range sampleChats {
		for _, gen := range []bool{true, false} {
			_, err := c.tpl.Render(chat.Input{Messages: msgs, AddGenerationPrompt: gen, BOS: c.bos, EOS: c.eos})
			switch {
			case err == nil:
				rendered = true
			case errors.Is(err, chat.ErrRaised):
				refusal = err
			default:
				return err
			}
		}
	}
	if !rendered {
		return fmt.Errorf("it refuses every sample conversation: %w", refusal)
	}
	return nil
}

// chatMessage is one message of a chat request.
type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, or an array of content parts of which prefixd
	// takes the text ones.
	Content json.RawMessage `json:"content"`
	// An assistant turn's calls and a tool result's call ID (tools.go).
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID json.RawMessage `json:"tool_call_id"`
	// An OpenAI field prefixd refuses by name when set.
	Name json.RawMessage `json:"name"`
}

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []chatMessage `json:"messages"`
	Logprobs    bool          `json:"logprobs"`
	TopLogprobs *int          `json:"top_logprobs"`
	// Tools (see tools.go); one call per reply, whatever
	// parallel_tool_calls says.
	Tools             []chatTool      `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	openAIParams

	tools *toolPlan // set by toEngine
}

// toChat validates messages and converts them for a template: their
// roles and texts, the cache_control breakpoints of their content parts,
// and for tool calling an assistant turn's tool_calls (arguments decoded
// from their JSON text, as templates read them) and a tool result's
// tool_call_id.
func toChat(msgs []chatMessage) (chat.Input, []cacheMark, *apiError) {
	var in chat.Input
	if len(msgs) == 0 {
		return in, nil, badRequest("messages", "messages must hold at least one message")
	}
	var marks []cacheMark
	in.Messages = make([]chat.Message, len(msgs))
	for i, m := range msgs {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		case "function":
			return in, nil, badRequest(param+".role", "role %q is not supported: send tool results with role tool", m.Role)
		default:
			return in, nil, badRequest(param+".role", "role must be system, developer, user, assistant or tool, got %q", m.Role)
		}
		if !isNull(m.Name) {
			return in, nil, badRequest(param+".name", "%s.name is not supported", param)
		}
		fields, aerr := toolFields(m, param)
		if aerr != nil {
			return in, nil, aerr
		}
		text := ""
		if !(m.Role == "assistant" && fields != nil && isNull(m.Content)) { // a call may come without content
			var ms []cacheMark
			if text, ms, aerr = messageText(m.Content, param+".content"); aerr != nil {
				return in, nil, aerr
			}
			for _, mk := range ms {
				mk.msg = i
				marks = append(marks, mk)
			}
		}
		in.Messages[i] = chat.Message{Role: m.Role, Content: text}
		if fields != nil {
			if in.MessageFields == nil {
				in.MessageFields = make([]map[string]any, len(msgs))
			}
			in.MessageFields[i] = fields
		}
	}
	if err := checkMarks(marks); err != nil {
		return in, nil, err
	}
	return in, marks, nil
}

// messageText reads a message's content: a string or text parts, and the
// cache_control breakpoints of the parts (their msg left 0).
func messageText(raw json.RawMessage, param string) (string, []cacheMark, *apiError) {
	if isNull(raw) {
		return "", nil, badRequest(param, "%s is required", param)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil, nil
	}
	var parts []struct {
		Type         string          `json:"type"`
		Text         *string         `json:"text"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", nil, badRequest(param, "%s must be a string or an array of content parts", param)
	}
	var b strings.Builder
	var marks []cacheMark
	for j, p := range parts {
		part := fmt.Sprintf("%s[%d]", param, j)
		if p.Type != "text" || p.Text == nil {
			return "", nil, badRequest(part, "content part type %q is not supported: prefixd takes text parts only", p.Type)
		}
		b.WriteString(*p.Text)
		if !isNull(p.CacheControl) {
			ttl, err := parseCacheControl(p.CacheControl, part+".cache_control")
			if err != nil {
				return "", nil, err
			}
			marks = append(marks, cacheMark{end: b.Len(), ttl: ttl, param: part + ".cache_control"})
		}
	}
	return b.String(), marks, nil
}

// renderChat renders msgs with the chat template and tokenizes the text
// as Hugging Face does a rendered template: control tokens' texts become
// those tokens and no BOS is added, the template writes its own; but the
// messages' contents stay text, unless Config.ChatSpecialInContent. A
// tokenizer without control tokens gets BOS, if it has one, before.
func (s *Server) renderChat(in chat.Input, addGenerationPrompt bool, param string) ([]int32, *apiError) {
	if s.cfg.Tokenizer == nil {
		return nil, badRequest(param, "this model has no tokenizer: chat needs one")
	}
	c := s.chat
	in.AddGenerationPrompt, in.BOS, in.EOS = addGenerationPrompt, c.bos, c.eos
	var text string
	var spans []chat.Span
	var err error
	if c.control != nil {
		text, spans, err = c.tpl.RenderPlain(in, c.control)
	} else {
		text, err = c.tpl.Render(in)
	}
	if err != nil {
		return nil, c.renderError(err, param)
	}
	if len(text) > 8*s.cfg.MaxPromptTokens {
		return nil, badRequest(param, "the rendered conversation is %d bytes, far above the limit of %d tokens", len(text), s.cfg.MaxPromptTokens)
	}
	if pe, ok := s.cfg.Tokenizer.(plainEncoder); ok && c.control != nil {
		plain := make([][2]int, len(spans))
		for i, sp := range spans {
			plain[i] = [2]int{sp.Start, sp.End}
		}
		return pe.EncodeSpecialExcept(text, plain), nil
	}
	if se, ok := s.cfg.Tokenizer.(specialEncoder); ok {
		return se.EncodeSpecial(text), nil
	}
	return encodePrompt(s.cfg.Tokenizer, text, s.cfg.Tokenizer.BOS()), nil
}

// renderError is a rendering's failure as the client sees it: the
// conversation is what made the template raise, pass a bound or fail, so
// a 4xx naming the template and what went wrong; never the prompt.
func (c *chatSetup) renderError(err error, param string) *apiError {
	msg := strings.TrimPrefix(err.Error(), "chat: ")
	var be *chat.BoundError
	switch {
	case errors.Is(err, chat.ErrRaised):
		return badRequest(param, "the chat template refused the conversation: %s", msg)
	case errors.As(err, &be):
		return &apiError{Status: 422, Type: typeInvalid, Param: param,
			Message: fmt.Sprintf("the chat template (%s) passed its bound on %s (%s) rendering the conversation", c.source, be.Bound, be.Limit)}
	}
	return &apiError{Status: 422, Type: typeInvalid, Param: param,
		Message: fmt.Sprintf("the chat template (%s) failed on the conversation: %s", c.source, msg)}
}

// toEngine validates a chat request.
func (c *chatRequest) toEngine(s *Server, lim limits) (engine.Request, *apiError) {
	in, marks, aerr := toChat(c.Messages)
	if aerr != nil {
		return engine.Request{}, aerr
	}
	top := -1
	switch {
	case c.TopLogprobs != nil && !c.Logprobs:
		return engine.Request{}, badRequest("top_logprobs", "top_logprobs needs logprobs: true")
	case c.TopLogprobs != nil && (*c.TopLogprobs < 0 || *c.TopLogprobs > engine.MaxTopLogprobs):
		return engine.Request{}, badRequest("top_logprobs", "top_logprobs must be in [0, %d], got %d", engine.MaxTopLogprobs, *c.TopLogprobs)
	case c.Logprobs:
		top = 0
		if c.TopLogprobs != nil {
			top = *c.TopLogprobs
		}
	}
	if c.tools, aerr = c.parseTools(s.toolStyle()); aerr != nil {
		return engine.Request{}, aerr
	}
	if c.tools != nil {
		tools, aerr := c.tools.templateTools()
		if aerr != nil {
			return engine.Request{}, aerr
		}
		in.Vars = map[string]any{"tools": tools}
	}
	ids, aerr := s.renderChat(in, true, "messages")
	if aerr != nil {
		return engine.Request{}, aerr
	}
	g := generateRequest{PromptIDs: ids, promptParam: "messages"}
	if err := c.toGenerate(&g); err != nil {
		return engine.Request{}, err
	}
	req, err := g.toEngine(nil, lim)
	if err != nil {
		return req, err
	}
	// A reply ends at the end of its turn.
	req.StopTokens = append(req.StopTokens, s.chat.eot...)
	if aerr := c.finish(&req, lim, top); aerr != nil {
		return req, aerr
	}
	if c.tools != nil {
		if aerr := c.tools.constrain(&req, lim); aerr != nil {
			return req, aerr
		}
	}
	// Last: each breakpoint renders the conversation again.
	req.Cache.Breakpoints = s.breakpoints(in, marks, ids, lim)
	return req, nil
}

// Chat completion objects.
type (
	chatReply struct {
		Role      string     `json:"role"`
		Content   *string    `json:"content"` // null for a tool call
		ToolCalls []toolCall `json:"tool_calls,omitempty"`
	}
	chatChoice struct {
		Index        int       `json:"index"`
		Message      chatReply `json:"message"`
		Logprobs     any       `json:"logprobs"`
		FinishReason string    `json:"finish_reason"`
	}
	chatResponse struct {
		ID      string           `json:"id"`
		Object  string           `json:"object"`
		Created int64            `json:"created"`
		Model   string           `json:"model"`
		Choices []chatChoice     `json:"choices"`
		Usage   *completionUsage `json:"usage"`
	}
	chatDelta struct {
		Role      string     `json:"role,omitempty"`
		Content   *string    `json:"content,omitempty"`
		ToolCalls []toolCall `json:"tool_calls,omitempty"`
	}
	chatChunkChoice struct {
		Index        int       `json:"index"`
		Delta        chatDelta `json:"delta"`
		Logprobs     any       `json:"logprobs"`
		FinishReason *string   `json:"finish_reason"`
	}
	chatChunk struct {
		ID      string            `json:"id"`
		Object  string            `json:"object"`
		Created int64             `json:"created"`
		Model   string            `json:"model"`
		Choices []chatChunkChoice `json:"choices"`
		Usage   *completionUsage  `json:"usage,omitempty"`
	}
)

func (s *Server) handleChatCompletions(ctx *fasthttp.RequestCtx) {
	var c chatRequest
	if !s.decodeOpenAI(ctx, &c) || !s.checkModel(ctx, c.Model) {
		return
	}
	req, aerr := c.toEngine(s, s.limits()) // max_tokens defaults to the server's default
	if aerr != nil {
		s.writeError(ctx, aerr)
		return
	}
	req.Namespace = namespace(ctx)
	streams, cancel, err := s.submitChoices(req)
	if err != nil {
		s.writeSubmitError(ctx, err)
		return
	}
	id, created, name := newID("chatcmpl-"), time.Now().Unix(), s.cfg.ModelName
	c.setLabels(ctx)
	tk := s.cfg.Tokenizer
	logprobs := func(ids []int32, lps []engine.TokenLogprobs) any {
		if !req.Logprobs {
			return nil
		}
		return formatChatLogprobs(tk, ids, lps)
	}
	if c.Stream {
		chunk := func(choices ...chatChunkChoice) chatChunk {
			return chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: name, Choices: choices}
		}
		empty := ""
		s.streamOpenAI(ctx, id, streams, req.MaxTokens, cancel, openAIStream{
			start: func(i int) any {
				return chunk(chatChunkChoice{Index: i, Delta: chatDelta{Role: "assistant", Content: &empty}})
			},
			token: func(i int, t engine.Token, _ int) any {
				if t.Text == "" && !req.Logprobs || c.tools.active() {
					return nil // a reply that may be a tool call comes whole at the end
				}
				text := t.Text
				lp := logprobs([]int32{t.ID}, []engine.TokenLogprobs{{Logprob: t.Logprob, Top: t.Top}})
				return chunk(chatChunkChoice{Index: i, Delta: chatDelta{Content: &text}, Logprobs: lp})
			},
			final: func(i int, res *engine.Result, rest string, _ int) any {
				reason := string(res.Finish)
				d := chatDelta{}
				if c.tools.active() {
					rest = res.Text
					if call, ok := c.tools.parseCall(res.Text, newID("call_")); ok {
						call.Index = new(int)
						d.ToolCalls, rest, reason = []toolCall{call}, "", "tool_calls"
					}
				}
				if rest != "" {
					d.Content = &rest
				}
				return chunk(chatChunkChoice{Index: i, Delta: d, FinishReason: &reason})
			},
			usage: func(results []engine.Result) any {
				r := chunk()
				r.Choices = []chatChunkChoice{}
				r.Usage = sumUsage(results)
				return r
			},
		}, c.StreamOptions != nil && c.StreamOptions.IncludeUsage)
		return
	}
	defer cancel()
	results, ok := s.awaitChoices(ctx, streams, cancel)
	if !ok {
		return
	}
	r := chatResponse{ID: id, Object: "chat.completion", Created: created, Model: name, Usage: sumUsage(results)}
	for i := range results {
		res := &results[i]
		msg, reason := chatReply{Role: "assistant", Content: &res.Text}, string(res.Finish)
		if c.tools.active() {
			if call, ok := c.tools.parseCall(res.Text, newID("call_")); ok {
				msg.Content, msg.ToolCalls, reason = nil, []toolCall{call}, "tool_calls"
			}
		}
		r.Choices = append(r.Choices, chatChoice{Index: i, Message: msg,
			Logprobs: logprobs(res.Tokens, res.Logprobs), FinishReason: reason})
	}
	ctx.Response.Header.Set("X-Request-Id", id)
	s.writeJSON(ctx, 200, r)
}
