package chat

import (
	"fmt"
	"slices"
	"strings"
)

// builtins are templates for models that ship none: llama.cpp's named
// formats (src/llama-chat.cpp, llm_chat_apply_template), written here as
// Jinja, and prefixd's "mistral" (Mistral Instruct as Hugging Face
// publishes it, refusing roles out of turn). llama.cpp's formats write no
// BOS, its tokenizer adds one when the vocabulary says so; these write
// bos_token first for the families whose vocabularies add it, since
// prefixd encodes a rendered conversation as it stands. Literal "</s>"
// and the other end markers are the ones llama.cpp writes.
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
	"llama2":           llama2(false, false, false),
	"llama2-sys":       llama2(true, false, false),
	"llama2-sys-bos":   llama2(true, true, false),
	"llama2-sys-strip": llama2(true, false, true),
	// Mistral's v1, v3 and v3-tekken: the spaces around [INST] differ, and
	// v3 trims replies.
	"mistral-v1":        mistralV1V3(" ", " ", false),
	"mistral-v3":        mistralV1V3("", " ", true),
	"mistral-v3-tekken": mistralV1V3("", "", false),
	"mistral-v7":        mistralV7(" "),
	"mistral-v7-tekken": mistralV7(""),
	"phi3":              roleLines("{{- bos_token }}", "<|end|>"),
	"zephyr":            roleLines("{{- bos_token }}", "<|endoftext|>"),
	"falcon3":           roleLines("", ""),
	// Phi 4: ChatML with <|im_sep|> after the role and no newlines.
	"phi4": "{%- for message in messages %}" +
		"{{- '<|im_start|>' + message['role'] + '<|im_sep|>' + message['content'] + '<|im_end|>' }}" +
		"{%- endfor %}" +
		"{%- if add_generation_prompt %}{{- '<|im_start|>assistant<|im_sep|>' }}{%- endif %}",
	// Gemma's: no system role, its text (trimmed) opens the next user
	// turn; the assistant is "model"; contents trimmed.
	"gemma": "{{- bos_token }}" +
		"{%- set ns = namespace(system='') %}" +
		"{%- for message in messages %}" +
		"{%- if message['role'] == 'system' %}{%- set ns.system = ns.system + message['content'] | trim %}" +
		"{%- else %}" +
		"{%- if message['role'] == 'assistant' %}{%- set role = 'model' %}{%- else %}{%- set role = message['role'] %}{%- endif %}" +
		"{{- '<start_of_turn>' + role + '\\n' }}" +
		"{%- if ns.system != '' and role != 'model' %}{{- ns.system + '\\n\\n' }}{%- set ns.system = '' %}{%- endif %}" +
		"{{- message['content'] | trim + '<end_of_turn>\\n' }}" +
		"{%- endif %}" +
		"{%- endfor %}" +
		"{%- if add_generation_prompt %}{{- '<start_of_turn>model\\n' }}{%- endif %}",
	"vicuna":      vicuna("{{- message['content'] + '\\n\\n' }}"),
	"vicuna-orca": vicuna("{{- 'SYSTEM: ' + message['content'] + '\\n' }}"),
	// DeepSeek Coder's instruction format.
	"deepseek": bySystemUserAssistant("{{- message['content'] }}",
		"{{- '### Instruction:\\n' + message['content'] + '\\n' }}",
		"{{- '### Response:\\n' + message['content'] + '\\n<|EOT|>\\n' }}", "### Response:\\n"),
	"deepseek2": bySystemUserAssistant("{{- message['content'] + '\\n\\n' }}",
		"{{- 'User: ' + message['content'] + '\\n\\n' }}",
		"{{- 'Assistant: ' + message['content'] + '<｜end▁of▁sentence｜>' }}", "Assistant:"),
	"deepseek3": bySystemUserAssistant("{{- message['content'] + '\\n\\n' }}",
		"{{- '<｜User｜>' + message['content'] }}",
		"{{- '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' }}", "<｜Assistant｜>"),
	// Command-R's: contents trimmed, the assistant is the CHATBOT.
	"command-r": bySystemUserAssistant("{{- '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>' + message['content'] | trim + '<|END_OF_TURN_TOKEN|>' }}",
		"{{- '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + message['content'] | trim + '<|END_OF_TURN_TOKEN|>' }}",
		"{{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' + message['content'] | trim + '<|END_OF_TURN_TOKEN|>' }}",
		"<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"),
}

// afterAssistant is true inside the message loop when the message before
// is neither a system nor a user message (llama.cpp's formats treat every
// other role as the assistant's).
const afterAssistant = "loop.index0 > 0 and messages[loop.index0 - 1]['role'] not in ['system', 'user']"

// llama2 is llama.cpp's Llama 2 format and its variants: sys puts the
// system message in <<SYS>> (else it is a line of its own), bosInside
// opens each later turn with <s>, strip trims the contents.
func llama2(sys, bosInside, strip bool) string {
	content, system, open := "message['content']", "message['content'] + '\\n'", "[INST] "
	if strip {
		content = "message['content'] | trim"
	}
	if sys {
		system = "'<<SYS>>\\n' + " + content + " + '\\n<</SYS>>\\n\\n'"
	}
	if bosInside {
		open = "<s>[INST] "
	}
	return "{{- bos_token + '[INST] ' }}" +
		"{%- for message in messages %}" +
		"{%- if " + afterAssistant + " %}{{- '" + open + "' }}{%- endif %}" +
		"{%- if message['role'] == 'system' %}{{- " + system + " }}" +
		"{%- elif message['role'] == 'user' %}{{- " + content + " + ' [/INST]' }}" +
		"{%- else %}{{- " + content + " + '</s>' }}" +
		"{%- endif %}" +
		"{%- endfor %}"
}

