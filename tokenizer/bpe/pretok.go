package bpe

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Splitter cuts text into pre-tokens, the words BPE merges within. The
// byte-level vocabularies define their pre-tokenizers as regular
// expressions with lookahead (\s+(?!\S)), which Go's regexp lacks; each
// Splitter here is such an expression written by hand from its meaning
// (leftmost-first alternation, greedy quantifiers, \p{L} and \p{N} from
// Go's unicode tables, \s as Unicode White_Space), which is also several
// times faster than a backtracking engine. Implementations are safe for
// concurrent use.
type Splitter interface {
	// Split appends the pre-tokens of s to dst and returns it: non-empty
	// substrings of s (not copies) that concatenate to s. Text between two
	// matches of the expression is a pre-token of its own, as llama.cpp's
	// unicode_regex_split and Hugging Face's Split "Isolated" keep it.
	Split(dst []string, s string) []string
}

// Sequence applies each splitter in turn to every pre-token the previous
// ones produced: llama.cpp's list of expressions per pre-tokenizer, and
// tokenizer.json's Sequence of Split pre-tokenizers.
type Sequence []Splitter

// Split implements Splitter.
func (q Sequence) Split(dst []string, s string) []string {
	start := len(dst)
	if s == "" {
		return dst
	}
	dst = append(dst, s)
	var tmp []string
	for _, sp := range q {
		tmp = tmp[:0]
		for _, p := range dst[start:] {
			tmp = sp.Split(tmp, p)
		}
		dst = append(dst[:start], tmp...)
	}
	return dst
}

func isLetter(r rune) bool {
	return r < utf8.RuneSelf && ('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') || r >= utf8.RuneSelf && unicode.IsLetter(r)
}
func isNumber(r rune) bool { return '0' <= r && r <= '9' || r >= utf8.RuneSelf && unicode.IsNumber(r) }
func isSpace(r rune) bool  { return unicode.IsSpace(r) }

// isOther is [^\s\p{L}\p{N}].
func isOther(r rune) bool { return !isSpace(r) && !isLetter(r) && !isNumber(r) }

// at returns the rune at s[i:] and its size; (-1, 0) at the end, so class
// tests on it are false.
func at(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// run returns the end of the run of runes in class starting at i.
func run(s string, i int, in func(rune) bool) int {
	for {
		r, n := at(s, i)
		if n == 0 || !in(r) {
			return i
		}
		i += n
	}
}

// contraction returns the length of 's 't 're 've 'm 'll 'd at s[i:] (the
// caller has seen the apostrophe), 0 if none; fold makes the letters
// case-insensitive.
func contraction(s string, i int, fold bool) int {
	low := func(j int) byte {
		if j >= len(s) {
			return 0
		}
		c := s[j]
		if fold && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		return c
	}
	switch c := low(i + 1); c {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if low(i+2) == 'e' {
			return 3
		}
	case 'l':
		if low(i+2) == 'l' {
			return 3
		}
	}
	return 0
}

// spaceRun is the shared tail of the GPT-2 family: at whitespace starting
// at i, \s+(?!\S)|\s+ matches the whole run at the end of the text, and
// before a non-space all of it but its last rune (which then leads the
// next pre-token) unless that is all there is.
func spaceRun(s string, i int) int {
	j, last := i, i
	for {
		r, n := at(s, j)
		if n == 0 || !isSpace(r) {
			break
		}
		last = j
		j += n
	}
	if j < len(s) && last > i {
		return last
	}
	return j
}

// gpt2 is GPT-2's expression (also the ByteLevel pre-tokenizer's):
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
type gpt2 struct{}

// Split implements Splitter.
func (gpt2) Split(dst []string, s string) []string {
	for i := 0; i < len(s); {
		end := gpt2Match(s, i)
		dst = append(dst, s[i:end])
		i = end
	}
	return dst
}

func gpt2Match(s string, i int) int {
	r, n := at(s, i)
	if r == '\'' {
		if k := contraction(s, i, false); k > 0 {
			return i + k
		}
	}
	j, c := i, r
	if r == ' ' {
		c, _ = at(s, i+1)
		j = i + 1
	}
	for _, in := range [...]func(rune) bool{isLetter, isNumber, isOther} {
		if c >= 0 && in(c) {
			return run(s, j, in)
		}
	}
	if isSpace(r) {
		return spaceRun(s, i)
	}
	return i + n
}

// llama3 is Llama 3's expression, and with maxDigits 1 Qwen2's:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
type llama3 struct{ maxDigits int }

// Split implements Splitter.
func (l llama3) Split(dst []string, s string) []string {
	for i := 0; i < len(s); {
		end := l.match(s, i)
		dst = append(dst, s[i:end])
		i = end
	}
	return dst
}

func isNewline(r rune) bool { return r == '\r' || r == '\n' }

func (l llama3) match(s string, i int) int {
	r, n := at(s, i)
	if r == '\'' {
		if k := contraction(s, i, true); k > 0 {
			return i + k
		}
	}
	next, _ := at(s, i+n)
	if isLetter(r) {
		return run(s, i, isLetter)
	}
	if !isNewline(r) && !isNumber(r) && next >= 0 && isLetter(next) {
		return run(s, i+n, isLetter)
	}
	if isNumber(r) {
		j := i
		for range l.maxDigits {
			c, m := at(s, j)
			if m == 0 || !isNumber(c) {
				break
			}
			j += m
		}
		return j
	}
	j, c := i, r
	if r == ' ' {
		j, c = i+1, next
	}
	if c >= 0 && isOther(c) {
		return run(s, run(s, j, isOther), isNewline)
	}
	// r is whitespace: \s*[\r\n]+ ends after the run's last newline.
	end, nl := i, -1
	for {
		c, m := at(s, end)
		if m == 0 || !isSpace(c) {
			break
		}
		if isNewline(c) {
			nl = end + m
		}
		end += m
	}
	if nl >= 0 {
		return nl
	}
	return spaceRun(s, i)
}

// classRun matches prefix?class+ (count 0) or prefix?class{count}, where
// prefix, if set, is one optional rune; it covers llama.cpp's simpler
// expressions (\p{N}, [\r\n], \s?[A-Za-z...]+, [0-9][0-9][0-9], ...).
type classRun struct {
	prefix func(rune) bool
	class  func(rune) bool
	count  int
}

// Split implements Splitter.
func (c classRun) Split(dst []string, s string) []string {
	gap := 0
	for i := 0; i < len(s); {
		r, n := at(s, i)
		end := -1
		if c.prefix != nil && c.prefix(r) {
			end = c.body(s, i+n)
		}
		if end < 0 {
			end = c.body(s, i)
		}
		if end < 0 {
			i += n
			continue
		}
		if gap < i {
			dst = append(dst, s[gap:i])
		}
		dst = append(dst, s[i:end])
		i, gap = end, end
	}
	if gap < len(s) {
		dst = append(dst, s[gap:])
	}
	return dst
}

// body returns the end of class+ or class{count} at i, -1 if none.
func (c classRun) body(s string, i int) int {
	j := i
	for k := 0; c.count == 0 || k < c.count; k++ {
		r, n := at(s, j)
		if n == 0 || !c.class(r) {
			break
		}
		j += n
	}
	if j == i || c.count > 0 && utf8.RuneCountInString(s[i:j]) < c.count {
		return -1
	}
	return j
}

// trailingSpace is \s+$: the whitespace that ends the text.
type trailingSpace struct{}

// Split implements Splitter.
func (trailingSpace) Split(dst []string, s string) []string {
	k := len(s)
	for k > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:k])
		if !isSpace(r) {
			break
		}
		k -= n
	}
	if k > 0 {
		dst = append(dst, s[:k])
	}
	if k < len(s) {
		dst = append(dst, s[k:])
	}
	return dst
}

