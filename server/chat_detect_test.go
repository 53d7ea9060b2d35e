package server

import (
	"strings"
	"testing"

	"github.com/prefixd/prefixd/chat"
	"github.com/prefixd/prefixd/internal/vocabtest"
	"github.com/prefixd/prefixd/model"
)

// TestChatTemplateSource: the template newChatSetup picks, and the source
// the start-up log shows, for a SentencePiece Llama 2 vocabulary without
// a template (llama2, detected), a vocabulary without markers (chatml, the
// default) and a named --chat-template.
func TestChatTemplateSource(t *testing.T) {
	spm, err := model.LoadGGUFTokenizer(vocabtest.Path(t, "llama-2-tiny-random.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	gemma, err := chat.Builtin("gemma")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		tk       Tokenizer
		tpl      *chat.Template
		source   string
		rendered string
	}{
		{"llama 2 vocabulary", spm, nil, "built-in llama2 (detected from the vocabulary's marker tokens)", "[INST] Hello! [/INST]"},
		{"byte vocabulary", model.ByteTokenizer{}, nil, "built-in chatml (the default: no marker tokens)", "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n"},
		{"named", model.ByteTokenizer{}, gemma, "configured built-in gemma", "<start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\n"},
	} {
		setup, err := newChatSetup(c.tk, c.tpl, false)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if setup.source != c.source {
			t.Errorf("%s: source %q, want %q", c.name, setup.source, c.source)
		}
		got, err := setup.tpl.Render(chat.Input{Messages: []chat.Message{{Role: "user", Content: "Hello!"}}, AddGenerationPrompt: true, BOS: setup.bos})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(got, c.rendered) || len(got) > len(c.rendered)+len(setup.bos) {
			t.Errorf("%s: rendered %q, want %q", c.name, got, c.rendered)
		}
	}
}
