package bpe

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// regexSplitter is the general pre-tokenizer: any regular expression, run
// by a backtracking engine (regexp2, .NET's syntax and semantics) after
// translate has rewritten the constructs whose meaning differs from the
// expression's dialect (see Dialect). Text between matches is a pre-token
// of its own; a match of no characters cuts the text where it matches.
type regexSplitter struct {
	expr string
	re   *regexp2.Regexp
}

// Dialect is whose meaning a regular expression has where Rust's regex
// crate (and llama.cpp) and Oniguruma (Hugging Face tokenizers' engine,
// which runs tokenizer.json's Split patterns) differ: \w, and so \b and
// \B, and the anchors ^ and $.
type Dialect int

// Dialects.
const (
	// Rust is Rust's regex crate, and llama.cpp's std::regex for the
	// anchors: \w is Alphabetic, marks, decimal digits, connector
	// punctuation and the joiners; ^ and $ are the start and end of the
	// text.
	Rust Dialect = iota
	// Oniguruma is Hugging Face's: \w is Rust's and the Latin-1 numbers
	// ² ³ ¹ ¼ ½ ¾; ^ and $ match at the start and end of every line.
	Oniguruma
)

// Compile returns the general Splitter of a pre-tokenizer regular
// expression in dialect d, never a hand-written fast path (Pattern
// prefers those). It reads the syntax of Rust's regex crate and of
// Oniguruma as tokenizer.json uses it: lookahead and lookbehind, (?i:…)
// and (?i) flags, \p{…} general categories, scripts and binary
// properties, atomic groups (?>…) and possessive quantifiers (*+ ++ ?+;
// {n,m}+ repeats the repetition, as in Oniguruma's Ruby syntax), and
// class intersection with a negated class ([A&&[^B]]). Where .NET's
// meaning differs the expression is rewritten:
//
//   - \s is Unicode White_Space (U+0085 and U+00A0 are spaces, U+FEFF and
//     U+180E are not) in .NET, Rust and Oniguruma alike, and in Go's
//     unicode.IsSpace;
//   - \w, \b and \B follow the dialect (.NET's \w omits spacing and
//     enclosing marks and other numbers);
//   - (?i) matches every rune of a literal's simple case folding orbit, so
//     (?i:'s) matches 'ſ (U+017F) and (?i:k) matches K (U+212A), as in Rust
//     and Oniguruma (.NET lowercases, missing ſ);
//   - ^ and $ follow the dialect (.NET's $ would also match before a final
//     newline).
//
// Unicode tables are Go's (unicode.Version), which may be a version apart
// from Rust's and Oniguruma's for newly assigned runes.
func Compile(expr string, d Dialect) (Splitter, error) {
	tr, err := translate(expr, d)
	if err != nil {
		return nil, fmt.Errorf("bpe: pre-tokenizer pattern %q: %w", expr, err)
	}
	re, err := regexp2.Compile(tr, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("bpe: pre-tokenizer pattern %q: %w", expr, err)
	}
	re.MatchTimeout = matchTimeout
	return &regexSplitter{expr: expr, re: re}, nil
}

// Split implements Splitter. Invalid UTF-8 bytes are one rune each
// (U+FFFD to the expression) and stay as they are in the pieces.
func (r *regexSplitter) Split(dst []string, s string) []string {
	if s == "" {
		return dst
	}
	gap := 0
	r.find(s, func(start, end int) {
		if gap < start {
			dst = append(dst, s[gap:start])
		}
		if start < end {
			dst = append(dst, s[start:end])
		}
		gap = end
	})
	if gap < len(s) {
		dst = append(dst, s[gap:])
	}
	return dst
}

// find calls match with the byte bounds of each match in s, in order,
// empty matches included.
func (r *regexSplitter) find(s string, match func(start, end int)) {
	runes := make([]rune, 0, len(s))
	offs := make([]int, 0, len(s)+1) // byte offset of each rune, then len(s)
	for i := 0; i < len(s); {
		c, n := utf8.DecodeRuneInString(s[i:])
		runes, offs = append(runes, c), append(offs, i)
		i += n
	}
	offs = append(offs, len(s))
	// An error is a match that ran past matchTimeout: the text from the
	// last match on stays one piece.
	m, err := r.re.FindRunesMatch(runes)
	for m != nil && err == nil {
		match(offs[m.Index], offs[m.Index+m.Length])
		m, err = r.re.FindNextMatch(m)
	}
}