// bracket parses the inside of a regular expression's bracket expression
// made of literal runes and ranges a-b (\r, \n, \$ and the like escaped),
// as llama.cpp's DeepSeek and Falcon expressions spell theirs, into a
// membership test.
func bracket(spec string) func(rune) bool {
	var rs []rune
	for _, r := range spec {
		rs = append(rs, r)
	}
	var lo, hi []rune
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		if r == '\\' && i+1 < len(rs) {
			i++
			r = map[rune]rune{'r': '\r', 'n': '\n'}[rs[i]]
			if r == 0 {
				r = rs[i]
			}
		}
		if i+2 < len(rs) && rs[i+1] == '-' {
			lo, hi = append(lo, r), append(hi, rs[i+2])
			i += 2
			continue
		}
		lo, hi = append(lo, r), append(hi, r)
	}
	type span struct{ lo, hi rune }
	spans := make([]span, len(lo))
	var ascii [utf8.RuneSelf]bool
	for k := range lo {
		spans[k] = span{lo[k], hi[k]}
		for r := lo[k]; r <= min(hi[k], utf8.RuneSelf-1); r++ {
			ascii[r] = true
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.lo - b.lo) })
	merged := spans[:0] // disjoint, so one binary search decides
	for _, sp := range spans {
		if n := len(merged); n > 0 && sp.lo <= merged[n-1].hi+1 {
			merged[n-1].hi = max(merged[n-1].hi, sp.hi)
			continue
		}
		merged = append(merged, sp)
	}
	return func(r rune) bool {
		if r < utf8.RuneSelf {
			return r >= 0 && ascii[r]
		}
		k, found := slices.BinarySearchFunc(merged, r, func(s span, r rune) int { return int(s.lo - r) })
		return found || k > 0 && r <= merged[k-1].hi
	}
}

// Regular expressions with a hand-written Splitter, as tokenizer.json's
// Split and llama.cpp spell them.
const (
	gpt2Pattern      = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	llama3Pattern    = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	llama3CPPPattern = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	deepseekLetters  = "A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\u1f7dᾀ-ᾴᾶ-ᾼ\u1fbeῂ-ῄῆ-ῌῐ-\u1fd3ῖ-\u1fdbῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212a-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃" // \u escapes: these runes have canonical singleton decompositions, which editors may normalize away
	deepseekPunct    = `!-/:-~！-／：-～‘-‟　-。`
	deepseekCJK      = `一-龥ࠀ-一가-퟿`
	falconPunct      = `\p{P}\$\+<=>\^~\|` + "`"
)

