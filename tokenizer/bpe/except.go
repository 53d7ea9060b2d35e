package bpe

import "strings"

// EncodeSpecialExcept tokenizes text as EncodeSpecial does, except that
// no control token matches over a byte of the plain ranges ([start, end)
// byte offsets, ascending): the text there is tokenized as Encode would,
// with the run of text around it. A rendered chat template keeps its own
// control tokens this way while the messages' text that spells one stays
// text. Without ranges it is EncodeSpecial.
func (t *Tokenizer) EncodeSpecialExcept(text string, plain [][2]int) []int32 {
	w := t.scratch.Get().(*work)
	defer func() {
		clear(w.words)
		t.scratch.Put(w)
	}()
	var dst []int32
	run := 0 // text[run:] is not yet encoded
	atStart := true
	for pos := 0; pos < len(text); {
		start, end, id := t.added.find(text[pos:], true)
		if id < 0 {
			break
		}
		start, end = start+pos, end+pos
		for len(plain) > 0 && plain[0][1] <= start {
			plain = plain[1:]
		}
		if len(plain) > 0 && plain[0][0] < end && t.Type(id) != UserDefined {
			// A control token over plain text: only a user-defined token
			// may match at start, as in Encode.
			e, uid := t.added.userAt(text[start:])
			if uid < 0 {
				pos = start + 1
				continue
			}
			end, id = start+e, uid
		}
		dst = t.encodeRun(dst, w, text[run:start], atStart, false)
		dst = append(dst, id)
		run, pos, atStart = end, end, false
	}
	return t.encodeRun(dst, w, text[run:], atStart, false)
}

// userAt returns the end and ID of the longest user-defined token that
// text starts with, or (0, -1). Unlike find it looks at no other position,
// so a text of many control tokens in plain ranges stays linear.
func (s *addedSet) userAt(text string) (end int, id int32) {
	for _, a := range s.byFirst[text[0]] {
		if !a.control && strings.HasPrefix(text, a.text) {
			return len(a.text), a.id
		}
	}
	return 0, -1
}
