package model

import (
	"slices"
	"testing"

	"github.com/prefixd/prefixd/internal/vocabtest"
)

// TestGGUFReferenceTokenizations encodes every case of llama.cpp's test
// pairs with the tokenizer read from the pair's vocabulary-only GGUF file
// and compares token for token: byte-level BPE for gpt-2, starcoder,
// deepseek-llm and falcon, SentencePiece for llama-spm and phi-3.
func TestGGUFReferenceTokenizations(t *testing.T) {
	for _, name := range []string{"gpt-2", "starcoder", "deepseek-llm", "falcon", "llama-spm", "phi-3"} {
		t.Run(name, func(t *testing.T) {
			file := "ggml-vocab-" + name + ".gguf"
			tok, err := LoadGGUFTokenizer(vocabtest.Path(t, "vocab/"+file))
			if err != nil {
				t.Fatal(err)
			}
			cases := vocabtest.Cases(t, file)
			pass := 0
			for _, c := range cases {
				if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
					t.Errorf("%q:\n got %v\nwant %v", c.Text, got, c.IDs)
				} else {
					pass++
				}
			}
			t.Logf("%s: %d of %d cases equal", name, pass, len(cases))
		})
	}
}
