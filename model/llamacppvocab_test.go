package model

import (
	"bytes"
	"encoding/json"
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
	ran := 0
	forEachLlamaCppVocab(t, dir, func(t *testing.T, name, file string, tok Tokenizer) {
		ran++
		vocabtest.Compare(t, name, vocabtest.CasesIn(t, dir, filepath.Base(file)), tok.Encode)
		if b, ok := tok.(*bpe.Tokenizer); name == "gemma-4" && (!ok || !b.AddBOS()) {
			t.Errorf("gemma-4: llama.cpp always adds BOS for Gemma 4; AddBOS is false")
		}
	})
	if ran == 0 {
		t.Fatalf("no reference pair ran from %s", dir)
	}
}

// forEachLlamaCppVocab runs f as a subtest, by vocabulary name, for every
// ggml-vocab-*.gguf in dir with a reference pair beside it, with its
// tokenizer; an excluded one is skipped with its reason, one without a
// pair must load and is then skipped.
func forEachLlamaCppVocab(t *testing.T, dir string, f func(t *testing.T, name, file string, tok Tokenizer)) {
	files, err := filepath.Glob(filepath.Join(dir, "ggml-vocab-*.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
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
			f(t, name, file, tok)
		})
	}
}

// TestLlamaCppVocabDetokenize decodes every reference pair's tokens, in
// the folder PREFIXD_LLAMACPP_VOCAB names, with prefixd's tokenizer and
// with llama.cpp's (node-llama-cpp's detokenize, special tokens not
// rendered; scripts/llamacpp/detokenize.mjs): the texts must be equal,
// or equal once llama.cpp's clean-up of spaces (llamaCppCleanSpaces) is
// applied to prefixd's, and the streamed pieces (AppendTextPiece) must
// concatenate to Decode's text. It needs PREFIXD_LLAMACPP_NODE too.
func TestLlamaCppVocabDetokenize(t *testing.T) {
	dir := vocabtest.Env(t, llamaCppVocabEnv, "scripts/llamacpp/vocab.sh")
	node := vocabtest.Env(t, "PREFIXD_LLAMACPP_NODE", "scripts/llamacpp/install.sh")
	forEachLlamaCppVocab(t, dir, func(t *testing.T, name, file string, tok Tokenizer) {
		cases := vocabtest.CasesIn(t, dir, filepath.Base(file))
		seqs := make([][]int32, len(cases))
		for i, c := range cases {
			seqs[i] = c.IDs
			if seqs[i] == nil {
				seqs[i] = []int32{}
			}
		}
		body, err := json.Marshal(seqs)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		if err := json.Unmarshal(vocabtest.Node(t, "detokenize.mjs", bytes.NewReader(body), node, file), &want); err != nil || len(want) != len(seqs) {
			t.Fatalf("detokenize.mjs: %d texts (%v) for %d", len(want), err, len(seqs))
		}
		pass, cleaned := 0, 0
		for i, ids := range seqs {
			got := tok.Decode(ids)
			var streamed []byte
			started := false
			for _, id := range ids {
				streamed, started = tok.AppendTextPiece(streamed, id, started)
			}
			switch {
			case got != want[i] && llamaCppCleanSpaces(got) == want[i]:
				cleaned++ // llama.cpp's lossy clean-up, which prefixd does not do
				pass++
			case got != want[i]:
				t.Errorf("Decode(%v) = %q, llama.cpp %q", ids, got, want[i])
			case string(streamed) != got:
				t.Errorf("%v streamed %q, Decode %q", ids, streamed, got)
			default:
				pass++
			}
		}
		t.Logf("%s: %d of %d decodings equal llama.cpp's (%d once its clean-up of spaces is applied)", name, pass, len(seqs), cleaned)
	})
}

// llamaCppCleanSpaces is llama.cpp's clean-up of a detokenized text for
// vocabularies with clean_spaces (llama_vocab::impl::detokenize, release
// de3ff81), done here as its three in-place passes do it: the space
// before ?, !, . and , goes, " ' " becomes "'", and the space before 's,
// 'm, 're and 've goes. It loses text ("you 😁 ?" decodes to "you 😁?"),
// so prefixd's Decode does not do it, and detokenized text round-trips;
// the test applies it to compare with llama.cpp.
func llamaCppCleanSpaces(s string) string {
	text := []byte(s)
	n := len(text)
	// First pass: " ?", " !", " .", " ,".
	total := min(n, 1)
	for i := 1; i < n; i++ {
		x := text[i]
		if text[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			total--
		}
		text[total] = x
		total++
	}
	// Second pass: " ' ".
	n, total = total, min(total, 1)
	for i := 1; i < n; i++ {
		x := text[i]
		if x == '\'' && i+1 < n && text[i-1] == ' ' && text[i+1] == ' ' {
			total--
			i++
			text[i] = 0
		}
		text[total] = x
		total++
	}
	// Third pass: " 's", " 'm", " 're", " 've".
	n, total = total, min(total, 1)
	for i := 1; i < n; i++ {
		x := text[i]
		if text[i-1] == ' ' && x == '\'' && i+1 < n {
			x1 := text[i+1]
			if x1 == 's' || x1 == 'm' || i+2 < n && (x1 == 'r' || x1 == 'v') && text[i+2] == 'e' {
				total--
			}
		}
		text[total] = x
		total++
	}
	return string(text[:total])
}

// TestLlamaCppCleanSpaces checks the clean-up on the cases its passes
// name (values worked out from llama.cpp's loops).
func TestLlamaCppCleanSpaces(t *testing.T) {
	for in, want := range map[string]string{
		"":                             "",
		"you 😁 ?我":                     "you 😁?我",
		"a , b . c ! d ?":              "a, b. c! d?",
		"x ' y":                        "x'y",
		"I 'm, you 're, we 've, it 's": "I'm, you're, we've, it's",
		"he 'd, she 'll, 't":           "he 'd, she 'll, 't",
		" ?":                           "?",
	} {
		if got := llamaCppCleanSpaces(in); got != want {
			t.Errorf("llamaCppCleanSpaces(%q) = %q, want %q", in, got, want)
		}
	}
}
