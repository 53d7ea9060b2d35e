package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/prefixd/prefixd/gguf"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/model"
)

func init() {
	register("gen-model", "write a random-weight Llama model (GGUF) of a given shape, for benchmarks without a download", runGenModel)
}

// runGenModel implements `prefixd gen-model`.
func runGenModel(args []string, stdout, stderr io.Writer) int {
	return exitCode("gen-model", genModel(args, stdout, stderr), stderr)
}

// presets are model shapes gen-model knows by name.
var presets = map[string]model.Config{
	// TinyLlama-1.1B (Llama 2 architecture, grouped-query attention).
	"tinyllama-1.1b": {Dim: 2048, Hidden: 5632, Layers: 22, Heads: 32, KVHeads: 4, Vocab: 32000, MaxSeqLen: 2048,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1},
}

func genModel(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prefixd gen-model", flag.ContinueOnError)
	out := fs.String("out", "", "the GGUF file to write (required)")
	preset := fs.String("preset", "", "a named shape (tinyllama-1.1b: dim 2048, 22 layers, 32 heads, 4 KV heads, hidden 5632, vocab 32000); shape flags given override it")
	typName := fs.String("type", "f16", "element type of the weight matrices: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k or q6_k (vectors are f32)")
	seed := fs.Uint64("seed", 1, "weights seed: the same seed and shape give the same file")
	tokFrom := fs.String("tokenizer-from", "", "a GGUF file whose tokenizer (its tokenizer.* metadata) the model gets, and its vocabulary size")
	// Without --preset: a small model that loads in a moment.
	c := model.Config{Dim: 256, Hidden: 768, Layers: 4, Heads: 8, KVHeads: 4, Vocab: 512, MaxSeqLen: 2048,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1}
	shape := []struct {
		name  string
		field func(*model.Config) *int
	}{
		{"dim", func(c *model.Config) *int { return &c.Dim }}, {"hidden", func(c *model.Config) *int { return &c.Hidden }},
		{"layers", func(c *model.Config) *int { return &c.Layers }}, {"heads", func(c *model.Config) *int { return &c.Heads }},
		{"kv-heads", func(c *model.Config) *int { return &c.KVHeads }}, {"vocab", func(c *model.Config) *int { return &c.Vocab }},
		{"max-seq-len", func(c *model.Config) *int { return &c.MaxSeqLen }},
	}
	given := make([]int, len(shape))
	for i, f := range shape {
		fs.IntVar(&given[i], f.name, *f.field(&c), "the model's "+f.name+" (overrides --preset)")
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *out == "" {
		return usagef("--out is required")
	}
	typ, ok := matrixTypes[*typName]
	if !ok {
		return usagef("--type %q: want one of %v", *typName, slices.Sorted(maps.Keys(matrixTypes)))
	}
	if *preset != "" {
		p, ok := presets[*preset]
		if !ok {
			return usagef("--preset %q: want one of %v", *preset, slices.Sorted(maps.Keys(presets)))
		}
		c = p
	}
	for i, f := range shape {
		if isSet(fs, f.name) {
			*f.field(&c) = given[i]
		}
	}
	tokenizer, err := tokenizerOf(*tokFrom)
	if err != nil {
		return err
	}
	if tokenizer != nil {
		n := vocabOf(tokenizer)
		if isSet(fs, "vocab") && c.Vocab != n {
			return usagef("--vocab %d: --tokenizer-from %s has %d tokens", c.Vocab, *tokFrom, n)
		}
		c.Vocab = n
	}
	if err := c.Validate(); err != nil {
		return usagef("%v", err)
	}
	// A matrix's rows are dim, q-dim or hidden values: whole blocks of typ.
	var perValue int // bytes, rounded up
	for _, n := range []int{c.Dim, c.QDim(), c.Hidden} {
		b, err := typ.RowSize(n)
		if err != nil {
			return usagef("--type %s: rows of %d values: %v", *typName, n, err)
		}
		perValue = max(perValue, (b+n-1)/n)
	}
	// The float32 model and its matrices converted for the file.
	params := parameters(c)
	if need, total := (4+int64(perValue))*params, physicalMemory(); total > 0 && need > total {
		return usagef("a model of %d parameters needs %d bytes of memory to generate as %s; this machine has %d", params, need, *typName, total)
	}
	// A large shape takes a minute: say what happens before the silence.
	fmt.Fprintf(stderr, "gen-model: drawing %d random weights, then writing them to %s as %s\n", params, *out, typ)
	m := model.Random(c, *seed)
	m.Name = fmt.Sprintf("prefixd-random-%s-seed%d", nameOf(*preset, c), *seed)
	// About: vectors are f32, and the metadata and vocabulary add a little.
	rowBytes, _ := typ.RowSize(c.Dim)
	size := params * int64(rowBytes) / int64(c.Dim)
	if err := writeModel(*out, m, typ, tokenizer, newProgress(stderr, "gen-model: writing "+*out), size); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s: %s, %d parameters, matrices %s\n", *out, m.Name, params, typ)
	return nil
}

// matrixTypes are the --type names: every weight type the loaders read.
var matrixTypes = map[string]kernels.DType{"f32": kernels.F32, "f16": kernels.F16, "bf16": kernels.BF16,
	"q8_0": kernels.Q8_0, "q4_0": kernels.Q4_0, "q4_1": kernels.Q4_1, "q5_0": kernels.Q5_0, "q5_1": kernels.Q5_1,
	"q4_k": kernels.Q4_K, "q5_k": kernels.Q5_K, "q6_k": kernels.Q6_K}

// nameOf names a shape: the preset's name, or its sizes.
func nameOf(preset string, c model.Config) string {
	if preset != "" {
		return preset
	}
	return fmt.Sprintf("d%d-l%d-h%d-kv%d-f%d-v%d", c.Dim, c.Layers, c.Heads, c.KVHeads, c.Hidden, c.Vocab)
}

// tokenizerOf is the tokenizer.* metadata of the GGUF file at path, in
// file order (none for an empty path); a file without tokens is an error.
func tokenizerOf(path string) ([]gguf.KV, error) {
	if path == "" {
		return nil, nil
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--tokenizer-from: %w", err)
	}
	defer f.Close()
	var kvs []gguf.KV
	for _, k := range f.Keys {
		if strings.HasPrefix(k, "tokenizer.") {
			kvs = append(kvs, gguf.KV{Key: k, Value: f.Metadata[k]})
		}
	}
	if vocabOf(kvs) == 0 {
		return nil, usagef("--tokenizer-from %s: no tokenizer.ggml.tokens", path)
	}
	return kvs, nil
}

// vocabOf is the number of tokenizer.ggml.tokens in kvs.
func vocabOf(kvs []gguf.KV) int {
	for _, kv := range kvs {
		if toks, ok := kv.Value.([]string); ok && kv.Key == "tokenizer.ggml.tokens" {
			return len(toks)
		}
	}
	return 0
}

// writeModel writes m to path as GGUF with the tokenizer metadata given,
// removing the file if writing fails, and reports the bytes written to p
// (of about size).
func writeModel(path string, m *model.Model, typ kernels.DType, tokenizer []gguf.KV, p *progress, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(&countingWriter{w: f, total: size, p: p, verb: "wrote"}, 1<<20)
	if err = errors.Join(model.WriteGGUF(w, m, typ, tokenizer...), w.Flush(), f.Close()); err != nil {
		os.Remove(path)
		return fmt.Errorf("gen-model: %w", err)
	}
	return nil
}
