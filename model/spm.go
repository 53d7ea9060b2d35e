package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/prefixd/prefixd/internal/minheap"
	"github.com/prefixd/prefixd/internal/sidefile"
)

// SentencePiece is Llama's BPE vocabulary in the form llama2.c and GGUF
// store it: pieces with merge scores, byte-fallback pieces <0x00>..<0xFF>,
// and a dummy space prefix. Encode merges, greedily, the adjacent pair
// whose union is the best-scoring piece, as SentencePiece BPE does. It is
// safe for concurrent use.
type SentencePiece struct {
	pieces   []string // piece text, with SentencePiece's ▁ turned into a space
	scores   []float32
	index    map[string]int32
	bytes    [256]int32 // byte-fallback token of each byte, -1 if none
	control  []bool     // tokens that decode to nothing (BOS, EOS, unknown)
	byteOf   []int16    // the byte a byte-fallback token stands for, -1 for others
	bos, eos int32
}

func newSentencePiece(pieces []string, scores []float32, control []bool, bos, eos int32) (*SentencePiece, error) {
	if len(pieces) == 0 || len(pieces) != len(scores) {
		return nil, fmt.Errorf("model: vocabulary of %d pieces and %d scores", len(pieces), len(scores))
	}
	t := &SentencePiece{scores: scores, index: make(map[string]int32, len(pieces)), bos: bos, eos: eos,
		control: control, pieces: make([]string, len(pieces)), byteOf: make([]int16, len(pieces))}
	if t.control == nil {
		t.control = make([]bool, len(pieces))
	}
	for i := range t.bytes {
		t.bytes[i] = -1
	}
	for i, p := range pieces {
		p = strings.ReplaceAll(p, "▁", " ")
		t.pieces[i] = p
		t.byteOf[i] = -1
		if len(p) == 6 && strings.HasPrefix(p, "<0x") && p[5] == '>' {
			var b byte
			if _, err := fmt.Sscanf(p[3:5], "%02X", &b); err == nil {
				t.bytes[b] = int32(i)
				t.byteOf[i] = int16(b)
				continue
			}
		}
		if _, dup := t.index[p]; !dup && !t.control[i] {
			t.index[p] = int32(i)
		}
	}
	for _, id := range []int32{bos, eos} {
		if id >= 0 && int(id) < len(t.control) {
			t.control[id] = true
		}
	}
	return t, nil
}

// VocabSize implements Tokenizer.
func (t *SentencePiece) VocabSize() int { return len(t.pieces) }

// HasPiece reports whether the vocabulary holds a piece spelt text, with
// ▁ for a space as the vocabulary stores it (control pieces such as <s>
// included): for choosing a chat template by a vocabulary's markers.
func (t *SentencePiece) HasPiece(text string) bool {
	p := strings.ReplaceAll(text, "▁", " ")
	if _, ok := t.index[p]; ok {
		return true
	}
	for i, c := range t.control {
		if c && t.pieces[i] == p {
			return true
		}
	}
	return false
}

// Encode implements Tokenizer: a dummy space, then each character as its
// piece (or its UTF-8 bytes as byte-fallback tokens), then merges.
func (t *SentencePiece) Encode(text string) []int32 {
	if text == "" {
		return nil
	}
	return t.merge(t.initial(" " + text))
}

// initial splits text into one token per character, or its UTF-8 bytes as
// byte-fallback tokens where the character is not a piece.
func (t *SentencePiece) initial(text string) []int32 {
	ids := make([]int32, 0, len(text))
	for i := 0; i < len(text); {
		_, n := utf8.DecodeRuneInString(text[i:])
		if id, ok := t.index[text[i:i+n]]; ok {
			ids = append(ids, id)
		} else {
			for _, b := range []byte(text[i : i+n]) {
				if t.bytes[b] >= 0 {
					ids = append(ids, t.bytes[b])
				}
			}
		}
		i += n
	}
	return ids
}

// mergeCand is a possible merge of the symbols at left and right (indices
// into the starting sequence), while they hold lid and rid, into id.
type mergeCand struct {
	score        float32
	left, right  int
	lid, rid, id int32
}

// merge applies SentencePiece's BPE merges to ids: repeatedly the adjacent
// pair whose merged piece scores highest, the leftmost among equals, until
// no pair forms a piece. A heap of candidate pairs over a linked list of
// symbols makes it O(n log n); stale candidates (a side since merged away)
// are skipped when popped.
func (t *SentencePiece) merge(ids []int32) []int32 {
	n := len(ids)
	next, prev := make([]int, n), make([]int, n)
	for i := range n {
		next[i], prev[i] = i+1, i-1
	}
	alive := make([]bool, n) // a merged symbol's right side dies
	for i := range alive {
		alive[i] = true
	}
	h := minheap.Heap[mergeCand]{Less: func(a, b mergeCand) bool {
		return a.score > b.score || a.score == b.score && a.left < b.left
	}}
	var buf []byte
	offer := func(l, r int) {
		if l < 0 || r >= n {
			return
		}
		buf = append(append(buf[:0], t.pieces[ids[l]]...), t.pieces[ids[r]]...)
		if id, ok := t.index[string(buf)]; ok {
			h.Push(mergeCand{score: t.scores[id], left: l, right: r, lid: ids[l], rid: ids[r], id: id})
		}
	}
	for i := 0; i+1 < n; i++ {
		offer(i, i+1)
	}
	for h.Len() > 0 {
		c := h.Pop()
		if !alive[c.left] || !alive[c.right] || next[c.left] != c.right || ids[c.left] != c.lid || ids[c.right] != c.rid {
			continue // a side has merged with something else since
		}
		ids[c.left] = c.id
		alive[c.right] = false
		next[c.left] = next[c.right]
		if next[c.left] < n {
			prev[next[c.left]] = c.left
		}
		offer(prev[c.left], c.left)
		offer(c.left, next[c.left])
	}
	out := ids[:0]
	for i := 0; i < n; i = next[i] {
		out = append(out, ids[i])
	}
	return out
}

