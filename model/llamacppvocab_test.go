package model

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/internal/vocabtest"
	"github.com/prefixd/prefixd/tokenizer/bpe"
)

// llamaCppVocabEnv names the folder holding llama.cpp's models/ggml-vocab-*
// files (scripts/llamacpp/vocab.sh extracts them from node-llama-cpp's
// source bundle and prints the folder).
const llamaCppVocabEnv = "PREFIXD_LLAMACPP_VOCAB"

// llamaCppVocabExcluded are the vocabularies of llama.cpp's models/ folder
// that TestLlamaCppVocabPairs does not run, each with the reason.
var llamaCppVocabExcluded = map[string]string{
	"bert-bge":       "WordPiece (tokenizer.ggml.model \"bert\"): out of scope",
	"nomic-bert-moe": "WordPiece-style BERT vocabulary: out of scope",
}

// TestLlamaCppVocabPairs encodes every case of every reference pair
// (ggml-vocab-*.gguf with its .inp and .out) in the folder that
// PREFIXD_LLAMACPP_VOCAB names, with the tokenizer read from that GGUF,
// and requires every BPE and SentencePiece vocabulary to be token-exact;
// one without a pair (llama.cpp ships aquila, baichuan and gpt-neox so)
// must at least load.
// It skips when the variable is unset, except under CI.
func TestLlamaCppVocabPairs(t *testing.T) {
	dir := vocabtest.Env(t, llamaCppVocabEnv, "scripts/llamacpp/vocab.sh")
	files, err := filepath.Glob(filepath.Join(dir, "ggml-vocab-*.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	ran := 0
	for _, file := range files {
		base := filepath.Base(file)
		name := strings.TrimSuffix(strings.TrimPrefix(base, "ggml-vocab-"), ".gguf")
		t.Run(name, func(t *testing.T) {
			if why, ok := llamaCppVocabExcluded[name]; ok {
				t.Skip(why)
			}
			tok, err := LoadGGUFTokenizer(file)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(file + ".out"); err != nil {
				t.Skipf("%s loads; no reference pair beside it to compare", base)
			}
			ran++
			vocabtest.Compare(t, name, vocabtest.CasesIn(t, dir, base), tok.Encode)
			if b, ok := tok.(*bpe.Tokenizer); name == "gemma-4" && (!ok || !b.AddBOS()) {
				t.Errorf("gemma-4: llama.cpp always adds BOS for Gemma 4; AddBOS is false")
			}
		})
	}
	if ran == 0 {
		t.Fatalf("no reference pair ran from %s", dir)
	}
}
