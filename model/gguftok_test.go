package model

import (
	"strings"
	"testing"

	"github.com/prefixd/prefixd/internal/vocabtest"
	"github.com/prefixd/prefixd/tokenizer/bpe"
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
			vocabtest.Compare(t, name, vocabtest.Cases(t, file), tok.Encode)
		})
	}
}

// TestGGUFTokenizerMetadata checks the special tokens read from the
// vocabulary files' metadata (values from the files' own keys).
func TestGGUFTokenizerMetadata(t *testing.T) {
	for _, c := range []struct {
		name     string
		bos, eos int32
		vocab    int
	}{{"gpt-2", 50256, 50256, 50257}, {"deepseek-llm", 100000, 100001, 102400}, {"falcon", 11, 11, 65024}, {"llama-spm", 1, 2, 32000}} {
		tok, err := LoadGGUFTokenizer(vocabtest.Path(t, "vocab/ggml-vocab-"+c.name+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		if tok.BOS() != c.bos || tok.EOS() != c.eos || tok.VocabSize() != c.vocab {
			t.Errorf("%s: BOS %d EOS %d vocabulary %d, want %d %d %d", c.name, tok.BOS(), tok.EOS(), tok.VocabSize(), c.bos, c.eos, c.vocab)
		}
	}
	tok, err := LoadGGUFTokenizer(vocabtest.Path(t, "vocab/ggml-vocab-deepseek-llm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := tok.(*bpe.Tokenizer); !ok || !b.AddBOS() {
		t.Errorf("deepseek-llm: add_bos_token 1 not honoured")
	}
}

func TestGGUFTokenizerErrors(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2",
			"tokenizer.ggml.tokens": []any{"a", "b", "ab"}, "tokenizer.ggml.merges": []any{"a b"}}
	}
	if _, err := GGUFTokenizer(base()); err != nil {
		t.Fatalf("a valid vocabulary: %v", err)
	}
	for _, c := range []struct {
		key  string
		val  any
		want string
	}{
		{"tokenizer.ggml.pre", "klingon", `"klingon"`},
		{"tokenizer.ggml.model", "t5", `"t5"`},
		{"tokenizer.ggml.merges", []any{"ab"}, `"ab"`},
		{"tokenizer.ggml.merges", nil, "tokenizer.ggml.merges"},
		{"tokenizer.ggml.tokens", []any{"a", 3}, "not a string"},
		{"tokenizer.ggml.token_type", []any{int64(1)}, "1 token types"},
		{"tokenizer.ggml.eos_token_id", int64(7), "eos_token_id"},
	} {
		meta := base()
		if c.val == nil {
			delete(meta, c.key)
		} else {
			meta[c.key] = c.val
		}
		if _, err := GGUFTokenizer(meta); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s = %v: error %v, want one naming %s", c.key, c.val, err, c.want)
		}
	}
}
