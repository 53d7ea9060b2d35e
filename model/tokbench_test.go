package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prefixd/prefixd/internal/vocabtest"
)

// llamaCppTokenizeRun is what scripts/llamacpp/tokenize.mjs prints.
type llamaCppTokenizeRun struct {
	Bytes   int     `json:"bytes"`
	Tokens  int     `json:"tokens"`
	Seconds float64 `json:"seconds"`
}

// BenchmarkTokenizeBesideLlamaCpp encodes 4 MB of mixed text
// (vocabtest.MixedText, in 4 KiB prompts cut at character boundaries)
// with prefixd's tokenizer and, in the same run, with llama.cpp's (its
// CPU build in node-llama-cpp, scripts/llamacpp/tokenize.mjs), for the
// llama-bpe, qwen2 and llama-spm vocabularies of llama.cpp's models/
// folder. prefixd's speed is the benchmark's MB/s; llama.cpp's fastest
// of three passes is the llama.cpp-MB/s metric. Both must give the same
// number of tokens. It needs PREFIXD_LLAMACPP_NODE and
// PREFIXD_LLAMACPP_VOCAB (scripts/llamacpp/tokbench.sh sets them).
func BenchmarkTokenizeBesideLlamaCpp(b *testing.B) {
	node, vocab := os.Getenv("PREFIXD_LLAMACPP_NODE"), os.Getenv(llamaCppVocabEnv)
	if node == "" || vocab == "" {
		b.Skip("PREFIXD_LLAMACPP_NODE or " + llamaCppVocabEnv + " unset (scripts/llamacpp/tokbench.sh sets them)")
	}
	text := vocabtest.MixedText(4 << 20)
	var prompts []string
	for len(text) > 0 {
		n := min(4096, len(text))
		for n < len(text) && !utf8.RuneStart(text[n]) {
			n++
		}
		prompts, text = append(prompts, text[:n]), text[n:]
	}
	file := filepath.Join(b.TempDir(), "prompts")
	if err := os.WriteFile(file, []byte(strings.Join(prompts, "\x00")), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"llama-bpe", "qwen2", "llama-spm"} {
		gguf := filepath.Join(vocab, "ggml-vocab-"+name+".gguf")
		tok, err := LoadGGUFTokenizer(gguf)
		if err != nil {
			b.Fatal(err)
		}
		out := vocabtest.Node(b, "tokenize.mjs", nil, node, gguf, file, "3")
		var ref llamaCppTokenizeRun
		if err := json.Unmarshal(out, &ref); err != nil || ref.Seconds <= 0 {
			b.Fatalf("tokenize.mjs printed %q: %v", out, err)
		}
		tokens := 0
		for _, p := range prompts {
			tokens += len(tok.Encode(p))
		}
		if tokens != ref.Tokens {
			b.Errorf("%s: prefixd made %d tokens of the text, llama.cpp %d", name, tokens, ref.Tokens)
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(ref.Bytes))
			for b.Loop() {
				for _, p := range prompts {
					tok.Encode(p)
				}
			}
			b.ReportMetric(float64(ref.Bytes)/1e6/ref.Seconds, "llama.cpp-MB/s")
			b.ReportMetric(float64(ref.Tokens), "tokens")
		})
	}
}
