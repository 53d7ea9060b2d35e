package chat

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/prefixd/prefixd/internal/vocabtest"
)

// TestBuiltinsInLlamaCppJinja renders every built-in template with
// llama.cpp's own Jinja engine (node-llama-cpp's binding of it,
// scripts/llamacpp/jinja.mjs) and with this package, with and without
// BOS and the generation prompt: both must write the same text, and for
// llama.cpp's named formats llama.cpp's engine must write what
// llamaCppFormats holds (after BOS where the family has one), so the
// templates are llama.cpp's formats by llama.cpp's own rendering too. It
// needs PREFIXD_LLAMACPP_NODE (vocabtest.Env).
func TestBuiltinsInLlamaCppJinja(t *testing.T) {
	node := vocabtest.Env(t, "PREFIXD_LLAMACPP_NODE", "scripts/llamacpp/install.sh")
	type request struct {
		Template            string              `json:"template"`
		Messages            []map[string]string `json:"messages"`
		BOS                 string              `json:"bos_token"`
		EOS                 string              `json:"eos_token"`
		AddGenerationPrompt bool                `json:"add_generation_prompt"`
	}
	type rendering struct {
		name string
		in   Input
		want string // ours
	}
	var reqs []request
	var cases []rendering
	for _, name := range BuiltinNames() {
		tpl := builtin(t, name)
		msgs := llamaCppConversation
		if name == "mistral" {
			msgs = msgs[1:] // it refuses a system message
		}
		for _, bos := range []string{"", "<s>"} {
			for _, gen := range []bool{true, false} {
				in := Input{Messages: msgs, AddGenerationPrompt: gen, BOS: bos, EOS: "</s>"}
				want, err := tpl.Render(in)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				r := request{Template: builtins[name], BOS: bos, EOS: "</s>", AddGenerationPrompt: gen}
				for _, m := range msgs {
					r.Messages = append(r.Messages, map[string]string{"role": m.Role, "content": m.Content})
				}
				reqs, cases = append(reqs, r), append(cases, rendering{name, in, want})
			}
		}
	}
	body, err := json.Marshal(reqs)
	if err != nil {
		t.Fatal(err)
	}
	out := vocabtest.Node(t, "jinja.mjs", bytes.NewReader(body), node)
	var got []json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(cases) {
		t.Fatalf("jinja.mjs wrote %d renderings (%v) for %d", len(got), err, len(cases))
	}
	for i, c := range cases {
		var text string
		if err := json.Unmarshal(got[i], &text); err != nil {
			t.Errorf("%s: llama.cpp's engine failed: %s", c.name, got[i])
			continue
		}
		if text != c.want {
			t.Errorf("%s (BOS %q, generation prompt %v): llama.cpp's engine wrote\n%q\nthis package\n%q", c.name, c.in.BOS, c.in.AddGenerationPrompt, text, c.want)
		}
		if format, ok := llamaCppFormats[c.name]; ok && c.in.AddGenerationPrompt {
			if c.in.BOS != "" && !noBOS[c.name] {
				format = c.in.BOS + format
			}
			if text != format {
				t.Errorf("%s: llama.cpp's engine wrote\n%q\nllama.cpp's format is\n%q", c.name, text, format)
			}
		}
	}
	t.Logf("%d renderings of %d templates equal in llama.cpp's Jinja engine", len(cases), len(BuiltinNames()))
}