// matchTimeout bounds the time one match of a pre-tokenizer pattern may
// take. A tokenizer.json is input: a pattern that backtracks
// catastrophically on some text ((a+)+b on a run of a's) would otherwise
// hold a request, and its CPU, for as long as the text makes it. Real
// patterns match a piece in microseconds; past the bound, the text from
// the last match on is left as one piece (tokenized, but not as the
// pattern would have split it). A variable so tests can shorten it.
var matchTimeout = time.Second

// wordClass is the dialect's \w inside a bracket expression.
func (d Dialect) wordClass() string {
	const rust = `\p{L}\p{Nl}\p{Other_Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}`
	if d == Oniguruma {
		return rust + `²³¹¼-¾` // its Latin-1 table counts these numbers as word runes
	}
	return rust
}

// anchors are the dialect's ^ and $.
func (d Dialect) anchors() (start, end string) {
	if d == Oniguruma {
		return `(?<![^\n])`, `(?![^\n])`
	}
	return `\A`, `\z`
}

// translate rewrites an expression in Rust/Oniguruma syntax into regexp2's
// with the same meaning in dialect d (see Compile).
func translate(expr string, d Dialect) (string, error) {
	word := d.wordClass()
	startAnchor, endAnchor := d.anchors()
	var out strings.Builder
	rs := []rune(expr)
	type group struct {
		start int  // where the group's text starts in out
		fold  bool // the enclosing group's case-insensitivity, restored at )
	}
	var groups []group
	fold := false
	atom := -1 // where the last quantifiable atom starts in out, -1 if none
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == '\\':
			if i+1 >= len(rs) {
				return "", fmt.Errorf("trailing backslash")
			}
			atom = out.Len()
			j, err := escapeEnd(rs, i)
			if err != nil {
				return "", err
			}
			switch rs[i+1] {
			case 'w':
				out.WriteString("[" + word + "]")
			case 'W':
				out.WriteString("[^" + word + "]")
			case 'b':
				out.WriteString(`(?:(?<=[` + word + `])(?![` + word + `])|(?<![` + word + `])(?=[` + word + `]))`)
				atom = -1
			case 'B':
				out.WriteString(`(?:(?<=[` + word + `])(?=[` + word + `])|(?<![` + word + `])(?![` + word + `]))`)
				atom = -1
			case 'p', 'P':
				body, neg, err := property(rs[i:j])
				if err != nil {
					return "", err
				}
				if neg {
					out.WriteString("[^" + body + "]")
				} else {
					out.WriteString("[" + body + "]")
				}
			default:
				out.WriteString(string(rs[i:j]))
			}
			i = j - 1
		case c == '[':
			atom = out.Len()
			j, cls, err := translateClass(rs, i, word)
			if err != nil {
				return "", err
			}
			out.WriteString(cls)
			i = j - 1
		case c == '(':
			g := group{start: out.Len(), fold: fold}
			if strings.HasPrefix(string(rs[i:min(i+4, len(rs))]), "(?P<") {
				out.WriteString("(?<")
				i += 3
				groups = append(groups, g)
				atom = -1
				continue
			}
			if i+1 < len(rs) && rs[i+1] == '?' {
				// Flags: (?i) for the rest of the group, (?i:…) for its own.
				j := i + 2
				on := true
				setFold := fold
				for j < len(rs) && strings.ContainsRune("imsxU-", rs[j]) {
					if rs[j] == '-' {
						on = false
					} else if rs[j] == 'i' {
						setFold = on
					}
					j++
				}
				if j > i+2 && j < len(rs) && (rs[j] == ')' || rs[j] == ':') {
					if rs[j] == ':' { // a group; (?i) alone is no group
						groups = append(groups, g)
					}
					fold = setFold
					out.WriteString(string(rs[i : j+1]))
					i = j
					atom = -1
					continue
				}
			}
			groups = append(groups, g)
			out.WriteRune(c)
			atom = -1
		case c == ')':
			if len(groups) == 0 {
				return "", fmt.Errorf("unbalanced )")
			}
			g := groups[len(groups)-1]
			groups = groups[:len(groups)-1]
			fold = g.fold
			out.WriteRune(c)
			atom = g.start
		case c == '*' || c == '+' || c == '?' || c == '{' && isCounted(rs, i):
			j := i + 1
			if c == '{' {
				for rs[j] != '}' {
					j++
				}
				j++
			}
			q := string(rs[i:j])
			switch {
			case j < len(rs) && rs[j] == '?': // lazy
				out.WriteString(q + "?")
				j++
			case j < len(rs) && rs[j] == '+':
				// Possessive *+ ++ ?+: the atom and its quantifier as an
				// atomic group. After {n,m}, Oniguruma's Ruby syntax
				// (Hugging Face's) reads + as repeating the repetition.
				if atom < 0 {
					return "", fmt.Errorf("possessive quantifier without an atom")
				}
				s := out.String()
				out.Reset()
				if c == '{' {
					out.WriteString(s[:atom] + "(?:" + s[atom:] + q + ")+")
				} else {
					out.WriteString(s[:atom] + "(?>" + s[atom:] + q + ")")
				}
				j++
			default:
				out.WriteString(q)
			}
			i = j - 1
			atom = -1
		case c == '$':
			out.WriteString(endAnchor)
			atom = -1
		case c == '^':
			out.WriteString(startAnchor)
			atom = -1
		default:
			atom = out.Len()
			if fold && unicode.SimpleFold(unicode.SimpleFold(c)) != c {
				// An orbit of three or more (s S ſ, k K K): list it,
				// since regexp2 folds by lowercasing alone.
				out.WriteRune('[')
				for r := c; ; {
					out.WriteRune(r)
					if r = unicode.SimpleFold(r); r == c {
						break
					}
				}
				out.WriteRune(']')
				continue
			}
			out.WriteRune(c)
		}
	}
	if len(groups) > 0 {
		return "", fmt.Errorf("unbalanced (")
	}
	return out.String(), nil
}

