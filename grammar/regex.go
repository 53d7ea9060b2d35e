package grammar

import (
	"fmt"
	"regexp/syntax"
)

// ParseRegex compiles a regular expression (Go's RE2 syntax, as vLLM's
// structured_outputs regex expects Perl-like syntax) that the whole
// output must match: it is anchored at both ends whether or not it says
// ^ and $. Anchors elsewhere and word boundaries are an error, as is a
// repetition count above Limits.MaxRepeat.
func ParseRegex(re string, lim Limits) (*Grammar, error) {
	b := newBuilder(lim)
	e, err := regexExpr(re, b.lim, "regex", false)
	if err != nil {
		return nil, err
	}
	b.define("root", e, "regex")
	return b.build("root")
}

// regexExpr parses re to an expr. With jsonString, the characters a JSON
// string must escape are produced in escaped form, so the expr matches
// the inside of a JSON string whose value matches re.
func regexExpr(re string, lim Limits, path string, jsonString bool) (*expr, error) {
	r, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return nil, errorf(path, "bad regular expression: %v", err)
	}
	c := regexConv{lim: lim, path: path, json: jsonString}
	return c.conv(r, 0, true, true)
}

type regexConv struct {
	lim  Limits
	path string
	json bool
}

// conv converts r; first and last say whether r may touch the start or
// the end of the text, where anchors are allowed.
func (c *regexConv) conv(r *syntax.Regexp, depth int, first, last bool) (*expr, error) {
	if depth > c.lim.MaxDepth {
		return nil, errorf(c.path, "regular expression nested deeper than %d", c.lim.MaxDepth)
	}
	switch r.Op {
	case syntax.OpNoMatch:
		return class(), nil
	case syntax.OpEmptyMatch:
		return seq(), nil
	case syntax.OpLiteral:
		items := make([]*expr, len(r.Rune))
		for i, ch := range r.Rune {
			rs := []runeRange{{ch, ch}}
			if r.Flags&syntax.FoldCase != 0 {
				for f := foldNext(ch); f != ch; f = foldNext(f) {
					rs = append(rs, runeRange{f, f})
				}
			}
			items[i] = c.chars(normRanges(rs))
		}
		return seq(items...), nil
	case syntax.OpCharClass:
		var rs []runeRange
		for i := 0; i+1 < len(r.Rune); i += 2 {
			rs = append(rs, runeRange{r.Rune[i], r.Rune[i+1]})
		}
		return c.chars(normRanges(rs)), nil
	case syntax.OpAnyCharNotNL:
		return c.chars(normRanges([]runeRange{{0, '\n' - 1}, {'\n' + 1, 0x10FFFF}})), nil
	case syntax.OpAnyChar:
		return c.chars([]runeRange{{0, 0x10FFFF}}), nil
	case syntax.OpBeginLine, syntax.OpBeginText:
		if !first {
			return nil, errorf(c.path, "^ is supported only at the start")
		}
		return seq(), nil
	case syntax.OpEndLine, syntax.OpEndText:
		if !last {
			return nil, errorf(c.path, "$ is supported only at the end")
		}
		return seq(), nil
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return nil, errorf(c.path, "word boundaries are not supported")
	case syntax.OpCapture:
		return c.conv(r.Sub[0], depth+1, first, last)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		sub, err := c.conv(r.Sub[0], depth+1, false, false)
		if err != nil {
			return nil, err
		}
		lo, hi := 0, -1
		switch r.Op {
		case syntax.OpPlus:
			lo = 1
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			lo, hi = r.Min, r.Max
		}
		if lo > c.lim.MaxRepeat || hi > c.lim.MaxRepeat {
			return nil, errorf(c.path, "repetition count above %d", c.lim.MaxRepeat)
		}
		return repeat(sub, lo, hi), nil
	case syntax.OpConcat:
		items := make([]*expr, len(r.Sub))
		for i, s := range r.Sub {
			e, err := c.conv(s, depth+1, first && i == 0, last && i == len(r.Sub)-1)
			if err != nil {
				return nil, err
			}
			items[i] = e
		}
		return seq(items...), nil
	case syntax.OpAlternate:
		items := make([]*expr, len(r.Sub))
		for i, s := range r.Sub {
			e, err := c.conv(s, depth+1, first, last)
			if err != nil {
				return nil, err
			}
			items[i] = e
		}
		return alt(items...), nil
	}
	return nil, errorf(c.path, "unsupported regular expression operator %v", r.Op)
}

// chars is one character from rs; inside a JSON string the characters
// that must be escaped become their escapes, grouped behind one
// backslash so a state holds one stack for all of them.
func (c *regexConv) chars(rs []runeRange) *expr {
	if !c.json {
		return class(rs...)
	}
	var plain []runeRange
	var escs []string
	for _, r := range rs {
		for ch := r.lo; ch <= r.hi && ch < 0x20; ch++ {
			escs = append(escs, jsonEscape(ch)[1:])
		}
		lo := max(r.lo, 0x20)
		for _, special := range []rune{'"', '\\'} {
			if lo <= special && special <= r.hi {
				escs = append(escs, jsonEscape(special)[1:])
				if lo < special {
					plain = append(plain, runeRange{lo, special - 1})
				}
				lo = special + 1
			}
		}
		if lo <= r.hi {
			plain = append(plain, runeRange{lo, r.hi})
		}
	}
	var alts []*expr
	if len(plain) > 0 {
		alts = append(alts, class(plain...))
	}
	if len(escs) > 0 {
		alts = append(alts, seq(lit(`\`), literals(escs)))
	}
	if len(alts) == 0 {
		return class()
	}
	return alt(alts...)
}

// jsonEscape is how a JSON string spells ch when ch must be escaped.
func jsonEscape(ch rune) string {
	switch ch {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	return fmt.Sprintf(`\u%04x`, ch)
}

// Choice compiles a grammar whose sentences are exactly the given
// strings (vLLM's structured_outputs choice).
func Choice(options []string, lim Limits) (*Grammar, error) {
	if len(options) == 0 {
		return nil, errorf("choice", "no options")
	}
	b := newBuilder(lim)
	total := 0
	for i, o := range options {
		total += len(o)
		if total > b.lim.MaxElems {
			return nil, errorf(fmt.Sprintf("choice/%d", i), "options longer than %d bytes in all", b.lim.MaxElems)
		}
	}
	b.define("root", literals(options), "choice")
	return b.build("root")
}
