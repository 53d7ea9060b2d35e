package server

import (
	"bytes"
	"unicode/utf8"
)

// textBuilder turns generated tokens into text, the same way for a stream
// and for a whole response, so the pieces a stream sends concatenate to the
// text a non-streaming request gets. A stream's text is held back while it
// may be the start of a stop string (which the response leaves out, with
// everything after it) or ends inside a UTF-8 sequence (which a JSON
// encoder would otherwise turn into replacement characters).
//
// The text is the concatenation of the tokens' pieces, not the tokenizer's
// Decode, which drops a leading space that is part of a continuation.
type textBuilder struct {
	tok     Tokenizer // nil: no text
	stops   [][]byte
	buf     []byte // every piece so far
	sent    int    // bytes of buf handed out
	stopped bool   // buf holds a stop string at cut; the rest is dropped
	cut     int
}

func newTextBuilder(tok Tokenizer, stops []string) *textBuilder {
	b := &textBuilder{tok: tok}
	for _, s := range stops {
		b.stops = append(b.stops, []byte(s))
	}
	return b
}

// add appends a token and returns the text that can be sent now.
func (b *textBuilder) add(id int32) string {
	if b.tok == nil || b.stopped {
		return ""
	}
	b.buf = b.tok.AppendPiece(b.buf, id)
	limit := len(b.buf)
	// Text already sent never holds the start of a stop string, so a stop
	// can only begin at or after sent.
	for _, s := range b.stops {
		if i := bytes.Index(b.buf[b.sent:], s); i >= 0 && (!b.stopped || b.sent+i < b.cut) {
			b.stopped, b.cut = true, b.sent+i
		}
	}
	if b.stopped {
		limit = b.cut
	} else {
		for _, s := range b.stops {
			for k := min(len(s)-1, len(b.buf)-b.sent); k > 0; k-- {
				if bytes.HasSuffix(b.buf, s[:k]) {
					limit = min(limit, len(b.buf)-k)
					break
				}
			}
		}
	}
	return b.take(limit, false)
}

// finish returns the rest of the text.
func (b *textBuilder) finish() string {
	if b.tok == nil {
		return ""
	}
	limit := len(b.buf)
	if b.stopped {
		limit = b.cut
	}
	return b.take(limit, true)
}

// take hands out buf[sent:limit], stopping early before an incomplete
// UTF-8 sequence unless all is set. It cuts only where a decoder of the
// whole text would start a rune, so each piece encodes as that stretch of
// the whole text does.
func (b *textBuilder) take(limit int, all bool) string {
	end := limit
	if !all {
		end = b.sent
		for end < limit {
			if !utf8.FullRune(b.buf[end:limit]) {
				break
			}
			_, n := utf8.DecodeRune(b.buf[end:limit])
			end += n
		}
	}
	if end <= b.sent {
		return ""
	}
	s := string(b.buf[b.sent:end])
	b.sent = end
	return s
}

// text returns the whole text of tokens, cut at the first stop string.
func wholeText(tok Tokenizer, stops []string, tokens []int32) string {
	b := newTextBuilder(tok, stops)
	var out []byte
	for _, t := range tokens {
		out = append(out, b.add(t)...)
	}
	return string(append(out, b.finish()...))
}
