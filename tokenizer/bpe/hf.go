package bpe

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// maxHFTokens bounds the IDs a tokenizer.json may use (the largest
// vocabularies hold a few hundred thousand), so that a stray ID cannot
// make FromHF allocate gigabytes.
const maxHFTokens = 1 << 24

// hfTokenizer is the part of a Hugging Face tokenizer.json this package
// reads.
type hfTokenizer struct {
	AddedTokens []struct {
		ID                                  int32
		Content                             string
		SingleWord                          bool `json:"single_word"`
		LStrip, RStrip, Special, Normalized bool
	} `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         struct {
		Type                    string
		Vocab                   map[string]int32
		Merges                  []json.RawMessage
		IgnoreMerges            bool     `json:"ignore_merges"`
		ByteFallback            bool     `json:"byte_fallback"`
		FuseUnk                 bool     `json:"fuse_unk"`
		Dropout                 *float64 `json:"dropout"`
		UnkToken                *string  `json:"unk_token"`
		ContinuingSubwordPrefix *string  `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string  `json:"end_of_word_suffix"`
	}
}

// hfConfig is the part of tokenizer_config.json this package reads.
type hfConfig struct {
	BOS          hfTokenRef      `json:"bos_token"`
	EOS          hfTokenRef      `json:"eos_token"`
	AddBOS       *bool           `json:"add_bos_token"`
	ChatTemplate json.RawMessage `json:"chat_template"`
}

// hfTokenRef is a special token named as a string or as an object with
// its content, or null.
type hfTokenRef string

// UnmarshalJSON implements json.Unmarshaler.
func (r *hfTokenRef) UnmarshalJSON(b []byte) error {
	var s *string
	if err := json.Unmarshal(b, &s); err == nil {
		if s != nil {
			*r = hfTokenRef(*s)
		}
		return nil
	}
	var o struct{ Content string }
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("a special token is neither a string nor an object with content: %w", err)
	}
	*r = hfTokenRef(o.Content)
	return nil
}

// LoadHF reads a Hugging Face tokenizer folder: tokenizer.json and, if
// present, tokenizer_config.json (BOS, EOS, add_bos_token, chat_template).
func LoadHF(dir string) (*Tokenizer, error) {
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("bpe: %w", err)
	}
	cj, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("bpe: %w", err)
	}
	return FromHF(tj, cj)
}