// isCounted reports whether the { at rs[i] starts a counted repetition
// {n}, {n,} or {n,m} (elsewhere it is a literal brace).
func isCounted(rs []rune, i int) bool {
	j := i + 1
	digits, comma := 0, false
	for ; j < len(rs) && rs[j] != '}'; j++ {
		switch {
		case rs[j] >= '0' && rs[j] <= '9':
			digits++
		case rs[j] == ',' && !comma && digits > 0:
			comma = true
		default:
			return false
		}
	}
	return j < len(rs) && digits > 0
}

// escapeEnd returns the index after the escape sequence at rs[i] (a
// backslash): \p{…}, \pL and \x{…} whole, else the backslash and one
// rune.
func escapeEnd(rs []rune, i int) (int, error) {
	if i+2 < len(rs) && (rs[i+1] == 'p' || rs[i+1] == 'P') && rs[i+2] != '{' {
		return i + 3, nil
	}
	if i+2 < len(rs) && strings.ContainsRune("pPx", rs[i+1]) && rs[i+2] == '{' {
		for j := i + 3; j < len(rs); j++ {
			if rs[j] == '}' {
				return j + 1, nil
			}
		}
		return 0, fmt.Errorf("unclosed \\%c{", rs[i+1])
	}
	if i+1 >= len(rs) {
		return 0, fmt.Errorf("trailing backslash")
	}
	return i + 2, nil
}

