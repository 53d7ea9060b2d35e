package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prefixd/prefixd/chat"
	"github.com/prefixd/prefixd/internal/sidefile"
	"github.com/prefixd/prefixd/model"
)

// loadModel returns the model at path, or the built-in one for "", with
// the vocabulary of the llama2.c tokenizer file at tokenizer if given (a
// llama2.c checkpoint carries none); mapped keeps a GGUF or safetensors
// file mapped (model.LoadMapped) rather than copied (model.Load).
func loadModel(path, tokenizer string, mapped bool) (*model.Model, error) {
	m := model.Builtin()
	if path != "" {
		load := model.Load
		if mapped {
			load = model.LoadMapped
		}
		var err error
		if m, err = load(path); err != nil {
			return nil, err
		}
	}
	if tokenizer != "" {
		tk, err := loadTokenizer(tokenizer, m.Config.Vocab)
		if err != nil {
			return nil, err
		}
		m.Tokenizer = tk
	}
	return m, nil
}

// weightsMapped decides whether a GGUF or safetensors model of size bytes
// stays in the file's shared mapping (model.LoadMapped) rather than being
// copied into huge pages (model.Load): when asked (--mmap, a GPU), and
// when the copy would not fit the memory free now (tooLarge), so that a
// model larger than the memory still runs, paging from the file, instead
// of the process being killed as its copy grows. Where the free memory is
// unknown (not Linux) the copy is made.
func weightsMapped(size int64, asked bool, free func() (freeMemory, error)) (mapped, tooLarge bool) {
	if asked {
		return true, false
	}
	if f, err := free(); err == nil && size > f.bytes {
		return true, true
	}
	return false, false
}

// mapsWeights is weightsMapped for the model at path ("" for the built-in
// one) and this machine's free memory, for generate and bench.
func mapsWeights(path string, asked bool) bool {
	if path == "" {
		return asked
	}
	_, size, err := modelFile(path)
	if err != nil {
		return asked // the load reports the error
	}
	mapped, _ := weightsMapped(size, asked, loadFreeMemory)
	return mapped
}

// checkTensorsUsage describes --check-tensors, a flag of serve and
// generate.
const checkTensorsUsage = "scan every weight for NaN and infinite values (every type; quantized blocks' scales through their values) after loading, and refuse a model that holds one, naming the tensor and the first bad index; reads all the weights once (seconds for a 7B model)"

// checkTensors runs m.CheckTensors for --check-tensors, closing m when it
// fails. The scan stops when ctx ends (a signal during start-up).
func checkTensors(ctx context.Context, m *model.Model, log *slog.Logger) error {
	started := time.Now()
	if err := m.CheckTensors(ctx); err != nil {
		m.Close()
		return err
	}
	log.Info("checked tensors", "finite", true, "took", time.Since(started).Round(time.Millisecond))
	return nil
}

// loadTokenizer reads a llama2.c tokenizer file of the model's vocab
// tokens; one that holds more is another model's, refused as a usage
// error.
func loadTokenizer(path string, vocab int) (*model.SentencePiece, error) {
	tk, err := model.LoadLlama2CTokenizer(path, vocab)
	if err != nil {
		return nil, usagef("--tokenizer %s: %w", path, err)
	}
	return tk, nil
}

// maxChatTemplateBytes bounds the --chat-template file; real templates
// are a few KB.
const maxChatTemplateBytes = 1 * sidefile.MiB

// loadChatTemplate parses the --chat-template file, if given (nil if
// not): a path that exists is a Jinja file; otherwise it is a built-in
// template's name (llama.cpp's: llama2, llama3, chatml, ...), and an
// error lists the names.
func loadChatTemplate(path string) (*chat.Template, error) {
	if path == "" {
		return nil, nil
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		tpl, err := chat.Builtin(path)
		if err != nil {
			return nil, usagef("--chat-template %s: no such file, and not a built-in template (%s)", path, strings.Join(chat.BuiltinNames(), ", "))
		}
		return tpl, nil
	}
	src, err := sidefile.Read(path, maxChatTemplateBytes)
	if err != nil {
		return nil, usagef("--chat-template: %v", err)
	}
	tpl, err := chat.Parse(string(src))
	if err != nil {
		return nil, usagef("--chat-template %s: %v", path, err)
	}
	return tpl, nil
}

// modelID is the id /v1/models and completions report when
// --served-model-name is not given: the built-in model's name, or a model
// file's base name without its extension (stories260K), since the names
// formats carry are descriptions with spaces ("llama2.c checkpoint",
// "LLaMA v2") that clients cannot pass back easily.
func modelID(path string, m *model.Model) string {
	if path == "" {
		return m.Name
	}
	base := filepath.Base(filepath.Clean(path))
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		base = strings.TrimSuffix(base, filepath.Ext(path)) // a folder's "Qwen2.5-0.5B" keeps its dot
	}
	return strings.Join(strings.Fields(base), "-")
}

// modelFile describes a model file for the start-up log: its format, as
// model.Load tells them apart (a Hugging Face folder, GGUF by its magic,
// otherwise a llama2.c checkpoint), and its size in bytes (a folder's
// safetensors files).
func modelFile(path string) (format string, size int64, err error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		shards, _ := filepath.Glob(filepath.Join(path, "*.safetensors"))
		for _, s := range shards {
			if st, err := os.Stat(s); err == nil {
				size += st.Size()
			}
		}
		return "hugging face", size, nil
	}
	st, err := os.Stat(path)
	if err == nil {
		// Checked before opening: opening a named pipe would block.
		err = sidefile.CheckRegular(path, st)
	}
	if err != nil {
		return "", 0, fmt.Errorf("model: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("model: %w", err)
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err == nil && bytes.Equal(magic, []byte("GGUF")) {
		return "gguf", st.Size(), nil
	}
	return "llama2.c", st.Size(), nil
}

// parameters counts a Llama-architecture model's weights from its shape:
// the token embedding; per layer two norms, the four attention matrices
// and the three feed-forward ones; the final norm; and the classifier
// unless it is the embedding.
func parameters(c model.Config) int64 {
	d, kv, h, v := int64(c.Dim), int64(c.KVDim()), int64(c.Hidden), int64(c.Vocab)
	layer := 2*d + 2*d*d + 2*kv*d + 3*h*d
	n := v*d + int64(c.Layers)*layer + d
	if !c.SharedClassifier {
		n += v * d
	}
	return n
}