// FromHF builds a Tokenizer from the contents of tokenizer.json and
// tokenizer_config.json (nil if the folder has none). It reads a BPE
// model, byte-level (a ByteLevel pre-tokenizer) or on the text itself
// (SentencePiece-converted BPE with byte_fallback, ▁ for spaces), with
// ignore_merges and fuse_unk; the normalizers, pre-tokenizers and decoders
// hfNormalizer, parseHFPre and hfDecoder.parse list; and added tokens with
// their lstrip, rstrip, single_word and normalized options. Anything else
// is refused with an error naming the component and its value, since an
// approximation would change tokens silently.
func FromHF(tokenizerJSON, configJSON []byte) (*Tokenizer, error) {
	var kind struct{ Model struct{ Type string } }
	if err := json.Unmarshal(tokenizerJSON, &kind); err != nil {
		return nil, fmt.Errorf("bpe: tokenizer.json: %w", err)
	}
	if t := kind.Model.Type; t != "BPE" && t != "" { // before the vocabulary, which other models shape differently
		return nil, fmt.Errorf("bpe: tokenizer.json model type %q, only BPE is supported", t)
	}
	var f hfTokenizer
	if err := json.Unmarshal(tokenizerJSON, &f); err != nil {
		return nil, fmt.Errorf("bpe: tokenizer.json: %w", err)
	}
	m := f.Model
	switch {
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf("bpe: tokenizer.json BPE dropout %v is not supported", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf("bpe: tokenizer.json BPE continuing_subword_prefix %q is not supported", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fmt.Errorf("bpe: tokenizer.json BPE end_of_word_suffix %q is not supported", *m.EndOfWordSuffix)
	}
	var cfg Config
	cfg.BOS, cfg.EOS, cfg.Unknown = -1, -1, -1
	cfg.IgnoreMerges, cfg.FuseUnknown = m.IgnoreMerges, m.FuseUnk
	// Each ID is checked against the bounds before it sizes anything: the
	// size is the largest ID plus one, which for an ID near 2^31 does not
	// fit an int32.
	n := 0
	checkID := func(what, text string, id int32) error {
		if id < 0 || id >= maxHFTokens {
			return fmt.Errorf("bpe: tokenizer.json %s %q has ID %d, outside 0..%d", what, text, id, maxHFTokens-1)
		}
		n = max(n, int(id)+1)
		return nil
	}
	for text, id := range m.Vocab {
		if err := checkID("token", text, id); err != nil {
			return nil, err
		}
	}
	for _, a := range f.AddedTokens {
		if err := checkID("added token", a.Content, a.ID); err != nil {
			return nil, err
		}
	}
	cfg.Tokens, cfg.Types = make([]string, n), make([]TokenType, n)
	filled := make([]bool, n)
	for text, id := range m.Vocab {
		cfg.Tokens[id], cfg.Types[id], filled[id] = text, Normal, true
		if _, ok := byteToken(text); ok && m.ByteFallback {
			cfg.Types[id] = Byte
		}
	}
	for _, a := range f.AddedTokens {
		// An added token whose text the model's vocabulary holds takes the
		// vocabulary's ID, as Hugging Face's AddedVocabulary gives it.
		id := a.ID
		if vid, ok := m.Vocab[a.Content]; ok {
			id = vid
		}
		cfg.Tokens[id], cfg.Types[id], filled[id] = a.Content, UserDefined, true
		if a.Special {
			cfg.Types[id] = Control
		}
		if o := (AddedOptions{LStrip: a.LStrip, RStrip: a.RStrip, SingleWord: a.SingleWord, Normalized: a.Normalized}); o != (AddedOptions{}) {
			if cfg.Added == nil {
				cfg.Added = map[int32]AddedOptions{}
			}
			cfg.Added[id] = o
		}
	}
	for id, ok := range filled {
		if !ok { // a hole in the IDs: no text maps to it
			cfg.Types[id] = Unused
		}
	}
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("bpe: tokenizer.json unk_token %q is not in the vocabulary", *m.UnkToken)
		}
		cfg.Unknown = id
	}
	var err error
	if cfg.Merges, err = hfMerges(m.Merges); err != nil {
		return nil, err
	}
	if cfg.Normalize, err = hfNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	var steps hfPipeline
	byteLevel := false
	if err := parseHFPre(f.PreTokenizer, &steps, &byteLevel); err != nil {
		return nil, err
	}
	cfg.CharLevel = !byteLevel
	cfg.Pre = steps.splitter()
	var dec hfDecoder
	if err := dec.parse(f.Decoder); err != nil {
		return nil, err
	}
	if !(byteLevel && dec.byteLevel && len(dec.token) == 1) { // else the default, byte-level decoding
		if byteLevel && !dec.byteLevel {
			dec.token = append([]func(string) string{func(s string) string { return string(decodeByteLevel(s)) }}, dec.token...)
		}
		cfg.DecodeToken = chain(dec.token)
	}
	if dec.firstDiffers {
		if byteLevel && !dec.byteLevel {
			dec.first = append([]func(string) string{func(s string) string { return string(decodeByteLevel(s)) }}, dec.first...)
		}
		cfg.DecodeFirstToken = chain(dec.first)
	}
	cfg.StripLeading = dec.strip
	if err := hfSpecials(&cfg, f.PostProcessor, configJSON); err != nil {
		return nil, err
	}
	return New(cfg)
}

