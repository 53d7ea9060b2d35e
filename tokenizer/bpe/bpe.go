// Package bpe is the BPE tokenizer of GPT-2, Llama 3, Qwen2 and the models
// that share their design, and of SentencePiece vocabularies converted to
// BPE: text is normalized and split into pre-tokens (see Splitter; any
// regular expression runs, see Compile), each pre-token's bytes are
// spelled as GPT-2's byte-level runes (or, with Config.CharLevel, its
// characters are the first symbols), and the ranked merges join adjacent
// symbols, the lowest rank first, the leftmost among equals. Added tokens
// (special or user-defined) are cut out of the text before that. It loads
// from GGUF metadata (through model/) and from a Hugging Face
// tokenizer.json with its normalizers, pre-tokenizers and decoders.
//
// Its output is checked token for token against llama.cpp's reference
// tokenizations and against Hugging Face's tokenizers in the tests.
package bpe

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// TokenType is a token's kind, numbered as GGUF's tokenizer.ggml.token_type
// (llama.cpp's llama_token_type).
type TokenType int32

// Token types.
const (
	Undefined   TokenType = 0 // treated as Normal
	Normal      TokenType = 1
	Unknown     TokenType = 2
	Control     TokenType = 3 // BOS, EOS, chat markers: matched in text only by EncodeSpecial
	UserDefined TokenType = 4 // added tokens that always match in text, and decode as their text
	Unused      TokenType = 5
	Byte        TokenType = 6 // <0xNN> byte fallback
)

// Merge is one BPE merge rule: the two symbols' texts, byte-level encoded.
// A merge's rank is its index in Config.Merges.
type Merge [2]string

// Config describes a vocabulary. Zero BOS and EOS mean token 0; set them to
// -1 for none.
type Config struct {
	// Tokens is each token's text by ID, byte-level encoded for normal
	// tokens unless CharLevel, as tokenizer.json and GGUF store it.
	// Required.
	Tokens []string
	// Types is each token's type; nil means all Normal.
	Types []TokenType
	// Merges in rank order (highest priority first). A merge whose result
	// is not a token is skipped, as it could never be emitted.
	Merges []Merge
	// Pre cuts text into pre-tokens; nil means the whole text is one.
	Pre Splitter
	// AddPrefixSpace prepends a space to each run of text between added
	// tokens that does not start with one, after normalization (what
	// tokenizer.json's ByteLevel add_prefix_space does as the first
	// pre-tokenizer; FromHF builds that into Pre).
	AddPrefixSpace bool
	// IgnoreMerges emits a pre-token that is itself a token whole, without
	// merging (Llama 3's ignore_merges).
	IgnoreMerges bool
	// CharLevel says the tokens are text as it is, not GPT-2's byte-level
	// spelling: SentencePiece-converted BPE (Gemma, older Llama exports),
	// where ▁ marks a space. A pre-token's symbols start as its
	// characters; a character that is no token becomes the <0xNN> Byte
	// tokens of its bytes if the vocabulary has them all (byte_fallback),
	// else Unknown.
	CharLevel bool
	// FuseUnknown makes a run of characters that each become Unknown one
	// Unknown token (tokenizer.json's fuse_unk; CharLevel only).
	FuseUnknown bool
	// Added holds the matching options of added tokens (Control and
	// UserDefined) that have any; the others match exactly, in the text
	// as given.
	Added map[int32]AddedOptions
	// DecodeToken, if set, gives the decoded text of a Normal token from
	// its stored text (tokenizer.json's decoders); nil means byte-level
	// decoding, or the text itself for CharLevel.
	DecodeToken func(string) string
	// DecodeFirstToken, if set, is DecodeToken for a Normal token that
	// starts a decoded text (tokenizer.json's Metaspace decoder drops
	// every ▁ of the first token rather than making it a space).
	DecodeFirstToken func(string) string
	// StripLeading lists runes Decode removes, each if it is there in
	// turn, from the start of the first non-empty token piece of a
	// decoded text (SentencePiece's dummy space; tokenizer.json's
	// Metaspace decoder and a Strip after Fuse). With one rune that is
	// exactly Hugging Face's result; with more, a first piece shorter than
	// the runes would lose fewer than the fused text would.
	StripLeading string
	// Normalize, if set, rewrites each run of text between added tokens
	// before pre-tokenization (Qwen's NFC).
	Normalize func(string) string
	// Unknown is the token for a byte with neither a byte-level token nor a
	// <0xNN> token, -1 to drop such bytes as llama.cpp does.
	Unknown int32
	// BOS and EOS are the beginning- and end-of-sequence tokens, -1 if none;
	// AddBOS says whether prompts start with BOS.
	BOS, EOS int32
	AddBOS   bool
	// EOT lists further tokens that end a turn (<|eot_id|>, <|im_end|>);
	// nil means the control tokens with the texts llama.cpp recognises as
	// such (see endOfTurn).
	EOT []int32
	// ChatTemplate is the model's Jinja chat template, if it has one.
	ChatTemplate string
}

