package bpe

import (
	"slices"
	"sync"
	"testing"

	"github.com/prefixd/prefixd/internal/vocabtest"
)

// loadHF loads a tokenizer folder from ../shared/models/tokenizers.
func loadHF(t testing.TB, name string) *Tokenizer {
	t.Helper()
	tk, err := LoadHF(vocabtest.Path(t, "tokenizers/"+name))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestHFReferenceTokenizations compares every case of llama.cpp's llama-bpe
// and qwen2 pairs with the tokens of the Llama 3 and Qwen3 tokenizer.json.
func TestHFReferenceTokenizations(t *testing.T) {
	for _, c := range []struct{ pair, dir string }{{"llama-bpe", "llama3"}, {"qwen2", "qwen3"}} {
		t.Run(c.pair, func(t *testing.T) {
			tk := sharedHF(t, c.dir)
			vocabtest.Compare(t, c.pair, vocabtest.Cases(t, "ggml-vocab-"+c.pair+".gguf"), tk.Encode)
		})
	}
}

// TestConcurrentEncode encodes the reference cases from several goroutines
// at once on a fresh tokenizer, so the word cache fills under contention
// (run with -race).
func TestConcurrentEncode(t *testing.T) {
	tk := loadHF(t, "llama3")
	cases := vocabtest.Cases(t, "ggml-vocab-llama-bpe.gguf")
	errs := make(chan string, 4*len(cases))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for _, tc := range cases {
				if got := tk.Encode(tc.Text); !slices.Equal(got, tc.IDs) {
					errs <- tc.Text
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for text := range errs {
		t.Errorf("%q differs under concurrency", text)
	}
}
