package model

// Tokenizer turns text into token IDs and back.
type Tokenizer interface {
	// Encode tokenizes text, without BOS.
	Encode(text string) []int32
	// Decode returns the text of ids (special tokens produce nothing).
	Decode(ids []int32) string
	// VocabSize is the number of token IDs.
	VocabSize() int
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
func (ByteTokenizer) Decode(ids []int32) string {
	b := make([]byte, 0, len(ids))
	for _, id := range ids {
		if id >= 0 && id < 256 {
			b = append(b, byte(id))
		}
	}
	return string(b)
}

// VocabSize implements Tokenizer.
func (ByteTokenizer) VocabSize() int { return 258 }
