// Package chat renders chat templates: the Jinja template a model ships
// (tokenizer.chat_template in GGUF, chat_template in tokenizer_config.json)
// or a built-in one (llama.cpp's named formats: builtin.go) for a model without one,
// with the environment Hugging Face's apply_chat_template gives them:
// trim_blocks and lstrip_blocks on, the variables messages, bos_token,
// eos_token and add_generation_prompt, and the function raise_exception.
//
// A template is input (a model file, --chat-template), so every rendering
// runs under Limits: nesting depth, steps, output size, bytes built and
// time, failing with a *BoundError (ErrBound) at the first it passes. To
// hold them the package evaluates templates itself: gonja
// (github.com/nikolalohinski/gonja/v2) only lexes and parses. gonja's
// evaluator cannot be bounded from outside: a recursive macro overflows
// the Go stack, which kills the process; range(1000000000), "a"*2000000000
// or a join of a long separator allocate gigabytes inside one call; and Go
// cannot stop the goroutine running one. Forking it meant owning some
// 12,000 lines and auditing every filter for blow-ups; this evaluator
// (eval.go, value.go, filters.go) is the Jinja subset chat templates use,
// with Python's semantics for it, each operation charging the budget
// before it works or allocates. Tags: if, for (not recursive), set,
// macro, call, break, continue, do; the filters, tests, methods and
// globals in filters.go. Other tags do not parse; other filters, tests
// and methods are errors when rendered. Values print and tojson as Python
// and transformers do ({"a": 1}, with spaces). Sources nesting deeper
// than MaxNesting do not parse: gonja's parser recurses per level.
//
// A rendered conversation holds the model's control tokens as text
// (<|im_start|>); encode it with the tokenizer's EncodeSpecial, which turns
// text that spells an added token into that token, as Hugging Face does.
// That would let a user who types <|im_end|> in a message forge a turn
// boundary, so RenderPlain reports where the control tokens' texts in the
// messages' contents landed, for the tokenizer to keep them text
// (bpe.Tokenizer.EncodeSpecialExcept).
package chat

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/nikolalohinski/gonja/v2/nodes"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string // system, user, assistant, tool
	Content string
}

// Input is what a template renders.
type Input struct {
	Messages []Message
	// AddGenerationPrompt ends the text with the assistant turn's header,
	// so that the model writes the reply.
	AddGenerationPrompt bool
	// BOS and EOS are the texts of the model's BOS and EOS tokens, "" if it
	// has none.
	BOS, EOS string
	// Vars are further variables the template may read (enable_thinking,
	// tools); they cannot replace the ones above.
	Vars map[string]any
	// MessageFields, if set, holds further fields of Messages[i] at index
	// i that the template may read (an assistant turn's tool_calls, a tool
	// result's tool_call_id), as JSON decodes them; they cannot replace
	// role and content.
	MessageFields []map[string]any
}

// Template is a compiled chat template. It is safe for concurrent use.
type Template struct {
	root *nodes.Template
	lim  Limits
	name string // the built-in template's name, "" for a parsed one
}

// Name is the name of a built-in template (Builtin), "" for one Parse
// compiled.
func (t *Template) Name() string { return t.name }

// ErrRaised wraps the message of a template's raise_exception call: the
// conversation breaks a rule of the template (roles that do not
// alternate, an unsupported role), so the caller's request is at fault.
var ErrRaised = errors.New("chat template raised an exception")

// errPanic marks a rendering that panicked: a bug of the evaluator's,
// reported as an error rather than taking the server down.
var errPanic = errors.New("rendering failed")

// Parse compiles a Jinja chat template, to be rendered under
// DefaultLimits.
func Parse(source string) (*Template, error) {
	root, err := parseTemplate(source)
	if err != nil {
		return nil, fmt.Errorf("chat: template does not parse: %w", err)
	}
	return &Template{root: root, lim: DefaultLimits}, nil
}

// WithLimits returns the template rendering under lim, its zero fields
// taken from DefaultLimits.
func (t *Template) WithLimits(lim Limits) *Template {
	return &Template{root: t.root, lim: lim.withDefaults(), name: t.name}
}

// Render renders a conversation. An error wrapping ErrRaised means the
// template refused the conversation, one wrapping ErrBound that it
// passed one of its Limits; any other is the template failing on it
// (dividing by zero, calling what is not a function).
func (t *Template) Render(in Input) (string, error) {
	return t.render(in, nil)
}

func (t *Template) render(in Input, p *protector) (text string, err error) {
	size := len(in.BOS) + len(in.EOS)
	msgs := &list{items: make([]any, len(in.Messages))}
	for i, m := range in.Messages {
		d := newDict()
		content := m.Content
		if p != nil {
			content = p.protect(content)
		}
		d.set("role", m.Role)
		d.set("content", content)
		if i < len(in.MessageFields) {
			for _, k := range slices.Sorted(maps.Keys(in.MessageFields[i])) {
				if k == "role" || k == "content" {
					continue
				}
				v, err := fromGo(in.MessageFields[i][k], 0, &size)
				if err != nil {
					return "", fmt.Errorf("chat: message %d field %s: %w", i, k, err)
				}
				d.set(k, v)
			}
		}
		msgs.items[i] = d
		size += len(m.Role) + len(content) + 48
	}
	root := &scope{vars: map[string]any{}}
	for k, v := range in.Vars {
		if root.vars[k], err = fromGo(v, 0, &size); err != nil {
			return "", fmt.Errorf("chat: variable %s: %w", k, err)
		}
	}
	root.vars["messages"] = msgs
	root.vars["add_generation_prompt"] = in.AddGenerationPrompt
	root.vars["bos_token"] = in.BOS
	root.vars["eos_token"] = in.EOS
	ev := &evaluator{b: newBudget(t.lim, size)}
	w := &writer{b: ev.b}
	defer func() {
		// A panic is a bug of this package's, not the template's; it
		// must not take the server down.
		if r := recover(); r != nil {
			text, err = "", fmt.Errorf("chat: %w: %v", errPanic, r)
		}
	}()
	err = ev.execNodes(w, root, t.root.Nodes)
	var r *raised
	switch {
	case ev.b.err != nil:
		return "", fmt.Errorf("chat: %w", ev.b.err)
	case errors.As(err, &r):
		return "", fmt.Errorf("chat: %w: %s", ErrRaised, r.msg)
	case err == errBreak || err == errContinue:
		return "", fmt.Errorf("chat: %w", err)
	case err != nil:
		return "", fmt.Errorf("chat: template error: %w", err)
	}
	return w.buf.String(), nil
}
