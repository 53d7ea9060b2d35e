// Package grammar constrains generation to a formal language: JSON Schema,
// GBNF (llama.cpp's grammar format), regular expressions and fixed choices
// all compile to one context-free Grammar over bytes. A Matcher walks a
// Grammar one byte at a time with a set of pushdown stacks (llama.cpp's
// design, with right recursion compiled as tail calls so loops do not grow
// the stacks), and a Vocab turns a Matcher state into a mask of the tokens
// whose bytes the Grammar accepts next, by walking a trie of the
// vocabulary's byte strings. Masks are cached per Matcher state in the
// Constraint that pairs a Grammar with a Vocab.
//
// Everything that compiles user input is bounded (see Limits): a schema or
// grammar that is too large, too deep or too costly to compile is an error
// that names where in the input it went wrong, never a hang.
package grammar

import (
	"slices"
	"unicode"
)

// op is the kind of an expr.
type op uint8

const (
	opEmpty     op = iota // matches ""
	opBytes               // a byte string
	opClass               // one code point from a set of ranges, UTF-8 encoded
	opByteClass           // one byte from a set
	opSeq                 // subs in order
	opAlt                 // any of subs
	opRef                 // the rule named name
	opRepeat              // subs[0] between min and max times (max < 0: unbounded)
)

// expr is a grammar expression, the common form every front end (GBNF,
// JSON Schema, regex, choice) produces before it is lowered to rules.
type expr struct {
	op       op
	lit      string      // opBytes
	ranges   []runeRange // opClass: sorted, non-overlapping
	bytes    byteSet     // opByteClass
	subs     []*expr     // opSeq, opAlt, opRepeat
	name     string      // opRef
	min, max int         // opRepeat
}

// runeRange is an inclusive range of code points.
type runeRange struct{ lo, hi rune }

func lit(s string) *expr { return &expr{op: opBytes, lit: s} }

func seq(subs ...*expr) *expr {
	switch len(subs) {
	case 0:
		return &expr{op: opEmpty}
	case 1:
		return subs[0]
	}
	return &expr{op: opSeq, subs: subs}
}

func alt(subs ...*expr) *expr {
	if len(subs) == 1 {
		return subs[0]
	}
	return &expr{op: opAlt, subs: subs}
}

func ref(name string) *expr { return &expr{op: opRef, name: name} }

func repeat(e *expr, min, max int) *expr {
	return &expr{op: opRepeat, subs: []*expr{e}, min: min, max: max}
}

func opt(e *expr) *expr { return repeat(e, 0, 1) }

func star(e *expr) *expr { return repeat(e, 0, -1) }

func class(r ...runeRange) *expr { return &expr{op: opClass, ranges: normRanges(r)} }

// normRanges sorts and merges ranges, dropping surrogates and anything
// beyond U+10FFFF, which UTF-8 cannot encode. It takes O(n log n), so a
// class of many single characters costs little.
func normRanges(in []runeRange) []runeRange {
	rs := make([]runeRange, 0, len(in)+1)
	for _, r := range in {
		r.lo, r.hi = max(r.lo, 0), min(r.hi, 0x10FFFF)
		if r.lo > r.hi {
			continue
		}
		if r.lo <= 0xDFFF && r.hi >= 0xD800 { // split around the surrogates
			if r.lo < 0xD800 {
				rs = append(rs, runeRange{r.lo, 0xD7FF})
			}
			if r.hi > 0xDFFF {
				rs = append(rs, runeRange{0xE000, r.hi})
			}
			continue
		}
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b runeRange) int { return int(a.lo) - int(b.lo) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// negate returns the code points not in rs (sorted and merged), without
// the surrogates.
func negate(rs []runeRange) []runeRange {
	var out []runeRange
	next := rune(0)
	for _, r := range rs {
		if r.lo > next {
			out = append(out, runeRange{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= 0x10FFFF {
		out = append(out, runeRange{next, 0x10FFFF})
	}
	return normRanges(out)
}

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool { return s[b>>6]>>(b&63)&1 != 0 }
func (s *byteSet) addRange(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s.add(byte(c))
	}
}

// subsetOf reports whether every byte of s is in t.
func (s *byteSet) subsetOf(t *byteSet) bool {
	return s[0]&^t[0] == 0 && s[1]&^t[1] == 0 && s[2]&^t[2] == 0 && s[3]&^t[3] == 0
}

// foldNext is the next code point in ch's simple case-folding orbit.
func foldNext(ch rune) rune { return unicode.SimpleFold(ch) }

// literals matches any of strs, factored as a trie so alternatives that
// share a prefix share its stack: a Matcher holds one stack per distinct
// next byte instead of one per string.
func literals(strs []string) *expr {
	strs = slices.Clone(strs)
	slices.Sort(strs)
	strs = slices.Compact(strs)
	return literalTrie(strs, 0)
}

// literalTrie factors strs (sorted, distinct, sharing their first depth
// bytes) from byte depth on.
func literalTrie(strs []string, depth int) *expr {
	var alts []*expr
	for i := 0; i < len(strs); {
		if len(strs[i]) == depth {
			alts = append(alts, seq())
			i++
			continue
		}
		j := i + 1
		for j < len(strs) && len(strs[j]) > depth && strs[j][depth] == strs[i][depth] {
			j++
		}
		alts = append(alts, seq(lit(strs[i][depth:depth+1]), literalTrie(strs[i:j], depth+1)))
		i = j
	}
	return alt(alts...)
}

// literalsOr is the alternatives alts, factored as a trie (literals)
// when they are all literal strings, as long word lists are.
func literalsOr(alts []*expr) *expr {
	strs := make([]string, 0, len(alts))
	for _, a := range alts {
		switch a.op {
		case opBytes:
			strs = append(strs, a.lit)
		case opEmpty:
			strs = append(strs, "")
		default:
			return alt(alts...)
		}
	}
	if len(strs) < 2 {
		return alt(alts...)
	}
	return literals(strs)
}
