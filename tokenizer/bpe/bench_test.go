package bpe

import (
	"strings"
	"testing"

	"github.com/prefixd/prefixd/internal/vocabtest"
)

// BenchmarkEncode reports encoding speed in MB/s on 4 MB of mixed text,
// encoded in 4 KiB prompts as a server sees them: Llama 3's and Qwen3's
// tokenizers with their fast-path pre-tokenizers, and (general/...) the
// same vocabularies with their expressions on the general engine.
func BenchmarkEncode(b *testing.B) {
	text := vocabtest.MixedText(4 << 20)
	var prompts []string
	for i := 0; i < len(text); i += 4096 {
		prompts = append(prompts, text[i:min(i+4096, len(text))])
	}
	tks := map[string]*Tokenizer{}
	for name, expr := range map[string]string{"llama3": llama3Pattern, "qwen3": strings.Replace(llama3Pattern, "{1,3}", "", 1)} {
		tk := sharedHF(b, name)
		cfg := tk.cfg
		pre, err := Compile(expr, Oniguruma)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Pre = pre
		general, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		tks[name], tks["general/"+name] = tk, general
	}
	for _, name := range []string{"llama3", "general/llama3", "qwen3", "general/qwen3"} {
		tk := tks[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				for _, p := range prompts {
					tk.Encode(p)
				}
			}
		})
	}
}

// BenchmarkSplit measures the pre-tokenizers alone: llama.cpp's, with
// their fast paths, and the same expressions on the general engine
// (general/...), on mixed text cut into 4 KiB prompts.
func BenchmarkSplit(b *testing.B) {
	text := vocabtest.MixedText(1 << 20)
	var prompts []string
	for i := 0; i < len(text); i += 4096 {
		prompts = append(prompts, text[i:min(i+4096, len(text))])
	}
	for _, name := range []string{"llama-bpe", "qwen2", "gpt-2", "deepseek-llm"} {
		fast, err := PreTokenizer(name)
		if err != nil {
			b.Fatal(err)
		}
		general, err := patternSequence(preTokenizers[name], func(e string) (Splitter, error) { return Compile(e, Rust) })
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name string
			sp   Splitter
		}{{name, fast}, {"general/" + name, general}} {
			b.Run(c.name, func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				var dst []string
				for b.Loop() {
					for _, p := range prompts {
						dst = c.sp.Split(dst[:0], p)
					}
				}
			})
		}
	}
}
