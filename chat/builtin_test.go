package chat

import (
	"strings"
	"testing"
)

// llamaCppConversation is the conversation of llama.cpp's
// tests/test-chat-template.cpp (release de3ff81).
var llamaCppConversation = []Message{
	{"system", "You are a helpful assistant"}, {"user", "Hello"}, {"assistant", "Hi there"},
	{"user", "Who are you"}, {"assistant", "   I am an assistant   "}, {"user", "Another question"},
}

// llamaCppFormats is what llama.cpp's llm_chat_apply_template writes for
// llamaCppConversation with the generation prompt, by template name.
// Those marked "test" are the expected outputs of llama.cpp's own
// tests/test-chat-template.cpp for a template it detects as that name;
// the others are written from reading src/llama-chat.cpp.
var llamaCppFormats = map[string]string{
	"chatml":            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n", // test
	"llama2":            "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]",                                                                                                                                                                 // test
	"llama2-sys":        "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]",
	"llama2-sys-bos":    "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who are you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]",   // test
	"llama2-sys-strip":  "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]I am an assistant</s>[INST] Another question [/INST]",               // test
	"mistral-v1":        " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    I am an assistant   </s> [INST] Another question [/INST]",                       // test
	"mistral-v3":        "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am an assistant</s>[INST] Another question[/INST]",                                   // test
	"mistral-v3-tekken": "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]",                                  // test
	"mistral-v7":        "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]", // test
	"mistral-v7-tekken": "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]",
	"phi3":              "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n", // test
	"zephyr":            "<|system|>\nYou are a helpful assistant<|endoftext|>\n<|user|>\nHello<|endoftext|>\n<|assistant|>\nHi there<|endoftext|>\n<|user|>\nWho are you<|endoftext|>\n<|assistant|>\n   I am an assistant   <|endoftext|>\n<|user|>\nAnother question<|endoftext|>\n<|assistant|>\n",
	"falcon3":           "<|system|>\nYou are a helpful assistant\n<|user|>\nHello\n<|assistant|>\nHi there\n<|user|>\nWho are you\n<|assistant|>\n   I am an assistant   \n<|user|>\nAnother question\n<|assistant|>\n",
	"phi4":              "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>Hi there<|im_end|><|im_start|>user<|im_sep|>Who are you<|im_end|><|im_start|>assistant<|im_sep|>   I am an assistant   <|im_end|><|im_start|>user<|im_sep|>Another question<|im_end|><|im_start|>assistant<|im_sep|>", // test
	"gemma":             "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n",                                                          // test
	"vicuna":            "You are a helpful assistant\n\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:",                                                                                                                                                                                            // test
	"vicuna-orca":       "SYSTEM: You are a helpful assistant\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:",                                                                                                                                                                                      // test
	"deepseek":          "You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n### Instruction:\nWho are you\n### Response:\n   I am an assistant   \n<|EOT|>\n### Instruction:\nAnother question\n### Response:\n",                                                                                                                                     // test
	"deepseek2":         "You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there<｜end▁of▁sentence｜>User: Who are you\n\nAssistant:    I am an assistant   <｜end▁of▁sentence｜>User: Another question\n\nAssistant:",                                                                                                                                                            // test
	"deepseek3":         "You are a helpful assistant\n\n<｜User｜>Hello<｜Assistant｜>Hi there<｜end▁of▁sentence｜><｜User｜>Who are you<｜Assistant｜>   I am an assistant   <｜end▁of▁sentence｜><｜User｜>Another question<｜Assistant｜>",
	"command-r":         "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who are you<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>I am an assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Another question<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", // test
	"llama3":            "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",            // test
}

// noBOS are the named templates whose families' vocabularies add no BOS,
// so they write none.
var noBOS = map[string]bool{"chatml": true, "phi4": true, "falcon3": true}

// TestLlamaCppNamedTemplates renders llama.cpp's test conversation with
// every named template and compares with llama.cpp's format: without a
// BOS text equal to it, with one the same text after BOS (except the
// families that add none).
func TestLlamaCppNamedTemplates(t *testing.T) {
	for _, name := range BuiltinNames() {
		want, ok := llamaCppFormats[name]
		if name == "mistral" {
			continue // prefixd's own, tested in TestRender
		}
		if !ok {
			t.Errorf("built-in %q has no llama.cpp format to compare with", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			tpl := builtin(t, name)
			if tpl.Name() != name {
				t.Errorf("Name() = %q", tpl.Name())
			}
			got, err := tpl.Render(Input{Messages: llamaCppConversation, AddGenerationPrompt: true, EOS: "</s>"})
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("rendered\n%q\nllama.cpp\n%q", got, want)
			}
			withBOS, err := tpl.Render(Input{Messages: llamaCppConversation, AddGenerationPrompt: true, BOS: "<BOS>", EOS: "</s>"})
			if err != nil {
				t.Fatal(err)
			}
			if !noBOS[name] {
				want = "<BOS>" + want
			}
			if withBOS != want {
				t.Errorf("with BOS\n%q\nwant\n%q", withBOS, want)
			}
		})
	}
	for name := range llamaCppFormats {
		if _, err := Builtin(name); err != nil {
			t.Errorf("llama.cpp's %q: %v", name, err)
		}
	}
}

// TestBuiltinNamesError: an unknown name's error lists the names.
func TestBuiltinNamesError(t *testing.T) {
	_, err := Builtin("llama9")
	if err == nil || !strings.Contains(err.Error(), "llama2, llama2-sys") || !strings.Contains(err.Error(), "mistral-v7") {
		t.Errorf("error %v, want one listing the names", err)
	}
}

// TestBuiltinForMarkers detects each family from its marker tokens.
func TestBuiltinForMarkers(t *testing.T) {
	for _, c := range []struct {
		vocab []string
		want  string
	}{
		{[]string{"<|start_header_id|>", "<|end_header_id|>", "<|im_start|>"}, "llama3"},
		{[]string{"<|im_start|>", "<|im_end|>"}, "chatml"},
		{[]string{"<|im_start|>", "<|im_sep|>"}, "phi4"},
		{[]string{"<bos>", "<start_of_turn>", "<end_of_turn>", "▁the"}, "gemma"},
		{[]string{"<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>"}, "command-r"},
		{[]string{"<｜User｜>", "<｜Assistant｜>"}, "deepseek3"},
		{[]string{"<s>", "[INST]", "[SYSTEM_PROMPT]"}, "mistral-v7"},
		{[]string{"<s>", "</s>", "[INST]", "▁the"}, "mistral"},
		{[]string{"<s>", "</s>", "<|user|>", "<|assistant|>", "<|end|>", "▁the"}, "phi3"},
		{[]string{"<s>", "</s>", "▁the"}, "llama2"},
	} {
		has := func(text string) bool {
			for _, v := range c.vocab {
				if v == text {
					return true
				}
			}
			return false
		}
		if got, ok := BuiltinFor(has); !ok || got != c.want {
			t.Errorf("%v: BuiltinFor = %q, %v, want %q", c.vocab, got, ok, c.want)
		}
	}
	// Byte-level BPE spells the space Ġ: <s> and </s> alone are no Llama 2.
	if got, ok := BuiltinFor(func(s string) bool { return s == "<s>" || s == "</s>" || s == "Ġthe" }); ok {
		t.Errorf("a byte-level vocabulary with <s>: %q", got)
	}
}
