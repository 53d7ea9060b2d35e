package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// naiveMerge is llama2.c's quadratic BPE loop: rescan every adjacent pair,
// merge the best (leftmost on ties), repeat.
func naiveMerge(t *SentencePiece, ids []int32) []int32 {
	ids = slices.Clone(ids)
	for {
		best, bestID, bestScore := -1, int32(0), float32(math.Inf(-1))
		for i := 0; i+1 < len(ids); i++ {
			id, ok := t.index[t.pieces[ids[i]]+t.pieces[ids[i+1]]]
			if ok && t.scores[id] > bestScore {
				best, bestID, bestScore = i, id, t.scores[id]
			}
		}
		if best < 0 {
			return ids
		}
		ids[best] = bestID
		ids = append(ids[:best+1], ids[best+2:]...)
	}
}

// TestMergeMatchesNaive checks the heap-based merge against the naive loop
// on the Llama-2 vocabulary, over sample texts and random ones.
func TestMergeMatchesNaive(t *testing.T) {
	tk, err := LoadLlama2CTokenizer(sharedModel(t, "llama2-tokenizer.bin"), 32000)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"Hello world", "  double  spaces ", "aaaaaaaaaaaaaaaa", "ünïcödé 日本語 🙂", "tokenization tokenizer tokens"}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("abcdeéth  .,\n日")
	for range 300 {
		var b strings.Builder
		for range r.IntN(60) {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	for _, s := range texts {
		if s == "" {
			continue
		}
		ids := tk.initial(" " + s)
		if got, want := tk.merge(slices.Clone(ids)), naiveMerge(tk, ids); !slices.Equal(got, want) {
			t.Fatalf("%q: merge %v, naive %v", s, got, want)
		}
	}
}

// BenchmarkEncodeLong encodes a 16 KiB text: O(n log n) merging keeps a
// long prompt from costing seconds.
func BenchmarkEncodeLong(b *testing.B) {
	tk, err := LoadLlama2CTokenizer(sharedModel(b, "llama2-tokenizer.bin"), 32000)
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("Once upon a time, a little fox found a shiny stone. ", 320)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		tk.Encode(text)
	}
}
