// Command chatmodel writes a tiny random-weight Llama GGUF model with a
// real byte-level BPE vocabulary (read from a vocabulary-only GGUF file,
// such as llama.cpp's ggml-vocab-gpt-2.gguf), ChatML's control tokens and
// a chat template: a model to serve when a test needs chat end to end.
//
//	go run ./internal/ggufwrite/chatmodel -vocab ../shared/models/vocab/ggml-vocab-gpt-2.gguf -out chat.gguf
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	"github.com/prefixd/prefixd/internal/ggufwrite"
	"github.com/prefixd/prefixd/model"
)

func main() {
	vocab := flag.String("vocab", "../shared/models/vocab/ggml-vocab-gpt-2.gguf", "vocabulary-only GGUF file")
	out := flag.String("out", "", "output GGUF file (required)")
	flag.Parse()
	if err := run(*vocab, *out); err != nil {
		fmt.Fprintln(os.Stderr, "chatmodel:", err)
		os.Exit(1)
	}
}

func run(vocab, out string) error {
	if out == "" {
		return fmt.Errorf("-out is required")
	}
	meta, err := model.ReadGGUFMetadata(vocab)
	if err != nil {
		return err
	}
	if meta, err = ggufwrite.WithChatML(meta, ggufwrite.ChatMLTemplate); err != nil {
		return err
	}
	n := len(meta["tokenizer.ggml.tokens"].([]any))
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	shape := ggufwrite.Shape{Dim: 16, Hidden: 32, Layers: 1, Heads: 2, KVHeads: 1, MaxSeqLen: 1024}
	if err := ggufwrite.Llama(w, meta, n+8, shape, 1); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
