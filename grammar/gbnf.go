package grammar

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// ParseGBNF compiles a grammar in llama.cpp's GBNF: rules `name ::= alts`,
// alternatives separated by |, sequences of "literals", [classes] (with ^
// and ranges), . (any character), rule names, (groups) and the postfix
// operators * + ? {m} {m,} {m,n}; # starts a comment. Escapes \n \r \t \\
// \" \] \[ \- \xHH \uHHHH \UHHHHHHHH work in literals and classes. The
// start rule is root. Errors name the line and column.
func ParseGBNF(src string, lim Limits) (*Grammar, error) {
	p := &gbnfParser{src: src, b: newBuilder(lim)}
	if err := p.parse(); err != nil {
		return nil, err
	}
	if !p.b.defined("root") {
		return nil, errorf("", "no root rule")
	}
	return p.b.build("root")
}

type gbnfParser struct {
	src string
	i   int
	b   *builder
}

func (p *gbnfParser) where(i int) string {
	line, col := 1, 1
	for _, c := range p.src[:min(i, len(p.src))] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d col %d", line, col)
}

func (p *gbnfParser) errf(format string, args ...any) error {
	return errorf(p.where(p.i), format, args...)
}

// space skips blanks, newlines and comments.
func (p *gbnfParser) space() {
	for p.i < len(p.src) {
		switch c := p.src[p.i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.i++
		case c == '#':
			for p.i < len(p.src) && p.src[p.i] != '\n' {
				p.i++
			}
		default:
			return
		}
	}
}

func isNameByte(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (p *gbnfParser) name() string {
	s := p.i
	for p.i < len(p.src) && isNameByte(p.src[p.i]) {
		p.i++
	}
	return p.src[s:p.i]
}

// atRuleStart reports whether `name ::=` begins at the cursor.
func (p *gbnfParser) atRuleStart() bool {
	save := p.i
	defer func() { p.i = save }()
	if p.name() == "" {
		return false
	}
	p.space()
	return len(p.src)-p.i >= 3 && p.src[p.i:p.i+3] == "::="
}

func (p *gbnfParser) parse() error {
	for {
		p.space()
		if p.i >= len(p.src) {
			return nil
		}
		start := p.i
		name := p.name()
		if name == "" {
			return p.errf("expected a rule name")
		}
		p.space()
		if len(p.src)-p.i < 3 || p.src[p.i:p.i+3] != "::=" {
			return p.errf("expected ::= after %q", name)
		}
		p.i += 3
		if p.b.defined(name) {
			return errorf(p.where(start), "rule %q defined twice", name)
		}
		body, err := p.alts(0)
		if err != nil {
			return err
		}
		if len(p.b.names) >= p.b.lim.MaxRules {
			return p.errf("more than %d rules", p.b.lim.MaxRules)
		}
		p.b.define(name, body, name)
	}
}

// alts parses alternatives up to a ), a new rule or the end.
func (p *gbnfParser) alts(depth int) (*expr, error) {
	if depth > p.b.lim.MaxDepth {
		return nil, p.errf("groups nested deeper than %d", p.b.lim.MaxDepth)
	}
	var alts []*expr
	for {
		s, err := p.seq(depth)
		if err != nil {
			return nil, err
		}
		alts = append(alts, s)
		p.space()
		if p.i < len(p.src) && p.src[p.i] == '|' {
			p.i++
			continue
		}
		return literalsOr(alts), nil
	}
}

func (p *gbnfParser) seq(depth int) (*expr, error) {
	var items []*expr
	for {
		p.space()
		if p.i >= len(p.src) {
			return seq(items...), nil
		}
		c := p.src[p.i]
		var item *expr
		switch {
		case c == '|' || c == ')':
			return seq(items...), nil
		case c == '"':
			s, err := p.literal()
			if err != nil {
				return nil, err
			}
			item = lit(s)
		case c == '[':
			rs, err := p.class()
			if err != nil {
				return nil, err
			}
			item = class(rs...)
		case c == '.':
			p.i++
			item = class(runeRange{0, 0x10FFFF})
		case c == '(':
			p.i++
			inner, err := p.alts(depth + 1)
			if err != nil {
				return nil, err
			}
			p.space()
			if p.i >= len(p.src) || p.src[p.i] != ')' {
				return nil, p.errf("expected )")
			}
			p.i++
			item = inner
		case isNameByte(c):
			if p.atRuleStart() {
				return seq(items...), nil
			}
			name := p.name()
			p.b.rule(name)
			item = ref(name)
		default:
			return nil, p.errf("unexpected %q", c)
		}
		var err error
		if item, err = p.postfix(item); err != nil {
			return nil, err
		}
		items = append(items, item)
	}
}

func (p *gbnfParser) postfix(item *expr) (*expr, error) {
	for {
		p.space()
		if p.i >= len(p.src) {
			return item, nil
		}
		switch p.src[p.i] {
		case '*':
			item = star(item)
		case '+':
			item = repeat(item, 1, -1)
		case '?':
			item = opt(item)
		case '{':
			p.i++
			lo, hi, err := p.counts()
			if err != nil {
				return nil, err
			}
			if lo > p.b.lim.MaxRepeat || hi > p.b.lim.MaxRepeat {
				return nil, p.errf("repetition count above %d", p.b.lim.MaxRepeat)
			}
			item = repeat(item, lo, hi)
			continue
		default:
			return item, nil
		}
		p.i++
	}
}

// counts parses m}, m,} or m,n} after a {.
func (p *gbnfParser) counts() (int, int, error) {
	num := func() (int, bool) {
		p.space()
		s := p.i
		for p.i < len(p.src) && p.src[p.i] >= '0' && p.src[p.i] <= '9' && p.i-s < 9 {
			p.i++
		}
		if p.i == s {
			return 0, false
		}
		n, _ := strconv.Atoi(p.src[s:p.i])
		return n, true
	}
	lo, ok := num()
	if !ok {
		return 0, 0, p.errf("expected a count in {}")
	}
	hi := lo
	p.space()
	if p.i < len(p.src) && p.src[p.i] == ',' {
		p.i++
		var ok bool
		if hi, ok = num(); !ok {
			hi = -1
		}
	}
	p.space()
	if p.i >= len(p.src) || p.src[p.i] != '}' {
		return 0, 0, p.errf("expected }")
	}
	p.i++
	if hi >= 0 && hi < lo {
		return 0, 0, p.errf("{%d,%d} has max below min", lo, hi)
	}
	return lo, hi, nil
}

// char reads one possibly escaped character of a literal or class.
func (p *gbnfParser) char() (rune, error) {
	if p.i >= len(p.src) {
		return 0, p.errf("unexpected end")
	}
	if p.src[p.i] != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.i:])
		if r == utf8.RuneError && n <= 1 {
			return 0, p.errf("invalid UTF-8")
		}
		p.i += n
		return r, nil
	}
	p.i++
	if p.i >= len(p.src) {
		return 0, p.errf("unexpected end after \\")
	}
	c := p.src[p.i]
	p.i++
	hex := func(n int) (rune, error) {
		if len(p.src)-p.i < n {
			return 0, p.errf("short \\%c escape", c)
		}
		v, err := strconv.ParseUint(p.src[p.i:p.i+n], 16, 32)
		if err != nil {
			return 0, p.errf("bad \\%c escape", c)
		}
		p.i += n
		if v > 0x10FFFF {
			return 0, p.errf("code point above U+10FFFF")
		}
		return rune(v), nil
	}
	switch c {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'x':
		return hex(2)
	case 'u':
		return hex(4)
	case 'U':
		return hex(8)
	case '\\', '"', '[', ']', '-', '^', '/':
		return rune(c), nil
	}
	return 0, p.errf("unknown escape \\%c", c)
}