// translateClass rewrites the bracket expression starting at rs[i] and
// returns the index after it: \w becomes Rust's word class, and an
// intersection with a negated class, [A&&[^B]] (the only form
// tokenizer.json files use), becomes .NET's subtraction [A-[B]].
func translateClass(rs []rune, i int, word string) (int, string, error) {
	var b strings.Builder
	b.WriteRune('[')
	j := i + 1
	if j < len(rs) && rs[j] == '^' {
		b.WriteRune('^')
		j++
	}
	if j < len(rs) && rs[j] == ']' { // a leading ] is a literal
		b.WriteString(`\]`)
		j++
	}
	for j < len(rs) {
		switch c := rs[j]; {
		case c == ']':
			b.WriteRune(']')
			return j + 1, b.String(), nil
		case c == '\\':
			k, err := escapeEnd(rs, j)
			if err != nil {
				return 0, "", err
			}
			switch rs[j+1] {
			case 'p', 'P':
				body, neg, err := property(rs[j:k])
				switch {
				case err != nil:
					return 0, "", err
				case neg && strings.Count(body, `\p`) > 1:
					return 0, "", fmt.Errorf("negated property %s inside a class is not supported", string(rs[j:k]))
				case neg:
					b.WriteString(strings.Replace(body, `\p`, `\P`, 1))
				default:
					b.WriteString(body)
				}
			case 'w':
				b.WriteString(word)
			case 'W', 'b', 'B':
				return 0, "", fmt.Errorf("\\%c inside a class is not supported", rs[j+1])
			default:
				b.WriteString(string(rs[j:k]))
			}
			j = k
		case c == '&' && j+1 < len(rs) && rs[j+1] == '&':
			if j+3 >= len(rs) || rs[j+2] != '[' || rs[j+3] != '^' {
				return 0, "", fmt.Errorf("class intersection other than A&&[^B] is not supported")
			}
			k, inner, err := translateClass(rs, j+2, word)
			if err != nil {
				return 0, "", err
			}
			if k >= len(rs) || rs[k] != ']' {
				return 0, "", fmt.Errorf("class intersection A&&[^B] must end its class")
			}
			b.WriteString("-[" + inner[2:]) // [^B] → -[B]
			b.WriteRune(']')
			return k + 1, b.String(), nil
		case c == '[':
			if j+1 < len(rs) && rs[j+1] == ':' {
				return 0, "", fmt.Errorf("POSIX classes [:name:] are not supported")
			}
			return 0, "", fmt.Errorf("nested classes are not supported")
		default:
			b.WriteRune(c)
			j++
		}
	}
	return 0, "", fmt.Errorf("unclosed [")
}

// propertyNames maps the long Unicode property names Rust and Oniguruma
// accept to the short ones regexp2 knows (Go's unicode tables: general
// categories, scripts and binary properties by their short names), and
// Alphabetic, which Go has no table for, to its parts.
var propertyNames = map[string]string{
	"letter": `\p{L}`, "lowercase_letter": `\p{Ll}`, "uppercase_letter": `\p{Lu}`, "titlecase_letter": `\p{Lt}`,
	"modifier_letter": `\p{Lm}`, "other_letter": `\p{Lo}`, "mark": `\p{M}`, "combining_mark": `\p{M}`,
	"nonspacing_mark": `\p{Mn}`, "spacing_mark": `\p{Mc}`, "enclosing_mark": `\p{Me}`, "number": `\p{N}`,
	"decimal_number": `\p{Nd}`, "digit": `\p{Nd}`, "letter_number": `\p{Nl}`, "other_number": `\p{No}`,
	"punctuation": `\p{P}`, "punct": `\p{P}`, "symbol": `\p{S}`, "separator": `\p{Z}`, "space_separator": `\p{Zs}`,
	"other": `\p{C}`, "control": `\p{Cc}`, "format": `\p{Cf}`, "white_space": `\p{White_Space}`,
	"whitespace": `\p{White_Space}`, "space": `\p{White_Space}`,
	"alphabetic": `\p{L}\p{Nl}\p{Other_Alphabetic}`, "alpha": `\p{L}\p{Nl}\p{Other_Alphabetic}`,
}

// property reads a \p{…}, \P{…} or \pX escape: the bracket-expression
// body that matches it and whether it is negated (\P, or Oniguruma's
// \p{^…}). Name=value forms (sc=Han, gc=L) keep the value; long names are
// mapped to regexp2's.
func property(esc []rune) (body string, neg bool, err error) {
	neg = esc[1] == 'P'
	name := string(esc[2:])
	if strings.HasPrefix(name, "{") {
		name = strings.TrimSuffix(strings.TrimPrefix(name, "{"), "}")
	}
	if strings.HasPrefix(name, "^") {
		neg, name = !neg, name[1:]
	}
	if _, v, ok := strings.Cut(name, "="); ok {
		name = v
	}
	if b, ok := propertyNames[strings.ToLower(strings.NewReplacer(" ", "_", "-", "_").Replace(name))]; ok {
		return b, neg, nil
	}
	if name == "" {
		return "", false, fmt.Errorf("empty property %s", string(esc))
	}
	return `\p{` + name + `}`, neg, nil
}
