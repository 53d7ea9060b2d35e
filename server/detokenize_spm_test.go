package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prefixd/prefixd/model"
)

// TestDetokenizeSentencePiece checks /detokenize on a SentencePiece
// vocabulary: the leading dummy space its encoding adds is dropped, as
// llama.cpp and Hugging Face drop it ([15043, 3186] is "Hello world", not
// " Hello world"), also after BOS.
func TestDetokenizeSentencePiece(t *testing.T) {
	path := filepath.Join("..", "..", "shared", "models", "llama-2-tiny-random.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("test model not available: %v", err)
	}
	m, err := model.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, withModel(m))
	for _, body := range []string{`{"tokens": [15043, 3186]}`, `{"tokens": [1, 15043, 3186]}`} {
		var dr detokenizeResponse
		h.post("/detokenize", body, &dr)
		if dr.Prompt != "Hello world" {
			t.Errorf("detokenize %s: %q, want \"Hello world\"", body, dr.Prompt)
		}
	}
}
