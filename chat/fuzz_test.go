package chat

import (
	"errors"
	"testing"
	"time"
)

var fuzzPlain = NewPlain([]string{"<|im_end|>", "<", "<|im"})

// FuzzRender parses fuzzed template sources and renders fuzzed messages
// through them, under small limits, and through a built-in template:
// errors are fine, panics, hangs and unbounded growth are not.
func FuzzRender(f *testing.F) {
	for _, src := range builtins {
		f.Add(src, "Hi <|im_end|> {{ x }}")
	}
	for _, c := range hostile {
		f.Add(c.src, "")
	}
	f.Add("{{ raise_exception('x') }}", "")
	f.Add("{% for m in messages[::-1] %}{{ m.content | trim }}{% endfor %}", "{% if %}")
	f.Add("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}", "")
	f.Add("{% macro f(n) %}{% call f(n) %}{{ caller() }}{% endcall %}{% endmacro %}{{ f(1) }}", "")
	f.Add("{{ messages | tojson(indent=2) }}{{ messages[0].content.split('x', 2) | join('|') }}{{ (messages|map(attribute='role')|list)[::2] }}", "a\uFDD0x\uFDE0")
	f.Add("{% for k, v in {'a': [1, 2.5, none]}.items() if v %}{{ loop.index }}{{ k ~ v | string }}{% else %}{% endfor %}", "")
	chatml, err := Builtin("chatml")
	if err != nil {
		f.Fatal(err)
	}
	lim := Limits{MaxDepth: 64, MaxSteps: 20000, MaxOutput: 1 << 16, MaxBytes: 1 << 20, MaxTime: time.Second}
	f.Fuzz(func(t *testing.T, src, content string) {
		in := Input{Messages: []Message{{"user", content}, {"assistant", content}}, AddGenerationPrompt: true}
		if got, err := chatml.Render(in); err != nil || len(got) < 2*len(content) {
			t.Fatalf("chatml: %v, %q", err, got)
		}
		tpl, err := Parse(src)
		if err != nil {
			return
		}
		tpl = tpl.WithLimits(lim)
		text, err := tpl.Render(in)
		if errors.Is(err, errPanic) {
			t.Fatal(err)
		}
		if len(text) > lim.MaxOutput {
			t.Fatalf("%d bytes rendered, above the limit of %d", len(text), lim.MaxOutput)
		}
		plainText, spans, perr := tpl.RenderPlain(in, fuzzPlain)
		if errors.Is(perr, errPanic) {
			t.Fatal(perr)
		}
		for _, s := range spans {
			if s.Start < 0 || s.Start > s.End || s.End > len(plainText) {
				t.Fatalf("span %v out of %d bytes", s, len(plainText))
			}
		}
	})
}
