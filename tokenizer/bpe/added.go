package bpe

import (
	"cmp"
	"slices"
	"strings"
)

// addedToken is a token matched in text as a whole before pre-tokenization.
type addedToken struct {
	text    string
	id      int32
	control bool // matched only when special tokens are parsed
}

// addedSet finds added tokens in text: user-defined tokens always, control
// (and unknown-type) tokens only when asked to.
type addedSet struct {
	byFirst [256][]addedToken // by first byte, longest first
}

func newAddedSet(tokens []string, types []TokenType) addedSet {
	var s addedSet
	for i, typ := range types {
		if tokens[i] == "" || typ != Control && typ != UserDefined && typ != Unknown {
			continue
		}
		c := tokens[i][0]
		s.byFirst[c] = append(s.byFirst[c], addedToken{text: tokens[i], id: int32(i), control: typ != UserDefined})
	}
	for _, l := range s.byFirst {
		slices.SortStableFunc(l, func(a, b addedToken) int { return cmp.Compare(len(b.text), len(a.text)) })
	}
	return s
}

// find returns the leftmost added token in text, the longest at that
// position: its bounds and ID, or (len(text), len(text), -1) if none.
func (s *addedSet) find(text string, special bool) (start, end int, id int32) {
	for i := 0; i < len(text); i++ {
		for _, a := range s.byFirst[text[i]] {
			if (special || !a.control) && strings.HasPrefix(text[i:], a.text) {
				return i, i + len(a.text), a.id
			}
		}
	}
	return len(text), len(text), -1
}
