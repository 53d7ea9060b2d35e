package chat

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Span is a byte range [Start, End) of a rendered text.
type Span struct{ Start, End int }

// Plain is a set of texts (a tokenizer's control tokens) that RenderPlain
// keeps plain in messages' contents, compiled once: a trie, so that
// finding them costs a content at most its length times the longest
// text's. It is safe for concurrent use.
type Plain struct {
	nodes []plainNode // nodes[0] is the root
}

type plainNode struct {
	next map[byte]int32
	end  bool // a text ends here
}

// NewPlain compiles texts; empty ones are ignored.
func NewPlain(texts []string) *Plain {
	p := &Plain{nodes: []plainNode{{}}}
	for _, t := range texts {
		if t == "" {
			continue
		}
		n := int32(0)
		for i := 0; i < len(t); i++ {
			next, ok := p.nodes[n].next[t[i]]
			if !ok {
				next = int32(len(p.nodes))
				p.nodes = append(p.nodes, plainNode{})
				if p.nodes[n].next == nil {
					p.nodes[n].next = map[byte]int32{}
				}
				p.nodes[n].next[t[i]] = next
			}
			n = next
		}
		p.nodes[n].end = true
	}
	return p
}

// match returns the length of the longest text s starts with, 0 if none
// (or p is nil), as the tokenizer matches the longest token at a position.
func (p *Plain) match(s string) int {
	if p == nil {
		return 0
	}
	n, longest := int32(0), 0
	for i := 0; i < len(s); i++ {
		next, ok := p.nodes[n].next[s[i]]
		if !ok {
			break
		}
		if n = next; p.nodes[n].end {
			longest = i + 1
		}
	}
	return longest
}

// RenderPlain renders a conversation as Render does, and reports where the
// text holds, from a message's content, one of the texts of plain:
// encode the text with those spans taken as plain text and a user cannot
// forge a turn boundary by typing a control token.
//
// The template sees each such text in a content as a mark of its own (a
// few of Unicode's noncharacters, U+FDD0 to U+FDE9), which the output
// spells back; a content without them renders exactly as with Render, and
// gets no spans. A template that cuts a content inside a mark leaves the
// mark's pieces in the text.
func (t *Template) RenderPlain(in Input, plain *Plain) (string, []Span, error) {
	p := &protector{plain: plain}
	text, err := t.render(in, p)
	if err != nil || len(p.table) == 0 {
		return text, nil, err
	}
	text, spans := p.restore(text)
	return text, spans, nil
}

const (
	markOpen   = '\uFDD0'
	markClose  = '\uFDD1'
	markDigit0 = '\uFDE0' // ten digits, U+FDE0 to U+FDE9
	markLast   = '\uFDEF' // noncharacters up to here are marked themselves
)

// protector swaps the plain texts in contents for marks, and back.
type protector struct {
	plain *Plain
	table []string // what each mark stands for
}

// protect returns s with each plain text, and each noncharacter the
// marks use, swapped for a mark.
func (p *protector) protect(s string) string {
	var b strings.Builder
	done := 0 // s[:done] is in b
	for i := 0; i < len(s); {
		match := s[i : i+p.plain.match(s[i:])]
		if match == "" {
			if r, n := utf8.DecodeRuneInString(s[i:]); r >= markOpen && r <= markLast {
				match = s[i : i+n]
			}
		}
		if match == "" {
			i++
			continue
		}
		b.WriteString(s[done:i])
		b.WriteRune(markOpen)
		for _, d := range []byte(strconv.Itoa(len(p.table))) {
			b.WriteRune(markDigit0 + rune(d-'0'))
		}
		b.WriteRune(markClose)
		p.table = append(p.table, match)
		i += len(match)
		done = i
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// restore spells the marks in text back and reports where they were.
func (p *protector) restore(text string) (string, []Span) {
	var b strings.Builder
	var spans []Span
	for {
		i := strings.IndexRune(text, markOpen)
		if i < 0 {
			b.WriteString(text)
			return b.String(), spans
		}
		b.WriteString(text[:i])
		rest := text[i+utf8.RuneLen(markOpen):]
		idx, digits := 0, 0
		for {
			r, n := utf8.DecodeRuneInString(rest)
			if r < markDigit0 || r > markDigit0+9 || digits > 9 {
				break
			}
			idx = 10*idx + int(r-markDigit0)
			digits++
			rest = rest[n:]
		}
		r, n := utf8.DecodeRuneInString(rest)
		if digits == 0 || r != markClose || idx >= len(p.table) {
			// Not a whole mark: keep its opening as it is.
			b.WriteRune(markOpen)
			text = text[i+utf8.RuneLen(markOpen):]
			continue
		}
		start := b.Len()
		b.WriteString(p.table[idx])
		spans = append(spans, Span{start, b.Len()})
		text = rest[n:]
	}
}
