package bpe

import (
	"cmp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// AddedOptions are a tokenizer.json added token's matching options.
type AddedOptions struct {
	// LStrip and RStrip make a match take the whitespace before and after
	// it, which then belongs to no other token.
	LStrip, RStrip bool
	// SingleWord matches the token only where it is not part of a longer
	// word: no letter, digit or _ touches it on either side.
	SingleWord bool
	// Normalized matches the token in the normalized text, its content
	// normalized too, rather than in the text as given.
	Normalized bool
}

// addedToken is a token matched in text as a whole before pre-tokenization.
type addedToken struct {
	text    string
	id      int32
	control bool // matched only when special tokens are parsed
	AddedOptions
}

// addedSet finds added tokens in text: user-defined tokens always, control
// (and unknown-type) tokens only when asked to.
type addedSet struct {
	byFirst [256][]addedToken // by first byte, longest first
	any     bool
}

// newAddedSet indexes the added tokens of the vocabulary whose
// Normalized option equals normalized; norm, if set, rewrites their
// texts (as the tokenizer's normalizer does the text they are found in).
func newAddedSet(tokens []string, types []TokenType, opts map[int32]AddedOptions, normalized bool, norm func(string) string) addedSet {
	var s addedSet
	for i, typ := range types {
		o := opts[int32(i)]
		if tokens[i] == "" || typ != Control && typ != UserDefined && typ != Unknown || o.Normalized != normalized {
			continue
		}
		text := tokens[i]
		if normalized && norm != nil {
			if text = norm(text); text == "" {
				continue
			}
		}
		c := text[0]
		s.byFirst[c] = append(s.byFirst[c], addedToken{text: text, id: int32(i), control: typ != UserDefined, AddedOptions: o})
		s.any = true
	}
	for _, l := range s.byFirst {
		slices.SortStableFunc(l, func(a, b addedToken) int { return cmp.Compare(len(b.text), len(a.text)) })
	}
	return s
}

// find returns the leftmost added token in text, the longest at that
// position that its single_word option allows: the bounds of the text it
// takes (with the whitespace lstrip and rstrip take) and its ID, or
// (len(text), len(text), -1) if none.
func (s *addedSet) find(text string, special bool) (start, end int, id int32) {
	if !s.any {
		return len(text), len(text), -1
	}
	for i := 0; i < len(text); i++ {
		for _, a := range s.byFirst[text[i]] {
			if !(special || !a.control) || !strings.HasPrefix(text[i:], a.text) {
				continue
			}
			j := i + len(a.text)
			if a.SingleWord && (endsWithWord(text[:i]) || startsWithWord(text[j:])) {
				continue
			}
			if a.LStrip {
				i = len(strings.TrimRightFunc(text[:i], unicode.IsSpace))
			}
			if a.RStrip {
				j = len(text) - len(strings.TrimLeftFunc(text[j:], unicode.IsSpace))
			}
			return i, j, a.id
		}
	}
	return len(text), len(text), -1
}

// isWordRune is what single_word counts as part of a word.
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) || r == '_' }

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWordRune(r)
}