func isFalconPunct(r rune) bool  { return isDefaultPunct(r) || r == '`' }
func isDefaultPunct(r rune) bool { return unicode.IsPunct(r) || strings.ContainsRune("$+<=>^~|", r) }

// patterns maps each regular expression this package implements to its
// Splitter.
var patterns = map[string]Splitter{
	gpt2Pattern:                             gpt2{},
	strings.TrimSuffix(gpt2Pattern, `|\s+`): gpt2{}, // equal: see spaceRun
	llama3Pattern:                           llama3{3},
	llama3CPPPattern:                        llama3{3},
	strings.Replace(llama3Pattern, "{1,3}", "", 1):    llama3{1},
	strings.Replace(llama3CPPPattern, "{1,3}", "", 1): llama3{1},
	`\p{N}`:                         classRun{class: isNumber, count: 1},
	`\p{N}+`:                        classRun{class: isNumber},
	`[\r\n]`:                        classRun{class: isNewline, count: 1},
	`\s?[` + deepseekLetters + `]+`: classRun{prefix: isSpace, class: bracket(deepseekLetters)},
	`\s?[` + deepseekPunct + `]+`:   classRun{prefix: isSpace, class: bracket(deepseekPunct)},
	`\s+$`:                          trailingSpace{},
	`[` + deepseekCJK + `]+`:        classRun{class: bracket(deepseekCJK)},
	`[` + falconPunct + `]+`:        classRun{class: isFalconPunct},
	`[0-9][0-9][0-9]`:               classRun{class: bracket("0-9"), count: 3},
	`[\p{P}\$\+<=>\^~\|]+`:          classRun{class: isDefaultPunct},
}

// Pattern returns the Splitter of a pre-tokenizer regular expression, or an
// error naming it if this package has none: an unknown expression is
// refused rather than approximated, since any difference changes tokens.
func Pattern(expr string) (Splitter, error) {
	if sp, ok := patterns[expr]; ok {
		return sp, nil
	}
	return nil, fmt.Errorf("bpe: pre-tokenizer pattern %q is not supported", expr)
}

// preTokenizers lists llama.cpp's pre-tokenizer names (GGUF
// tokenizer.ggml.pre) with their expressions, in llama.cpp's order.
var preTokenizers = map[string][]string{
	"default":      {`[\p{P}\$\+<=>\^~\|]+`, gpt2Pattern, `\p{N}+`, `[0-9][0-9][0-9]`},
	"llama-bpe":    {llama3Pattern},
	"gpt-2":        {gpt2Pattern},
	"qwen2":        {strings.Replace(llama3Pattern, "{1,3}", "", 1)},
	"starcoder":    {`\p{N}`, gpt2Pattern},
	"deepseek-llm": {`[\r\n]`, `\s?[` + deepseekLetters + `]+`, `\s?[` + deepseekPunct + `]+`, `\s+$`, `[` + deepseekCJK + `]+`, `\p{N}+`},
	"falcon":       {`[` + falconPunct + `]+`, gpt2Pattern, `[0-9][0-9][0-9]`},
}

// preAliases are the names llama.cpp gives the same pre-tokenizers.
var preAliases = map[string]string{
	"llama3": "llama-bpe", "llama-v3": "llama-bpe", "dbrx": "llama-bpe", "smaug-bpe": "llama-bpe",
	"phi-2": "gpt-2", "mpt": "gpt-2", "olmo": "gpt-2",
	"smollm": "starcoder", "refact": "starcoder", "command-r": "starcoder", "codeshell": "starcoder", "exaone": "starcoder",
	"": "default",
}

// CanonicalPreTokenizer returns the name under which this package lists
// the pre-tokenizer llama.cpp calls name ("llama3" is "llama-bpe").
func CanonicalPreTokenizer(name string) string {
	if a, ok := preAliases[name]; ok {
		return a
	}
	return name
}

// PreTokenizer returns the Splitter llama.cpp uses for a GGUF
// tokenizer.ggml.pre name ("" is llama.cpp's default), or an error naming
// an unknown one.
func PreTokenizer(name string) (Splitter, error) {
	exprs, ok := preTokenizers[CanonicalPreTokenizer(name)]
	if !ok {
		known := make([]string, 0, len(preTokenizers)+len(preAliases))
		for k := range preTokenizers {
			known = append(known, k)
		}
		for k := range preAliases {
			if k != "" {
				known = append(known, k)
			}
		}
		slices.Sort(known)
		return nil, fmt.Errorf("bpe: pre-tokenizer %q is not supported (known: %s)", name, strings.Join(known, ", "))
	}
	seq := make(Sequence, len(exprs))
	for i, e := range exprs {
		sp, err := Pattern(e)
		if err != nil {
			return nil, err
		}
		seq[i] = sp
	}
	if len(seq) == 1 {
		return seq[0], nil
	}
	return seq, nil
}
