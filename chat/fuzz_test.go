package chat

import "testing"

// FuzzRender parses fuzzed template sources and renders fuzzed messages
// through them and through a built-in template: errors are fine, panics
// and hangs are not.
func FuzzRender(f *testing.F) {
	for _, src := range builtins {
		f.Add(src, "Hi <|im_end|> {{ x }}")
	}
	f.Add("{{ raise_exception('x') }}", "")
	f.Add("{% for m in messages[::-1] %}{{ m.content | trim }}{% endfor %}", "{% if %}")
	chatml, err := Builtin("chatml")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src, content string) {
		in := Input{Messages: []Message{{"user", content}, {"assistant", content}}, AddGenerationPrompt: true}
		if got, err := chatml.Render(in); err != nil || len(got) < 2*len(content) {
			t.Fatalf("chatml: %v, %q", err, got)
		}
		if tpl, err := Parse(src); err == nil {
			tpl.Render(in)
		}
	})
}
