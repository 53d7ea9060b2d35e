package bpe_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/internal/vocabtest"
	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/tokenizer/bpe"
)

// spmTokenizerJSON converts a llama.cpp SentencePiece vocabulary (GGUF
// tokens, scores, types) into the tokenizer.json Hugging Face's converter
// writes for Llama 2: a BPE on the text itself with byte_fallback and
// fuse_unk, merges ordered by the merged piece's score, normalizer
// Prepend ▁ and Replace space with ▁, and decoders Replace, ByteFallback,
// Fuse, Strip.
func spmTokenizerJSON(t *testing.T, path string) []byte {
	t.Helper()
	meta, err := model.ReadGGUFMetadata(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := meta["tokenizer.ggml.tokens"].([]any)
	scores, _ := meta["tokenizer.ggml.scores"].([]any)
	types, _ := meta["tokenizer.ggml.token_type"].([]any)
	if len(raw) == 0 || len(scores) != len(raw) || len(types) != len(raw) {
		t.Fatalf("%s: tokens, scores or types missing", path)
	}
	vocab := map[string]int32{}
	type addedTok struct {
		ID         int32  `json:"id"`
		Content    string `json:"content"`
		Special    bool   `json:"special"`
		Normalized bool   `json:"normalized"`
	}
	var added []addedTok
	type cand struct {
		a, b   string
		score  float64
		ia, ib int32
	}
	var cands []cand
	for i, v := range raw {
		s := v.(string)
		vocab[s] = int32(i)
		if typ, _ := types[i].(int64); typ == 2 || typ == 3 {
			added = append(added, addedTok{ID: int32(i), Content: s, Special: true})
		}
	}
	for i, v := range raw {
		s := v.(string)
		if typ, _ := types[i].(int64); typ != 1 {
			continue
		}
		rs := []rune(s)
		var local []cand
		for k := 1; k < len(rs); k++ {
			a, b := string(rs[:k]), string(rs[k:])
			ia, okA := vocab[a]
			ib, okB := vocab[b]
			if okA && okB {
				local = append(local, cand{a, b, scores[i].(float64), ia, ib})
			}
		}
		slices.SortFunc(local, func(x, y cand) int {
			if x.ia != y.ia {
				return int(x.ia - y.ia)
			}
			return int(x.ib - y.ib)
		})
		cands = append(cands, local...)
	}
	slices.SortStableFunc(cands, func(x, y cand) int {
		switch {
		case x.score > y.score:
			return -1
		case x.score < y.score:
			return 1
		}
		return 0
	})
	merges := make([][2]string, len(cands))
	for i, c := range cands {
		merges[i] = [2]string{c.a, c.b}
	}
	doc := map[string]any{
		"added_tokens": added,
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}},
		"pre_tokenizer": nil,
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"},
			map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
		}},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": merges, "byte_fallback": true,
			"fuse_unk": true, "unk_token": "<unk>"},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSentencePieceBPEReference encodes llama.cpp's llama-spm test cases
// with the Llama 2 vocabulary as a SentencePiece-converted tokenizer.json
// (byte fallback, ▁ word boundaries) and compares token for token; and
// decodes them back, the leading ▁ dropped.
func TestSentencePieceBPEReference(t *testing.T) {
	path := vocabtest.Path(t, "vocab/ggml-vocab-llama-spm.gguf")
	tk, err := bpe.FromHF(spmTokenizerJSON(t, path), []byte(`{"bos_token": "<s>"}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := vocabtest.Cases(t, "ggml-vocab-llama-spm.gguf")
	pass := 0
	for _, c := range cases {
		got := tk.Encode(c.Text)
		if !slices.Equal(got, c.IDs) {
			t.Errorf("%q:\n got %v\nwant %v", c.Text, got, c.IDs)
			continue
		}
		pass++
		// After BOS too, whose piece is empty, the text loses only the ▁
		// the normalizer prepended.
		withBOS := append([]int32{tk.BOS()}, got...)
		if dec := tk.Decode(withBOS); dec != c.Text && !strings.ContainsRune(c.Text, '\ufffd') {
			t.Errorf("Decode(BOS + Encode(%q)) = %q", c.Text, dec)
		}
	}
	t.Logf("llama-spm: %d of %d cases equal", pass, len(cases))
}
