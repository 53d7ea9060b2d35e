package model

import (
	"fmt"
	"maps"
	"strings"

	"github.com/prefixd/prefixd/gguf"
	"github.com/prefixd/prefixd/tokenizer/bpe"
)

var _ Tokenizer = (*bpe.Tokenizer)(nil)

// LoadGGUFTokenizer reads the tokenizer of a GGUF file, a whole model or a
// vocabulary-only file: SentencePiece for tokenizer.ggml.model "llama",
// byte-level BPE for "gpt2".
func LoadGGUFTokenizer(path string) (Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return GGUFTokenizer(ggufMetadata(f))
}

// GGUFTokenizer builds the tokenizer that GGUF metadata (as
// ReadGGUFMetadata returns it, or with arrays as package gguf's typed
// slices) describes, or an error naming what is
// missing or unsupported.
func GGUFTokenizer(meta map[string]any) (Tokenizer, error) {
	if _, ok := meta["tokenizer.ggml.tokens"]; !ok {
		return nil, fmt.Errorf("model: GGUF has no tokenizer.ggml.tokens")
	}
	switch m, _ := meta["tokenizer.ggml.model"].(string); m {
	case "gpt2":
		return ggufBPE(meta)
	case "gemma4":
		// llama.cpp's "gemma4" model is BPE over text as it is, with
		// spaces spelt ▁, whatever tokenizer.ggml.pre says.
		m := maps.Clone(meta)
		m["tokenizer.ggml.pre"] = "gemma4"
		return ggufBPE(m)
	default: // "llama", or unknown: ggufTokenizer names it
		sp, err := ggufTokenizer(meta)
		if err != nil {
			return nil, err
		}
		return sp, nil
	}
}

// ggufStrings reads a GGUF array of strings.
func ggufStrings(meta map[string]any, key string) ([]string, error) {
	raw, ok := arrayMeta(meta, key)
	if !ok {
		return nil, fmt.Errorf("model: GGUF metadata %q missing or not an array", key)
	}
	out := make([]string, raw.Len())
	for i := range out {
		if out[i], ok = raw.String(i); !ok {
			return nil, fmt.Errorf("model: GGUF %s[%d] is not a string", key, i)
		}
	}
	return out, nil
}

// ggufBPE builds a byte-level BPE tokenizer from llama.cpp's "gpt2"
// tokenizer metadata, with llama.cpp's defaults where a key is absent.
func ggufBPE(meta map[string]any) (*bpe.Tokenizer, error) {
	tokens, err := ggufStrings(meta, "tokenizer.ggml.tokens")
	if err != nil {
		return nil, err
	}
	rawMerges, err := ggufStrings(meta, "tokenizer.ggml.merges")
	if err != nil {
		return nil, err
	}
	merges := make([]bpe.Merge, len(rawMerges))
	for i, m := range rawMerges {
		k := strings.IndexByte(m[min(1, len(m)):], ' ') + 1 // a merge's left side may be one space
		if k <= 0 {
			return nil, fmt.Errorf("model: GGUF merge %d %q is not two symbols", i, m)
		}
		merges[i] = bpe.Merge{m[:k], m[k+1:]}
	}
	// Unknown stays -1: llama.cpp drops a byte that has no token.
	cfg := bpe.Config{Tokens: tokens, Merges: merges, Unknown: -1, BOS: -1, EOS: -1}
	if ts, ok := arrayMeta(meta, "tokenizer.ggml.token_type"); ok {
		if ts.Len() != len(tokens) {
			return nil, fmt.Errorf("model: GGUF has %d token types for %d tokens", ts.Len(), len(tokens))
		}
		cfg.Types = make([]bpe.TokenType, ts.Len())
		for i := range cfg.Types {
			typ, _ := ts.Int(i)
			cfg.Types[i] = bpe.TokenType(typ)
		}
	}
	pre, _ := meta["tokenizer.ggml.pre"].(string)
	if cfg.Pre, err = bpe.PreTokenizer(pre); err != nil {
		return nil, fmt.Errorf("model: GGUF tokenizer.ggml.pre: %w", err)
	}
	bpe.PreTokenizerOptions(pre).Apply(&cfg)
	id := func(key string, dst *int32) error {
		v, ok := meta[key]
		if !ok {
			return nil
		}
		n, ok := v.(int64)
		if !ok || n < 0 || n >= int64(len(tokens)) {
			return fmt.Errorf("model: GGUF %s = %v is not a token of the %d", key, v, len(tokens))
		}
		*dst = int32(n)
		return nil
	}
	var eot, eom int32 = -1, -1
	for _, f := range []struct {
		key string
		dst *int32
	}{{"tokenizer.ggml.bos_token_id", &cfg.BOS}, {"tokenizer.ggml.eos_token_id", &cfg.EOS},
		{"tokenizer.ggml.eot_token_id", &eot},
		{"tokenizer.ggml.eom_token_id", &eom}} {
		if err := id(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	for _, t := range []int32{eot, eom} {
		if t >= 0 && t != cfg.EOS {
			cfg.EOT = append(cfg.EOT, t)
		}
	}
	if v, ok := meta["tokenizer.ggml.add_bos_token"].(int64); ok {
		cfg.AddBOS = v != 0
	}
	if pre == "gemma4" || pre == "granite-embed-multi-311m" {
		cfg.AddBOS = true // llama.cpp overrides add_bos_token for Gemma 4's pre-tokenizer
	}
	cfg.ChatTemplate, _ = meta["tokenizer.chat_template"].(string)
	return bpe.New(cfg)
}
