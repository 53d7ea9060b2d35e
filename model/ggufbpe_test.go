package model

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/internal/vocabtest"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/tokenizer/bpe"
)

// writeBPEModel writes a tiny Llama around the GPT-2 vocabulary plus
// ChatML's markers, with vocab logits, and returns its path.
func writeBPEModel(t *testing.T, extra int) (path string, tokens int) {
	t.Helper()
	meta, tokens, err := TokenizerMetadata(vocabtest.Path(t, "vocab/ggml-vocab-gpt-2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if meta, err = WithChatML(meta, ChatMLTemplate); err != nil {
		t.Fatal(err)
	}
	tokens += 2
	c := Config{Dim: 8, Hidden: 16, Layers: 1, Heads: 2, KVHeads: 1, Vocab: tokens + extra, MaxSeqLen: 64,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1}
	var buf bytes.Buffer
	if err := WriteGGUF(&buf, Random(c, 1), kernels.F32, meta...); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "bpe.gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, tokens
}

// TestGGUFModelWithBPEVocabulary: a model file carrying a byte-level BPE
// vocabulary loads with it, a padded embedding (more logits than tokens)
// is fine, and a vocabulary larger than the embedding is refused.
func TestGGUFModelWithBPEVocabulary(t *testing.T) {
	path, tokens := writeBPEModel(t, 3)
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	tk, ok := m.Tokenizer.(*bpe.Tokenizer)
	if !ok {
		t.Fatalf("tokenizer %T, want *bpe.Tokenizer", m.Tokenizer)
	}
	if tk.VocabSize() != tokens || m.Config.Vocab != tokens+3 || m.Config.EOS != 50256 {
		t.Fatalf("tokenizer %d tokens, model %d logits, EOS %d", tk.VocabSize(), m.Config.Vocab, m.Config.EOS)
	}
	// GPT-2's own tokenization of "Hello world" is 15496 995.
	if got := tk.Encode("Hello world"); !slices.Equal(got, []int32{15496, 995}) {
		t.Fatalf("Encode(Hello world) = %v", got)
	}
	imStart, imEnd := int32(tokens-2), int32(tokens-1)
	if got := tk.EncodeSpecial("<|im_start|>user"); got[0] != imStart || len(got) != 2 {
		t.Fatalf("EncodeSpecial = %v, want <|im_start|> (%d) then user", got, imStart)
	}
	if !slices.Contains(tk.EOT(), imEnd) || tk.ChatTemplate() != ChatMLTemplate {
		t.Fatalf("EOT %v, template %q", tk.EOT(), tk.ChatTemplate())
	}
	path, _ = writeBPEModel(t, -1)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "more than the model's vocabulary") {
		t.Fatalf("a vocabulary larger than the embedding: %v", err)
	}
}
