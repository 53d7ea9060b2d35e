package chat

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Span is a byte range [Start, End) of a rendered text.
type Span struct{ Start, End int }

// RenderPlain renders a conversation as Render does, and reports where the
// text holds, from a message's content, one of the strings of plain (a
// tokenizer's control tokens): encode the text with those spans taken as
// plain text and a user cannot forge a turn boundary by typing one.
//
// The template sees each such string in a content as a mark of its own
// (a few of Unicode's noncharacters, U+FDD0 to U+FDE9), which the output
// spells back; a content without them renders exactly as with Render,
// and gets no spans. A template that cuts a content inside a mark leaves
// the mark's pieces in the text.
func (t *Template) RenderPlain(in Input, plain []string) (string, []Span, error) {
	p := newProtector(plain)
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

// protector swaps the plain strings in contents for marks, and back.
type protector struct {
	byFirst [256][]string // plain strings by first byte, longest first
	table   []string      // what each mark stands for
}

func newProtector(plain []string) *protector {
	p := &protector{}
	for _, s := range plain {
		if s != "" {
			p.byFirst[s[0]] = append(p.byFirst[s[0]], s)
		}
	}
	for _, l := range p.byFirst {
		// Longest first, so that the longest match at a position wins,
		// as it does in the tokenizer.
		for i := 1; i < len(l); i++ {
			for j := i; j > 0 && len(l[j]) > len(l[j-1]); j-- {
				l[j], l[j-1] = l[j-1], l[j]
			}
		}
	}
	return p
}

// protect returns s with each plain string, and each noncharacter the
// marks use, swapped for a mark.
func (p *protector) protect(s string) string {
	var b strings.Builder
	done := 0 // s[:done] is in b
	for i := 0; i < len(s); {
		match := ""
		for _, c := range p.byFirst[s[i]] {
			if strings.HasPrefix(s[i:], c) {
				match = c
				break
			}
		}
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
