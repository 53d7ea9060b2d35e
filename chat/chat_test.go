package chat

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/prefixd/prefixd/internal/vocabtest"
	"github.com/prefixd/prefixd/tokenizer/bpe"
)

// modelTemplate reads the chat template of a tokenizer folder in
// ../shared/models/tokenizers.
func modelTemplate(t *testing.T, name string) *Template {
	t.Helper()
	b, err := os.ReadFile(vocabtest.Path(t, "tokenizers/"+name+"/tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	tpl, err := Parse(c.ChatTemplate)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// tokenizers caches the shared tokenizer folders across tests.
var tokenizers sync.Map // name → *bpe.Tokenizer

func loadTokenizer(t *testing.T, name string) *bpe.Tokenizer {
	t.Helper()
	if tk, ok := tokenizers.Load(name); ok {
		return tk.(*bpe.Tokenizer)
	}
	tk, err := bpe.LoadHF(vocabtest.Path(t, "tokenizers/"+name))
	if err != nil {
		t.Fatal(err)
	}
	tokenizers.Store(name, tk)
	return tk
}

func builtin(t *testing.T, name string) *Template {
	t.Helper()
	tpl, err := Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

var conversation = []Message{{"system", "You are helpful."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "How?"}}

// TestRender compares renderings with the texts written by hand from each
// template's source.
func TestRender(t *testing.T) {
	cases := []struct {
		name string
		tpl  *Template
		in   Input
		want string
	}{
		{"llama3 model template", modelTemplate(t, "llama3"), Input{Messages: conversation, BOS: "<|begin_of_text|>", AddGenerationPrompt: true},
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHow?<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"qwen3 model template", modelTemplate(t, "qwen3"), Input{Messages: conversation, AddGenerationPrompt: true},
			"<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n" +
				"<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nHow?<|im_end|>\n<|im_start|>assistant\n"},
		{"qwen3 keeps the last turn's reasoning", modelTemplate(t, "qwen3"),
			Input{Messages: []Message{{"user", "Hi"}, {"assistant", "<think>\nr\n</think>\n\nHello!"}}},
			"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nHello!<|im_end|>\n"},
		{"qwen3 drops earlier turns' reasoning", modelTemplate(t, "qwen3"),
			Input{Messages: []Message{{"user", "Hi"}, {"assistant", "<think>\nr\n</think>\n\nHello!"}, {"user", "Bye"}}},
			"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"},
		{"qwen3 thinking off", modelTemplate(t, "qwen3"),
			Input{Messages: []Message{{"user", "Hi"}}, AddGenerationPrompt: true, Vars: map[string]any{"enable_thinking": false}},
			"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"chatml", builtin(t, "chatml"), Input{Messages: conversation[:2], AddGenerationPrompt: true},
			"<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"chatml without generation prompt", builtin(t, "chatml"), Input{Messages: conversation[1:2]},
			"<|im_start|>user\nHi<|im_end|>\n"},
		{"llama3 trims contents", builtin(t, "llama3"), Input{Messages: []Message{{"user", "  Hi \n"}}, BOS: "<|begin_of_text|>", AddGenerationPrompt: true},
			"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"mistral", builtin(t, "mistral"), Input{Messages: []Message{{"user", "a"}, {"assistant", "b"}, {"user", "c"}}, BOS: "<s>", EOS: "</s>"},
			"<s>[INST] a [/INST]b</s>[INST] c [/INST]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.tpl.Render(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("rendered\n%q\nwant\n%q", got, c.want)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	mistral := builtin(t, "mistral")
	for _, msgs := range [][]Message{{{"assistant", "a"}}, {{"system", "s"}, {"user", "u"}}, {{"user", "a"}, {"user", "b"}}} {
		if _, err := mistral.Render(Input{Messages: msgs}); !errors.Is(err, ErrRaised) {
			t.Errorf("mistral %v: error %v, want ErrRaised", msgs, err)
		}
	}
	if _, err := Parse("{% for %}"); err == nil {
		t.Error("a template that does not parse was accepted")
	}
	if _, err := Builtin("alpaca"); err == nil {
		t.Error("an unknown built-in template was accepted")
	}
}

// TestRenderedSpecialTokens renders a Qwen3 conversation and encodes it
// with EncodeSpecial: the control tokens' texts become the tokens.
func TestRenderedSpecialTokens(t *testing.T) {
	tk := loadTokenizer(t, "qwen3")
	text, err := modelTemplate(t, "qwen3").Render(Input{Messages: []Message{{"user", "hi"}}, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	// <|im_start|> user \n hi <|im_end|> \n <|im_start|> assistant \n
	want := []int32{151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198}
	if got := tk.EncodeSpecial(text); !slices.Equal(got, want) {
		t.Fatalf("EncodeSpecial(%q) = %v, want %v", text, got, want)
	}
}

// TestConcurrentRender renders from several goroutines (run with -race).
func TestConcurrentRender(t *testing.T) {
	tpl := modelTemplate(t, "qwen3")
	want, err := tpl.Render(Input{Messages: conversation, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if got, err := tpl.Render(Input{Messages: conversation, AddGenerationPrompt: true}); err != nil || got != want {
					t.Errorf("concurrent render: %v, %q", err, got)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestBuiltinFor(t *testing.T) {
	for _, c := range []struct {
		dir, want string
	}{{"llama3", "llama3"}, {"qwen3", "chatml"}} {
		tk := loadTokenizer(t, c.dir)
		has := func(text string) bool { _, ok := tk.TokenID(text); return ok }
		if got, ok := BuiltinFor(has); !ok || got != c.want {
			t.Errorf("%s: BuiltinFor = %q, %v, want %q", c.dir, got, ok, c.want)
		}
	}
	if got, ok := BuiltinFor(func(text string) bool { return text == "[INST]" }); !ok || got != "mistral" {
		t.Errorf("[INST]: %q, %v", got, ok)
	}
	if got, ok := BuiltinFor(func(string) bool { return false }); ok {
		t.Errorf("no markers: %q", got)
	}
}
