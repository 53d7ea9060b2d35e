package model

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
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

// TestLlama2CTokenizerRefusesMoreTokens writes a four-token tokenizer.bin
// and reads it for models of three, four and five tokens: the file has no
// token count, so a file with tokens left over is another model's
// vocabulary and one too short is truncated.
func TestLlama2CTokenizerRefusesMoreTokens(t *testing.T) {
	data := llama2cTokenizer("<unk>", "<s>", "</s>", "hello")
	path := filepath.Join(t.TempDir(), "tokenizer.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadLlama2CTokenizer(path, 4); err != nil {
		t.Fatalf("four tokens for a four-token model: %v", err)
	}
	if _, err := LoadLlama2CTokenizer(path, 3); err == nil || !strings.Contains(err.Error(), "more tokens than the model's 3") {
		t.Errorf("four tokens for a three-token model: %v", err)
	}
	if _, err := LoadLlama2CTokenizer(path, 5); err == nil || !strings.Contains(err.Error(), "truncated at token 4") {
		t.Errorf("four tokens for a five-token model: %v", err)
	}
}

// FuzzLlama2CTokenizer reads arbitrary bytes as a tokenizer.bin for a
// model of up to 64 tokens: an error or a tokenizer of exactly that many
// tokens, never a panic.
func FuzzLlama2CTokenizer(f *testing.F) {
	good := llama2cTokenizer("<unk>", "<s>", "</s>", "hi")
	f.Add(good, uint8(4))
	f.Add(good, uint8(3))
	f.Add(good[:len(good)-1], uint8(4))
	f.Add([]byte{}, uint8(1))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, vocab uint8) {
		path := filepath.Join(dir, "tokenizer.bin")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		n := int(vocab%64) + 1
		tk, err := LoadLlama2CTokenizer(path, n)
		if err == nil && tk.VocabSize() != n {
			t.Fatalf("%d tokens read for a %d-token model", tk.VocabSize(), n)
		}
	})
}

// llama2cTokenizer returns a tokenizer.bin holding pieces, each scored -1.
func llama2cTokenizer(pieces ...string) []byte {
	data := binary.LittleEndian.AppendUint32(nil, 5)
	for _, piece := range pieces {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(-1))
		data = binary.LittleEndian.AppendUint32(data, uint32(len(piece)))
		data = append(data, piece...)
	}
	return data
}

// TestDetokenizeDropsDummySpace checks that the pieces AppendTextPiece
// streams concatenate to Decode's text, which has no leading dummy space
// (llama.cpp and Hugging Face decode [15043, 3186] to "Hello world"),
// also after tokens that decode to nothing and when the first piece is
// the space alone.
func TestDetokenizeDropsDummySpace(t *testing.T) {
	tk, err := LoadGGUFTokenizer(sharedModel(t, "llama-2-tiny-random.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	const space = 29871 // ▁ alone
	for _, c := range []struct {
		ids  []int32
		want string
	}{
		{[]int32{15043, 3186}, "Hello world"},
		{[]int32{tk.BOS(), 15043, 3186}, "Hello world"},
		{[]int32{space, 3186}, " world"},
		{tk.Encode("  two spaces"), "  two spaces"},
		{nil, ""},
	} {
		var b []byte
		started := false
		for _, id := range c.ids {
			b, started = tk.AppendTextPiece(b, id, started)
		}
		if string(b) != c.want || tk.Decode(c.ids) != c.want {
			t.Errorf("%v: pieces %q, Decode %q, want %q", c.ids, b, tk.Decode(c.ids), c.want)
		}
	}
}