// splitter returns the pipeline as a Splitter: nil if empty, and a
// Sequence of its Splitters when every step is a Split with behavior
// Isolated or a ByteLevel without add_prefix_space (Llama 3's and Qwen's),
// which keeps their fast paths and allocates less.
func (h hfPipeline) splitter() Splitter {
	var seq Sequence
	for _, st := range h {
		switch st := st.(type) {
		case splitterStep:
			seq = append(seq, st.sp)
		case byteLevelStep:
			if st.addPrefixSpace {
				return h
			}
			if st.useRegex {
				seq = append(seq, gpt2{})
			}
		default:
			return h
		}
	}
	switch len(seq) {
	case 0:
		return nil
	case 1:
		return seq[0]
	}
	return seq
}

// hfMerges reads merges written as "a b" strings or as ["a", "b"] pairs.
func hfMerges(raw []json.RawMessage) ([]Merge, error) {
	out := make([]Merge, len(raw))
	for i, r := range raw {
		var s string
		if err := json.Unmarshal(r, &s); err == nil {
			a, b, ok := strings.Cut(s, " ")
			if !ok {
				return nil, fmt.Errorf("bpe: tokenizer.json merge %d %q is not two symbols", i, s)
			}
			out[i] = Merge{a, b}
			continue
		}
		var pair []string
		if err := json.Unmarshal(r, &pair); err != nil || len(pair) != 2 {
			return nil, fmt.Errorf("bpe: tokenizer.json merge %d is neither \"a b\" nor a pair", i)
		}
		out[i] = Merge{pair[0], pair[1]}
	}
	return out, nil
}

// hfSpecials sets BOS, EOS, AddBOS and the chat template from
// tokenizer_config.json, and AddBOS from a TemplateProcessing
// post-processor that starts with BOS when the config does not say.
func hfSpecials(cfg *Config, post json.RawMessage, configJSON []byte) error {
	var c hfConfig
	if len(configJSON) > 0 {
		if err := json.Unmarshal(configJSON, &c); err != nil {
			return fmt.Errorf("bpe: tokenizer_config.json: %w", err)
		}
	}
	find := func(what string, text hfTokenRef, dst *int32) error {
		if text == "" {
			return nil
		}
		for i, t := range cfg.Tokens {
			if t == string(text) && cfg.Types[i] != Unused {
				*dst = int32(i)
				return nil
			}
		}
		return fmt.Errorf("bpe: tokenizer_config.json %s %q is not a token", what, text)
	}
	if err := find("bos_token", c.BOS, &cfg.BOS); err != nil {
		return err
	}
	if err := find("eos_token", c.EOS, &cfg.EOS); err != nil {
		return err
	}
	if c.AddBOS != nil {
		cfg.AddBOS = *c.AddBOS && cfg.BOS >= 0
	} else if len(post) > 0 && cfg.BOS >= 0 {
		var p struct {
			Type   string
			Single []struct {
				SpecialToken *struct{ ID string } `json:"SpecialToken"`
			}
		}
		if json.Unmarshal(post, &p) == nil && p.Type == "TemplateProcessing" && len(p.Single) > 0 &&
			p.Single[0].SpecialToken != nil && p.Single[0].SpecialToken.ID == cfg.Tokens[cfg.BOS] {
			cfg.AddBOS = true
		}
	}
	if len(c.ChatTemplate) > 0 && string(c.ChatTemplate) != "null" {
		if err := json.Unmarshal(c.ChatTemplate, &cfg.ChatTemplate); err != nil {
			var named []struct{ Name, Template string }
			if err := json.Unmarshal(c.ChatTemplate, &named); err != nil {
				return errors.New("bpe: tokenizer_config.json chat_template is neither a string nor a list of named templates")
			}
			for _, t := range named {
				if t.Name == "default" {
					cfg.ChatTemplate = t.Template
				}
			}
		}
	}
	return nil
}