// mistralV1V3 is llama.cpp's Mistral v1/v3/v3-tekken format: lead goes
// before [INST] and [/INST], trail after [INST] and before a reply,
// trimmed if trim.
func mistralV1V3(lead, trail string, trim bool) string {
	reply := "message['content']"
	if trim {
		reply += " | trim"
	}
	return "{{- bos_token }}" +
		"{%- for message in messages %}" +
		"{%- if loop.first or " + afterAssistant + " %}{{- '" + lead + "[INST]" + trail + "' }}{%- endif %}" +
		"{%- if message['role'] == 'system' %}{{- message['content'] + '\\n\\n' }}" +
		"{%- elif message['role'] == 'user' %}{{- message['content'] + '" + lead + "[/INST]' }}" +
		"{%- else %}{{- '" + trail + "' + " + reply + " + '</s>' }}" +
		"{%- endif %}" +
		"{%- endfor %}"
}

// mistralV7 is llama.cpp's Mistral v7 format, sp the space after each
// opening marker (none in v7-tekken).
func mistralV7(sp string) string {
	return "{{- bos_token }}" +
		"{%- for message in messages %}" +
		"{%- if message['role'] == 'system' %}{{- '[SYSTEM_PROMPT]" + sp + "' + message['content'] + '[/SYSTEM_PROMPT]' }}" +
		"{%- elif message['role'] == 'user' %}{{- '[INST]" + sp + "' + message['content'] + '[/INST]' }}" +
		"{%- else %}{{- '" + sp + "' + message['content'] + '</s>' }}" +
		"{%- endif %}" +
		"{%- endfor %}"
}

// roleLines is the format of Phi 3, Zephyr and Falcon 3: <|role|>, a
// newline, the content, end and a newline; <|assistant|> and a newline
// as the generation prompt. start opens the template.
func roleLines(start, end string) string {
	return start +
		"{%- for message in messages %}" +
		"{{- '<|' + message['role'] + '|>\\n' + message['content'] + '" + end + "\\n' }}" +
		"{%- endfor %}" +
		"{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- endif %}"
}

// bySystemUserAssistant is a format that writes each system, user and
// assistant message with its own statement, skips other roles and ends
// with prompt as the generation prompt; it starts with bos_token.
func bySystemUserAssistant(system, user, assistant, prompt string) string {
	return "{{- bos_token }}" +
		"{%- for message in messages %}" +
		"{%- if message['role'] == 'system' %}" + system +
		"{%- elif message['role'] == 'user' %}" + user +
		"{%- elif message['role'] == 'assistant' %}" + assistant +
		"{%- endif %}" +
		"{%- endfor %}" +
		"{%- if add_generation_prompt %}{{- '" + prompt + "' }}{%- endif %}"
}

// vicuna is Vicuna 1.1's format, system the statement writing a system
// message (the Orca variant's differs).
func vicuna(system string) string {
	return bySystemUserAssistant(system, "{{- 'USER: ' + message['content'] + '\\n' }}",
		"{{- 'ASSISTANT: ' + message['content'] + '</s>\\n' }}", "ASSISTANT:")
}

// BuiltinNames lists the built-in templates' names, sorted.
func BuiltinNames() []string {
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Builtin returns the built-in template name (one of BuiltinNames: the
// names llama.cpp's --chat-template takes, and "mistral"), or an error
// listing the names.
func Builtin(name string) (*Template, error) {
	src, ok := builtins[name]
	if !ok {
		return nil, fmt.Errorf("chat: no built-in template %q (%s)", name, strings.Join(BuiltinNames(), ", "))
	}
	t, err := Parse(src)
	if err != nil {
		return nil, err
	}
	t.name = name
	return t, nil
}

// markers name, in order of preference, the tokens only each built-in
// template's model family has; a family matches when its vocabulary has
// every one.
var markers = []struct {
	tokens   []string
	template string
}{
	{[]string{"<|start_header_id|>", "<|end_header_id|>"}, "llama3"},
	{[]string{"<|im_start|>", "<|im_sep|>"}, "phi4"},
	{[]string{"<|im_start|>"}, "chatml"},
	{[]string{"<start_of_turn>", "<end_of_turn>"}, "gemma"},
	{[]string{"<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>"}, "command-r"},
	{[]string{"<｜User｜>", "<｜Assistant｜>"}, "deepseek3"},
	{[]string{"[SYSTEM_PROMPT]", "[INST]"}, "mistral-v7"},
	{[]string{"[INST]"}, "mistral"},
	{[]string{"<|user|>", "<|assistant|>", "<|end|>"}, "phi3"},
	// A SentencePiece vocabulary (▁ for spaces) with <s> and </s> but
	// none of the markers above: Llama 2 and the models built on it.
	{[]string{"<s>", "</s>", "▁the"}, "llama2"},
}

// BuiltinFor names the built-in template for a model without its own, from
// the marker tokens its vocabulary holds (hasToken reports whether a text
// is a token), as llama.cpp's llm_chat_detect_template recognises a
// template by its markers: llama3 for <|start_header_id|>, phi4 for
// <|im_sep|> beside <|im_start|>, chatml for <|im_start|>, gemma for
// <start_of_turn>, command-r for <|START_OF_TURN_TOKEN|>, deepseek3 for
// <｜User｜>, mistral-v7 for [SYSTEM_PROMPT], mistral for [INST], phi3 for
// <|user|> <|assistant|> <|end|>, llama2 for a SentencePiece vocabulary
// with <s> and </s>; false if none matches.
func BuiltinFor(hasToken func(text string) bool) (string, bool) {
	for _, m := range markers {
		if !slices.ContainsFunc(m.tokens, func(s string) bool { return !hasToken(s) }) {
			return m.template, true
		}
	}
	return "", false
}
