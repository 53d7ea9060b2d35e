// Package chat renders chat templates: the Jinja template a model ships
// (tokenizer.chat_template in GGUF, chat_template in tokenizer_config.json)
// or a built-in one (ChatML, Llama 3, Mistral) for a model without one,
// with the environment Hugging Face's apply_chat_template gives them:
// trim_blocks and lstrip_blocks on, the variables messages, bos_token,
// eos_token and add_generation_prompt, and the function raise_exception.
//
// A rendered conversation holds the model's control tokens as text
// (<|im_start|>); encode it with the tokenizer's EncodeSpecial, which turns
// text that spells an added token into that token, as Hugging Face does.
// The messages' own text passes through the template unchanged, so a user
// who types <|im_end|> forges a turn boundary exactly as with Hugging Face
// tokenizers; that is the documented rule, not a defence.
package chat

import (
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
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
}

// Template is a compiled chat template. It is safe for concurrent use.
type Template struct {
	tpl *exec.Template
}

// ErrRaised wraps the message of a template's raise_exception call: the
// conversation breaks a rule of the template (roles that do not
// alternate, an unsupported role), so the caller's request is at fault.
var ErrRaised = errors.New("chat template raised an exception")

// raiseException is Hugging Face's raise_exception(message).
func raiseException(_ *exec.Evaluator, params *exec.VarArgs) (*exec.Value, error) {
	msg := "raise_exception called"
	if len(params.Args) > 0 {
		msg = params.Args[0].String()
	}
	return nil, fmt.Errorf("%w: %s", ErrRaised, msg)
}

// Parse compiles a Jinja chat template.
func Parse(source string) (*Template, error) {
	cfg := config.New()
	cfg.TrimBlocks, cfg.LeftStripBlocks = true, true
	loader, err := loaders.NewMemoryLoader(map[string]string{"/chat": source})
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	env := *gonja.DefaultEnvironment
	env.Context = gonja.DefaultContext.Inherit().Update(exec.NewContext(map[string]any{
		"raise_exception": raiseException,
	}))
	tpl, err := exec.NewTemplate("/chat", cfg, loader, &env)
	if err != nil {
		return nil, fmt.Errorf("chat: template does not parse: %w", err)
	}
	return &Template{tpl: tpl}, nil
}

// Render renders a conversation. An error wrapping ErrRaised means the
// template refused the conversation.
func (t *Template) Render(in Input) (string, error) {
	msgs := make([]map[string]any, len(in.Messages))
	for i, m := range in.Messages {
		msgs[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	vars := maps.Clone(in.Vars)
	if vars == nil {
		vars = map[string]any{}
	}
	vars["messages"] = msgs
	vars["add_generation_prompt"] = in.AddGenerationPrompt
	vars["bos_token"] = in.BOS
	vars["eos_token"] = in.EOS
	out, err := t.tpl.ExecuteToString(exec.NewContext(vars))
	if err != nil {
		if i := strings.Index(err.Error(), ErrRaised.Error()); i >= 0 {
			return "", fmt.Errorf("chat: %w%s", ErrRaised, strings.TrimPrefix(err.Error()[i:], ErrRaised.Error()))
		}
		return "", fmt.Errorf("chat: %w", err)
	}
	return out, nil
}
