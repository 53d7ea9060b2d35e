package model

// Tokenizer turns text into token IDs and back.
type Tokenizer interface {
	// Encode tokenizes text, without BOS.
	Encode(text string) []int32
	// Decode returns the text of ids (special tokens produce nothing).
	Decode(ids []int32) string
	// AppendPiece appends the bytes token id contributes to a decoded
	// text when it follows other tokens (a token's bytes, for logprobs).
	// A single piece may be part of a UTF-8 sequence.
	AppendPiece(dst []byte, id int32) []byte
	// AppendTextPiece appends token id's piece to the text of the
	// sequence's tokens before it, for streaming; started says whether
	// any of them had a non-empty piece and is returned updated. The first
	// non-empty piece loses a leading dummy space, so the pieces
	// concatenate to Decode's text.
	AppendTextPiece(dst []byte, id int32, started bool) ([]byte, bool)
	// VocabSize is the number of token IDs.
	VocabSize() int
	// BOS and EOS are the beginning- and end-of-sequence tokens, -1 if none.
	BOS() int32
	EOS() int32
}

// ByteTokenizer is the built-in model's vocabulary: token b < 256 is byte
// b, then BOS and EOS. Every byte string round-trips exactly.
type ByteTokenizer struct{}

// Byte-level special tokens.
const (
	ByteBOS int32 = 256
	ByteEOS int32 = 257
)

// Encode implements Tokenizer.
func (ByteTokenizer) Encode(text string) []int32 {
	out := make([]int32, len(text))
	for i := range len(text) {
		out[i] = int32(text[i])
	}
	return out
}

// Decode implements Tokenizer.
func (bt ByteTokenizer) Decode(ids []int32) string {
	b := make([]byte, 0, len(ids))
	for _, id := range ids {
		b = bt.AppendPiece(b, id)
	}
	return string(b)
}

// AppendPiece implements Tokenizer: a byte token appends its byte, BOS and
// EOS nothing.
func (ByteTokenizer) AppendPiece(dst []byte, id int32) []byte {
	if id >= 0 && id < 256 {
		return append(dst, byte(id))
	}
	return dst
}

// AppendTextPiece implements Tokenizer: bytes have no dummy space, so it
// is AppendPiece.
func (bt ByteTokenizer) AppendTextPiece(dst []byte, id int32, started bool) ([]byte, bool) {
	n := len(dst)
	dst = bt.AppendPiece(dst, id)
	return dst, started || len(dst) > n
}

// BOS implements Tokenizer.
func (ByteTokenizer) BOS() int32 { return ByteBOS }

// EOS implements Tokenizer.
func (ByteTokenizer) EOS() int32 { return ByteEOS }

// VocabSize implements Tokenizer.
func (ByteTokenizer) VocabSize() int { return 258 }