// literal parses "..." to its UTF-8 bytes; \xHH gives the byte HH.
func (p *gbnfParser) literal() (string, error) {
	p.i++ // "
	var out []byte
	for {
		if p.i >= len(p.src) {
			return "", p.errf("unterminated literal")
		}
		if p.src[p.i] == '"' {
			p.i++
			return string(out), nil
		}
		isHex := p.src[p.i] == '\\' && p.i+1 < len(p.src) && p.src[p.i+1] == 'x'
		r, err := p.char()
		if err != nil {
			return "", err
		}
		if isHex {
			out = append(out, byte(r))
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
}

// class parses [...] to its code point ranges.
func (p *gbnfParser) class() ([]runeRange, error) {
	p.i++ // [
	neg := false
	if p.i < len(p.src) && p.src[p.i] == '^' {
		neg = true
		p.i++
	}
	var rs []runeRange
	for {
		if p.i >= len(p.src) {
			return nil, p.errf("unterminated class")
		}
		if p.src[p.i] == ']' {
			p.i++
			break
		}
		lo, err := p.char()
		if err != nil {
			return nil, err
		}
		hi := lo
		if p.i+1 < len(p.src) && p.src[p.i] == '-' && p.src[p.i+1] != ']' {
			p.i++
			if hi, err = p.char(); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, p.errf("class range %q-%q is backwards", lo, hi)
			}
		}
		rs = append(rs, runeRange{lo, hi})
	}
	rs = normRanges(rs)
	if neg {
		rs = negate(rs)
	}
	return rs, nil
}
