package engine

import (
	"bytes"
	"unicode/utf8"
)

// outText is a sequence's generated text, built a token piece at a time so
// that streaming and stop strings cost O(piece) per token, not a decode of
// the whole output.
type outText struct {
	buf     []byte   // the pieces of the generated tokens, cut at a stop string
	started bool     // a token has had a non-empty piece (see textPieces)
	sent    int      // leading bytes of buf already streamed
	stops   [][]byte // the request's stop strings
	hold    int      // bytes kept back while a stop string may be forming
}

func newOutText(stops []string) outText {
	t := outText{stops: make([][]byte, len(stops))}
	for i, s := range stops {
		t.stops[i] = []byte(s)
		t.hold = max(t.hold, len(s)-1)
	}
	return t
}

// add appends token id's piece and reports whether the text now contains a
// stop string; if so the text ends where the earliest one begins.
func (t *outText) add(tk Tokenizer, id int32) bool {
	old := len(t.buf)
	if tp, ok := tk.(textPieces); ok {
		t.buf, t.started = tp.AppendTextPiece(t.buf, id, t.started)
	} else {
		t.buf = tk.AppendPiece(t.buf, id)
	}
	// A stop string not found before must end in the new piece.
	from := max(0, old-t.hold)
	cut := -1
	for _, s := range t.stops {
		if i := bytes.Index(t.buf[from:], s); i >= 0 && (cut < 0 || from+i < cut) {
			cut = from + i
		}
	}
	if cut < 0 {
		return false
	}
	t.buf = t.buf[:cut]
	return true
}

// textPieces is a Tokenizer whose decoding drops something at the start
// of a text (SentencePiece's dummy space): the streamed pieces must
// concatenate to the tokenizer's Decode of the output.
type textPieces interface {
	AppendTextPiece(dst []byte, id int32, started bool) ([]byte, bool)
}

// next returns the text to stream with the newest token: everything not
// yet sent, less what may be the start of a stop string or of an
// unfinished UTF-8 sequence unless final.
func (t *outText) next(final bool) string {
	end := len(t.buf)
	if !final {
		end = completeUTF8(t.buf[:max(t.sent, end-t.hold)])
	}
	if end <= t.sent {
		return ""
	}
	s := string(t.buf[t.sent:end])
	t.sent = end
	return s
}

// completeUTF8 returns the length of b less a trailing incomplete UTF-8
// sequence.
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= max(0, len(b)-utf8.UTFMax); i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}