// Decode implements Tokenizer. Byte-fallback tokens become their bytes,
// control tokens nothing, and the dummy space Encode adds is removed.
func (t *SentencePiece) Decode(ids []int32) string {
	var b []byte
	started := false
	for _, id := range ids {
		b, started = t.AppendTextPiece(b, id, started)
	}
	return string(b)
}

// AppendTextPiece implements Tokenizer: the first non-empty piece of a
// text loses the dummy space Encode adds, as llama.cpp's and Hugging
// Face's decoding drop it.
func (t *SentencePiece) AppendTextPiece(dst []byte, id int32, started bool) ([]byte, bool) {
	n := len(dst)
	dst = t.AppendPiece(dst, id)
	if started || len(dst) == n {
		return dst, started || len(dst) > n
	}
	if dst[n] == ' ' {
		dst = append(dst[:n], dst[n+1:]...)
	}
	return dst, true
}

// AppendPiece implements Tokenizer: a byte-fallback token appends its one
// byte, a control or out-of-range token nothing, any other its piece with
// ▁ as a space (the leading dummy space is not removed).
func (t *SentencePiece) AppendPiece(dst []byte, id int32) []byte {
	if id < 0 || int(id) >= len(t.pieces) || t.control[id] {
		return dst
	}
	if b := t.byteOf[id]; b >= 0 {
		return append(dst, byte(b))
	}
	return append(dst, t.pieces[id]...)
}

// BOS implements Tokenizer.
func (t *SentencePiece) BOS() int32 { return t.bos }

// EOS implements Tokenizer.
func (t *SentencePiece) EOS() int32 { return t.eos }

// ggufTokenizer builds the vocabulary from GGUF metadata, or returns nil if
// the file has none.
func ggufTokenizer(meta map[string]any) (*SentencePiece, error) {
	if _, ok := meta["tokenizer.ggml.tokens"]; !ok {
		return nil, nil
	}
	if m, _ := meta["tokenizer.ggml.model"].(string); m != "" && m != "llama" {
		return nil, fmt.Errorf("model: GGUF tokenizer %q, only llama (SentencePiece) is supported", m)
	}
	pieces, err := ggufStrings(meta, "tokenizer.ggml.tokens")
	if err != nil {
		return nil, err
	}
	scores := make([]float32, len(pieces))
	if rs, ok := arrayMeta(meta, "tokenizer.ggml.scores"); ok {
		if rs.Len() != len(pieces) {
			return nil, fmt.Errorf("model: GGUF has %d scores for %d tokens", rs.Len(), len(pieces))
		}
		for i := range scores {
			f, _ := rs.Float(i)
			scores[i] = float32(f)
		}
	}
	control := make([]bool, len(pieces))
	if ts, ok := arrayMeta(meta, "tokenizer.ggml.token_type"); ok && ts.Len() == len(pieces) {
		for i := range control {
			typ, _ := ts.Int(i)
			control[i] = typ == 2 || typ == 3 // unknown, control
		}
	}
	id := func(key string) int32 {
		if v, ok := meta[key].(int64); ok && v >= 0 && v < int64(len(pieces)) {
			return int32(v)
		}
		return -1
	}
	return newSentencePiece(pieces, scores, control, id("tokenizer.ggml.bos_token_id"), id("tokenizer.ggml.eos_token_id"))
}

// MaxTokenizerBinBytes bounds the llama2.c tokenizer file read: Llama 2's
// 32,000 tokens take about 0.5 MB.
const MaxTokenizerBinBytes = 64 * sidefile.MiB

// LoadLlama2CTokenizer reads llama2.c's tokenizer.bin: an int32 maximum
// piece length, then for each of vocab tokens a float32 score, an int32
// length and the piece's bytes. Tokens 0, 1, 2 are unknown, BOS and EOS.
// The format has no token count: a file with bytes left after vocab tokens
// holds more of them, another model's vocabulary (the 32,000-token Llama 2
// one read for the 512-token stories260K turns its token IDs into the
// wrong words), and is refused.
func LoadLlama2CTokenizer(path string, vocab int) (*SentencePiece, error) {
	data, err := sidefile.Read(path, MaxTokenizerBinBytes)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if len(data) < 4 || vocab <= 0 {
		return nil, errors.New("model: tokenizer file too short")
	}
	off := 4
	pieces := make([]string, vocab)
	scores := make([]float32, vocab)
	for i := range vocab {
		if off+8 > len(data) {
			return nil, fmt.Errorf("model: tokenizer file truncated at token %d", i)
		}
		scores[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[off:]))
		n := int(int32(binary.LittleEndian.Uint32(data[off+4:])))
		off += 8
		if n < 0 || off+n > len(data) {
			return nil, fmt.Errorf("model: tokenizer file truncated at token %d", i)
		}
		pieces[i] = string(data[off : off+n])
		off += n
	}
	if off != len(data) {
		return nil, fmt.Errorf("model: tokenizer file holds more tokens than the model's %d (%d bytes follow them): it is another model's vocabulary", vocab, len(data)-off)
	}
	control := make([]bool, vocab)
	control[0] = true
	return newSentencePiece(pieces, scores, control, 1, 2)
}
