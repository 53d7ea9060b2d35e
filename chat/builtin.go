package chat

import (
	"fmt"
	"slices"
	"strings"
)

// builtins are templates for models that ship none, in the form their
// families publish them.
var builtins = map[string]string{
	// ChatML, as Qwen and SmolLM write it.
	"chatml": "{%- for message in messages %}" +
		"{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}" +
		"{%- endfor %}" +
		"{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
	// Llama 3's: contents trimmed, each turn closed by <|eot_id|>.
	"llama3": "{{- bos_token }}" +
		"{%- for message in messages %}" +
		"{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}" +
		"{%- endfor %}" +
		"{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}",
	// Mistral Instruct's: user and assistant turns alternate, starting
	// with the user; [/INST] is itself the generation prompt.
	"mistral": "{{- bos_token }}" +
		"{%- for message in messages %}" +
		"{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}" +
		"{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}" +
		"{%- endif %}" +
		"{%- if message['role'] == 'user' %}{{- '[INST] ' + message['content'] + ' [/INST]' }}" +
		"{%- elif message['role'] == 'assistant' %}{{- message['content'] + eos_token }}" +
		"{%- else %}{{- raise_exception('Only user and assistant roles are supported!') }}" +
		"{%- endif %}" +
		"{%- endfor %}",
}

// Builtin returns the built-in template name: "chatml", "llama3" or
// "mistral".
func Builtin(name string) (*Template, error) {
	src, ok := builtins[name]
	if !ok {
		names := make([]string, 0, len(builtins))
		for n := range builtins {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("chat: no built-in template %q (%s)", name, strings.Join(names, ", "))
	}
	return Parse(src)
}

// markers name, in order of preference, a token only each built-in
// template's model family has.
var markers = []struct{ token, template string }{
	{"<|start_header_id|>", "llama3"},
	{"<|im_start|>", "chatml"},
	{"[INST]", "mistral"},
}

// BuiltinFor names the built-in template for a model without its own, from
// the marker tokens its vocabulary holds (hasToken reports whether a text
// is a token): "llama3" for <|start_header_id|>, "chatml" for
// <|im_start|>, "mistral" for [INST]; false if it has none of them.
func BuiltinFor(hasToken func(text string) bool) (string, bool) {
	for _, m := range markers {
		if hasToken(m.token) {
			return m.template, true
		}
	}
	return "", false
}