// Tokenizer is a loaded byte-level BPE vocabulary. It is safe for
// concurrent use.
type Tokenizer struct {
	tokens []string
	types  []TokenType
	index  map[string]int32
	merges map[uint64]merged // by pair of token IDs
	// byteTok is the token of each byte's byte-level rune, -1 if none;
	// fallback its <0xNN> token or the unknown token, -1 if none.
	byteTok, fallback [256]int32
	pieceOff          []uint32 // token i decodes to pieces[pieceOff[i]:pieceOff[i+1]]
	pieces            []byte
	added             addedSet // matched in the text as given
	addedNorm         addedSet // Normalized ones, matched in normalized text
	cfg               Config
	scratch           sync.Pool // *work
	cache             wordCache
}

// endOfTurn are the texts of tokens that end a chat turn in the formats
// llama.cpp knows (its end-of-generation detection by token text).
var endOfTurn = []string{"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "<｜end▁of▁sentence｜>"}

// merged is what a merge rule turns a pair into.
type merged struct {
	rank, id int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// New builds a Tokenizer, checking the configuration.
func New(cfg Config) (*Tokenizer, error) {
	n := len(cfg.Tokens)
	if n == 0 {
		return nil, errors.New("bpe: empty vocabulary")
	}
	if n > 1<<31-1 {
		return nil, fmt.Errorf("bpe: %d tokens is more than int32 IDs hold", n)
	}
	if cfg.Types == nil {
		cfg.Types = make([]TokenType, n)
	}
	if len(cfg.Types) != n {
		return nil, fmt.Errorf("bpe: %d token types for %d tokens", len(cfg.Types), n)
	}
	for _, f := range []struct {
		name string
		id   int32
	}{{"BOS", cfg.BOS}, {"EOS", cfg.EOS}, {"unknown token", cfg.Unknown}} {
		if f.id < -1 || int(f.id) >= n {
			return nil, fmt.Errorf("bpe: %s %d outside the vocabulary of %d tokens", f.name, f.id, n)
		}
	}
	for _, id := range cfg.EOT {
		if id < 0 || int(id) >= n {
			return nil, fmt.Errorf("bpe: end-of-turn token %d outside the vocabulary of %d tokens", id, n)
		}
	}
	if cfg.AddBOS && cfg.BOS < 0 {
		return nil, errors.New("bpe: AddBOS without a BOS token")
	}
	t := &Tokenizer{tokens: cfg.Tokens, types: cfg.Types, index: make(map[string]int32, n), cfg: cfg,
		merges: make(map[uint64]merged, len(cfg.Merges)), pieceOff: make([]uint32, n+1)}
	for i := n - 1; i >= 0; i-- { // the lowest ID wins a duplicated text
		t.index[cfg.Tokens[i]] = int32(i)
	}
	if t.cfg.EOT == nil {
		for _, text := range endOfTurn {
			if id, ok := t.index[text]; ok && cfg.Types[id] == Control && id != cfg.EOS {
				t.cfg.EOT = append(t.cfg.EOT, id)
			}
		}
	}
	for i := range t.byteTok {
		t.byteTok[i], t.fallback[i] = -1, cfg.Unknown
		if id, ok := t.index[string(byteRune[i])]; ok {
			t.byteTok[i] = id
		}
	}
	for i, tok := range cfg.Tokens {
		switch cfg.Types[i] {
		case Normal, Undefined:
			switch {
			case cfg.DecodeToken != nil:
				t.pieces = append(t.pieces, cfg.DecodeToken(tok)...)
			case cfg.CharLevel:
				t.pieces = append(t.pieces, tok...)
			default:
				t.pieces = append(t.pieces, decodeByteLevel(tok)...)
			}
		case UserDefined:
			t.pieces = append(t.pieces, tok...)
		case Byte:
			b, ok := byteToken(tok)
			if !ok {
				return nil, fmt.Errorf("bpe: byte token %d is %q, not <0xNN>", i, tok)
			}
			t.pieces = append(t.pieces, b)
			t.fallback[b] = int32(i)
		case Control, Unknown, Unused: // decode to nothing
		default:
			return nil, fmt.Errorf("bpe: token %d has type %d", i, cfg.Types[i])
		}
		if len(t.pieces) > 1<<32-1 {
			return nil, errors.New("bpe: vocabulary text over 4 GiB")
		}
		t.pieceOff[i+1] = uint32(len(t.pieces))
	}
	for rank, m := range cfg.Merges {
		a, okA := t.index[m[0]]
		b, okB := t.index[m[1]]
		id, okC := t.index[m[0]+m[1]]
		if !okA || !okB || !okC {
			continue
		}
		if _, dup := t.merges[pairKey(a, b)]; !dup {
			t.merges[pairKey(a, b)] = merged{rank: int32(rank), id: id}
		}
	}
	t.added = newAddedSet(cfg.Tokens, cfg.Types, cfg.Added, false, nil)
	t.addedNorm = newAddedSet(cfg.Tokens, cfg.Types, cfg.Added, true, cfg.Normalize)
	t.scratch.New = func() any { return new(work) }
	return t, nil
}

// byteToken parses <0xNN>.
func byteToken(s string) (byte, bool) {
	if len(s) != 6 || !strings.HasPrefix(s, "<0x") || s[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(s[3:5], 16, 8)
	return byte(v), err == nil
}

// VocabSize is the number of token IDs.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// BOS is the beginning-of-sequence token, -1 if none.
func (t *Tokenizer) BOS() int32 { return t.cfg.BOS }

// EOS is the end-of-sequence token, -1 if none.
func (t *Tokenizer) EOS() int32 { return t.cfg.EOS }

// AddBOS reports whether prompts start with BOS.
func (t *Tokenizer) AddBOS() bool { return t.cfg.AddBOS }

// EOT returns the tokens besides EOS that end a turn. The caller must not
// modify the slice.
func (t *Tokenizer) EOT() []int32 { return t.cfg.EOT }

// ChatTemplate is the model's Jinja chat template, "" if it has none.
func (t *Tokenizer) ChatTemplate() string { return t.cfg.ChatTemplate }

// TokenText is token id's text as the vocabulary stores it (byte-level
// encoded for normal tokens), "" for an ID outside the vocabulary.
func (t *Tokenizer) TokenText(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// TokenID returns the token whose stored text is text.
func (t *Tokenizer) TokenID(text string) (int32, bool) {
	id, ok := t.index[text]
	return id, ok
}

// Type is token id's type (Undefined outside the vocabulary).
func (t *Tokenizer) Type(id int32) TokenType {
	if id < 0 || int(id) >= len(t.types) {
		return Undefined
	}
	return t.types[id]
}

// CheckVocabSize refuses a tokenizer with more tokens than a model's
// vocabulary (its embedding rows): such IDs would index past the
// embedding. Fewer is normal, since models pad their embeddings.
func CheckVocabSize(tokenizerSize, modelVocab int) error {
	if tokenizerSize > modelVocab {
		return fmt.Errorf("bpe: the tokenizer has %d tokens, more than the model's vocabulary of %d", tokenizerSize, modelVocab)
	}
	return nil
}

// AppendPiece appends the bytes token id contributes to a decoded text:
// its bytes for normal and byte tokens (a piece may be part of a UTF-8
// sequence), its text for user-defined tokens, nothing for control,
// unknown and unused tokens or an ID outside the vocabulary. It allocates
// only to grow dst.
func (t *Tokenizer) AppendPiece(dst []byte, id int32) []byte {
	if id < 0 || int(id) >= len(t.tokens) {
		return dst
	}
	return append(dst, t.pieces[t.pieceOff[id]:t.pieceOff[id+1]]...)
}

// Decode returns the text of ids: each token's piece in turn, as
// AppendTextPiece appends it. Byte sequences that are not valid UTF-8 are
// kept as they are.
func (t *Tokenizer) Decode(ids []int32) string {
	var b []byte
	started := false
	for _, id := range ids {
		b, started = t.AppendTextPiece(b, id, started)
	}
	return string(b)
}

// AppendTextPiece appends token id's piece to a text that holds the pieces
// of the sequence's tokens before it, for streaming: started reports
// whether any of those had a non-empty piece, and is returned updated for
// the next token. Until one has, the piece loses the runes the decoder
// strips at the start of a text (Config.StripLeading: SentencePiece's
// dummy space), so that the pieces concatenate to Decode's text. Control
// tokens, whose pieces are empty, leave the start where it is, as Hugging
// Face's decoding with special tokens skipped does.
func (t *Tokenizer) AppendTextPiece(dst []byte, id int32, started bool) ([]byte, bool) {
	if !started && t.cfg.DecodeFirstToken != nil && t.Type(id) == Normal {
		return append(dst, t.stripLeading([]byte(t.cfg.DecodeFirstToken(t.tokens[id])))...), true
	}
	n := len(dst)
	dst = t.AppendPiece(dst, id)
	if started || len(dst) == n {
		return dst, started || len(dst) > n
	}
	rest := t.stripLeading(dst[n:])
	return append(dst[:n], rest...), true
}

// stripLeading removes Config.StripLeading's runes from the start of b,
// each if it is there in turn.
func (t *Tokenizer) stripLeading(b []byte) []byte {
	for _, r := range t.cfg.StripLeading {
		var enc [utf8.UTFMax]byte
		e := enc[:utf8.EncodeRune(enc[:], r)]
		if !bytes.HasPrefix(b, e) {
			break
		}
		b = b[len(e):]
	}
	return b
}

// Encode tokenizes text, without BOS. User-defined added tokens that appear
// in text match as themselves; control tokens do not (text that spells
// <|im_start|> is tokenized as that text), so user input cannot forge
// them. This is llama.cpp's tokenize with parse_special false.
func (t *Tokenizer) Encode(text string) []int32 { return t.encode(nil, text, false) }

// EncodeSpecial tokenizes text, without BOS, with text that spells any
// added token, control tokens included, becoming that token, as Hugging
// Face tokenizers do by default: for rendered chat templates and
// /tokenize.
func (t *Tokenizer) EncodeSpecial(text string) []int32 { return t.encode(nil, text, true) }

func (t *Tokenizer) encode(dst []int32, text string, special bool) []int32 {
	w := t.scratch.Get().(*work)
	defer func() {
		clear(w.words) // the pool must not keep the caller's text alive
		t.scratch.Put(w)
	}()
	atStart := true
	for text != "" {
		start, end, id := t.added.find(text, special)
		dst = t.encodeRun(dst, w, text[:start], atStart, special)
		if id < 0 {
			break
		}
		dst = append(dst, id)
		text, atStart = text[end:], false
	}
	return dst
}

// encodeRun encodes a run of text between added tokens matched in the
// text as given: normalized, then cut at the added tokens matched in
// normalized text. atStart says whether the run starts the input.
func (t *Tokenizer) encodeRun(dst []int32, w *work, text string, atStart, special bool) []int32 {
	if text == "" {
		return dst
	}
	if t.cfg.Normalize != nil {
		text = t.cfg.Normalize(text)
	}
	for text != "" {
		start, end, id := t.addedNorm.find(text, special)
		dst = t.encodeText(dst, w, text[:start], atStart)
		if id < 0 {
			break
		}
		dst = append(dst, id)
		text, atStart = text[end:], false
	}
	return dst
}

// encodeText encodes a normalized run of text that holds no added token.
func (t *Tokenizer) encodeText(dst []int32, w *work, text string, atStart bool) []int32 {
	if text == "" {
		return dst
	}
	if t.cfg.AddPrefixSpace && text[0] != ' ' {
		text = " " + text
	}
	w.words = w.words[:0]
	switch pre := t.cfg.Pre.(type) {
	case nil:
		w.words = append(w.words, text)
	case hfPipeline:
		w.words = pre.splitAt(w.words, text, atStart)
	default:
		w.words = pre.Split(w.words, text)
	}
	for _, word := range w.words {
		dst = t.encodeWord(dst, w, word)
	}
	return dst
}

// encodeWord encodes one pre-token, from the cache when it has been seen.
func (t *Tokenizer) encodeWord(dst []int32, w *work, word string) []int32 {
	if ids, ok := t.cache.get(word); ok {
		return append(dst, ids...)
	}
	n := len(dst)
	dst = t.mergeWord(dst, w, word)
	t.cache.put(word, dst[n:])
	return dst
}

// mergeWord encodes one pre-token by its merges.
func (t *Tokenizer) mergeWord(dst []int32, w *work, word string) []int32 {
	if t.cfg.IgnoreMerges {
		key := word
		if !t.cfg.CharLevel {
			w.buf = appendByteLevel(w.buf[:0], word)
			key = string(w.buf)
		}
		if id, ok := t.index[key]; ok {
			return append(dst, id)
		}
	}
	if t.cfg.CharLevel {
		w.syms = t.merge(w, t.charSymbols(w.syms[:0], word))
		return append(dst, w.syms...)
	}
	syms := w.syms[:0]
	for i := range len(word) {
		syms = append(syms, t.byteTok[word[i]])
	}
	syms = t.merge(w, syms)
	for i, id := range syms {
		if id >= 0 {
			dst = append(dst, id)
		} else if fb := t.fallback[word[w.start[i]]]; fb >= 0 {
			dst = append(dst, fb)
		}
	}
	w.syms = syms
	return dst
}

// charSymbols appends a CharLevel pre-token's first symbols to syms: each
// character's token, or the Byte tokens of its bytes if it has none,
// else Unknown (one for a run of them with FuseUnknown), else nothing.
func (t *Tokenizer) charSymbols(syms []int32, word string) []int32 {
	prevUnknown := false
	for i := 0; i < len(word); {
		_, n := utf8.DecodeRuneInString(word[i:])
		ch := word[i : i+n]
		i += n
		if id, ok := t.index[ch]; ok {
			syms, prevUnknown = append(syms, id), false
			continue
		}
		whole := true
		for k := range len(ch) {
			if fb := t.fallback[ch[k]]; fb < 0 || t.types[fb] != Byte {
				whole = false
			}
		}
		switch {
		case whole:
			for k := range len(ch) {
				syms = append(syms, t.fallback[ch[k]])
			}
			prevUnknown = false
		case t.cfg.Unknown >= 0 && !(t.cfg.FuseUnknown && prevUnknown):
			syms, prevUnknown = append(syms, t.cfg.Unknown), true
		}
	}
	return syms
}
