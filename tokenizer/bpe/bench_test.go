package bpe

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// mixedText returns about n bytes of deterministic mixed text: English
// prose, code, numbers, Cyrillic, Chinese, emoji and whitespace runs, in
// the proportions of a chat workload with some code and translation.
func mixedText(n int) string {
	parts := []string{
		"The quick brown fox jumps over the lazy dog. ", "It's what they'd said: we'll see. ",
		"func main() {\n\tfmt.Println(\"hello\", 42)\n}\n", "    if (x >= 10 && y != nil) { return -1; }\n",
		"1234567 89.5 3,141,592 2024-11-23 ", "Привет, как дела? Всё хорошо. ", "我想在apple工作，今天天气很好。",
		"🚀 🦙 ✅ 😁 ", "\n\n", "   ", "Führer Cửa Việt naïve café ", "<|im_start|> is only text here. ",
	}
	weights := []int{30, 10, 8, 6, 6, 6, 6, 2, 4, 3, 3, 1}
	r := rand.New(rand.NewPCG(14, 1))
	var b strings.Builder
	total := 0
	for _, w := range weights {
		total += w
	}
	for b.Len() < n {
		k := r.IntN(total)
		for i, w := range weights {
			if k < w {
				b.WriteString(parts[i])
				break
			}
			k -= w
		}
	}
	return b.String()
}

// BenchmarkEncode reports encoding speed in MB/s on 4 MB of mixed text,
// encoded in 4 KiB prompts as a server sees them: Llama 3's and Qwen3's
// tokenizers with their fast-path pre-tokenizers, and (general/...) the
// same vocabularies with their expressions on the general engine.
func BenchmarkEncode(b *testing.B) {
	text := mixedText(4 << 20)
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
	text := mixedText(1 << 20)
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
