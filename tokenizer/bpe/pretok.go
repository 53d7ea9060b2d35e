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
// expressions with lookahead (\s+(?!\S)), which Go's regexp lacks:
// Compile runs any of them on a backtracking engine, and for the common
// ones this file has Splitters written by hand from their meaning
// (leftmost-first alternation, greedy quantifiers, \p{L} and \p{N} from
// Go's unicode tables, \s as Unicode White_Space), several times faster
// and proven equal to the engine by the tests. A tokenizer.json
// pre_tokenizer is a Splitter too, whose pieces may drop or rewrite text
// (see hfPipeline). Implementations are safe for concurrent use.
type Splitter interface {
	// Split appends the pre-tokens of s to dst and returns it: for a
	// regular expression, non-empty substrings of s (not copies) that
	// concatenate to s. Text between two matches of the expression is a
	// pre-token of its own, as llama.cpp's unicode_regex_split and Hugging
	// Face's Split "Isolated" keep it.
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
//
// foldLongS is (?i:)'s Unicode simple case folding, under which 's also
// matches 'ſ (U+017F); llama.cpp's spelling '[sS] does not.
type llama3 struct {
	maxDigits int
	foldLongS bool
}

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
		if l.foldLongS && strings.HasPrefix(s[i+1:], "ſ") {
			return i + 1 + len("ſ")
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

// Parts of llama.cpp's other expressions, which run on the general engine.
const (
	contractionsCPP = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`
	gpt2NoTail      = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	qwen2Pattern    = contractionsCPP + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	asciiPunct      = `[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~]`
	cjkKana         = `[一-龥぀-ゟ゠-ヿ]+`
	deepseek3Main   = asciiPunct + `[A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	upperLower      = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+` + contractionsCPP + `?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*` + contractionsCPP + `?`
	// llama.cpp's spelling of [\p{Lu}…]-style classes for std::regex.
	tekkenLetters  = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*`
	gpt4oLetters   = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+` + contractionsCPP + `?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*` + contractionsCPP + `?`
	graniteLetters = `[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+` + contractionsCPP + `?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*` + contractionsCPP + `?`
	// Kimi K2's expression, which llama.cpp runs by hand (its \p{Han}+).
	kimiK2 = `[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+` + contractionsCPP + `?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*` + contractionsCPP + `?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// AFMoE's digit grouping, which llama.cpp runs by hand (its
	// \p{AFMoE_digits}): a run of digits splits into its first len%3
	// digits, then threes.
	afmoeDigits = `\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N}))`
	newlineRuns = `[^\n]+|[\n]+`
)

func isFalconPunct(r rune) bool  { return isDefaultPunct(r) || r == '`' }
func isDefaultPunct(r rune) bool { return unicode.IsPunct(r) || strings.ContainsRune("$+<=>^~|", r) }

// fastPaths maps each regular expression with a hand-written Splitter to
// it; TestFastPathsMatchEngine proves each equal to the general engine.
var fastPaths = map[string]Splitter{
	gpt2Pattern:                             gpt2{},
	strings.TrimSuffix(gpt2Pattern, `|\s+`): gpt2{}, // equal: see spaceRun
	llama3Pattern:                           llama3{maxDigits: 3, foldLongS: true},
	llama3CPPPattern:                        llama3{maxDigits: 3},
	strings.Replace(llama3Pattern, "{1,3}", "", 1): llama3{maxDigits: 1, foldLongS: true},
	qwen2Pattern:                    llama3{maxDigits: 1},
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

// Pattern returns the Splitter of a pre-tokenizer regular expression as
// llama.cpp reads it (dialect Rust): its hand-written fast path if it has
// one, else the general engine (see Compile), or an error naming an
// expression the engine cannot compile.
func Pattern(expr string) (Splitter, error) { return patternIn(expr, Rust) }

// patternIn is Pattern in dialect d. The fast paths have Rust's meaning,
// so in another dialect one serves only an expression that means the
// same in both.
func patternIn(expr string, d Dialect) (Splitter, error) {
	if sp, ok := fastPaths[expr]; ok {
		if d == Rust {
			return sp, nil
		}
		a, errA := translate(expr, Rust)
		b, errB := translate(expr, d)
		if errA == nil && errB == nil && a == b {
			return sp, nil
		}
	}
	return Compile(expr, d)
}

// preTokenizers lists llama.cpp's BPE pre-tokenizers (one per
// llama_vocab_pre_type, under the first GGUF tokenizer.ggml.pre name that
// selects it) with their expressions. Where llama.cpp runs an expression
// by hand (Kimi K2's, AFMoE's digits) the list holds the expression it
// stands for.
var preTokenizers = map[string][]string{
	"default":      {`[\p{P}\$\+<=>\^~\|]+`, gpt2NoTail, `\p{N}+`, `[0-9][0-9][0-9]`},
	"llama-bpe":    {llama3CPPPattern},
	"dbrx":         {llama3CPPPattern},
	"glm4":         {llama3CPPPattern},
	"jais-2":       {contractionsCPP + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}`},
	"deepseek-llm": {`[\r\n]`, `\s?[` + deepseekLetters + `]+`, `\s?[` + deepseekPunct + `]+`, `\s+$`, `[` + deepseekCJK + `]+`, `\p{N}+`},
	"deepseek-v3":  {`\p{N}{1,3}`, cjkKana, deepseek3Main},
	"spark2_5":     {`\p{N}{1,3}`, cjkKana, asciiPunct + `[A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+`, `\p{N}`},
	"youtu": {`[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|` + cjkKana,
		upperLower + `|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"deepseek-coder":          {`[\r\n]`, `\s?\p{L}+`, `\s?\p{P}+`, `[` + deepseekCJK + `]+`, `\p{N}`},
	"falcon":                  {`[` + falconPunct + `]+`, gpt2NoTail, `[0-9][0-9][0-9]`},
	"starcoder":               {`\p{N}`, gpt2NoTail},
	"gpt-2":                   {gpt2NoTail},
	"qwen2":                   {qwen2Pattern},
	"qwen35":                  {contractionsCPP + `|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"poro-chat":               {` ?[^(\s|.,!?…。，、।۔،)]+`},
	"viking":                  {` ?[^(\s|.,!?…。，、।۔،)]+`, `\p{N}`},
	"tekken":                  {tekkenLetters + `|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"chameleon":               {`<sentinel:[0-9]+>`, `(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z`, `([\t\n]|    |  )`, `\p{N}`, `[\p{P}!-/:-@\[-` + "`" + `{-~]`, gpt2NoTail},
	"gpt-4o":                  {gpt4oLetters + `|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"granite-embed-multi-97m": {graniteLetters + `|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"tiny_aya":                {`\d{1,3}(?=(?:\d{3})*\b)`, upperLower + `|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"kimi-k2":                 {kimiK2},
	"superbpe":                {`\p{N}+`, `(?=(\d{3})+(?!\d))`},
	"bailingmoe":              {`'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`},
	"seed-coder":              {contractionsCPP + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"ufakzeka":                {`[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"afmoe":                   {afmoeDigits, `[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+`, deepseek3Main},
	"laguna":                  {newlineRuns, qwen2Pattern},
	"exaone-moe":              {contractionsCPP + `|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+`},
	"gemma4":                  {newlineRuns},
	"minicpm5":                {`\p{N}{1,3}`, contractionsCPP + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"whitespace":              {`\S+`},
}

// preAliases are the other tokenizer.ggml.pre names llama.cpp gives the
// same pre-tokenizers.
var preAliases = map[string]string{
	"":       "default",
	"llama3": "llama-bpe", "llama-v3": "llama-bpe", "falcon3": "llama-bpe", "falcon-h1": "llama-bpe",
	"pixtral": "llama-bpe", "midm-2.0": "llama-bpe", "lfm2": "llama-bpe", "jina-v5-nano": "llama-bpe",
	"smaug-bpe": "dbrx", "chatglm-bpe": "glm4",
	"hunyuan-dense": "deepseek-v3", "joyai-llm": "deepseek-v3", "hy_v4": "deepseek-v3",
	"refact": "starcoder", "command-r": "starcoder", "smollm": "starcoder", "codeshell": "starcoder",
	"exaone": "starcoder", "minerva-7b": "starcoder", "mellum2": "starcoder",
	"phi-2": "gpt-2", "jina-es": "gpt-2", "jina-de": "gpt-2", "gigachat": "gpt-2", "jina-v2-es": "gpt-2",
	"jina-v2-de": "gpt-2", "a.x-4.0": "gpt-2", "mellum": "gpt-2", "modern-bert": "gpt-2", "mpt": "gpt-2",
	"olmo": "gpt-2", "jais": "gpt-2", "trillion": "gpt-2", "granite-docling": "gpt-2", "exaone4": "gpt-2",
	"jina-v1-en": "gpt-2", "jina-v2-code": "gpt-2", "roberta-bpe": "gpt-2",
	"deepseek-r1-qwen": "qwen2", "kormo": "qwen2", "f2llmv2": "qwen2", "stablelm2": "qwen2", "hunyuan": "qwen2",
	"solar-open": "qwen2", "megrez": "qwen2", "grok-2": "qwen2",
	"bloom": "poro-chat", "gpt3-finnish": "poro-chat",
	"llama4": "gpt-4o", "kanana2": "gpt-4o", "talkie": "gpt-4o", "minimax-m2": "gpt-4o",
	"cohere2moe":  "tiny_aya",
	"bailingmoe2": "bailingmoe", "llada-moe": "bailingmoe",
	"granite-embed-multi-311m": "gemma4", "sarvam-moe": "gemma4",
}

// CanonicalPreTokenizer returns the name under which this package lists
// the pre-tokenizer llama.cpp calls name ("llama3" is "llama-bpe").
func CanonicalPreTokenizer(name string) string {
	if a, ok := preAliases[name]; ok {
		return a
	}
	return name
}

// LlamaCppOptions are what llama.cpp turns on with a GGUF
// tokenizer.ggml.pre name besides its expressions.
type LlamaCppOptions struct {
	// IgnoreMerges emits a pre-token that is a token whole; AddBOS starts
	// prompts with BOS (the GGUF's tokenizer.ggml.add_bos_token overrides
	// it).
	IgnoreMerges, AddBOS bool
	// CharLevel: the tokens are UTF-8 text, not GPT-2's byte-level
	// spelling (llama.cpp's byte_encode false); EscapeSpaces: spaces are ▁
	// in them (its escape_whitespaces).
	CharLevel, EscapeSpaces bool
}

// PreTokenizerOptions returns llama.cpp's options for a GGUF
// tokenizer.ggml.pre name.
func PreTokenizerOptions(name string) LlamaCppOptions {
	switch CanonicalPreTokenizer(name) {
	case "llama-bpe", "tekken":
		return LlamaCppOptions{IgnoreMerges: true, AddBOS: true}
	case "minicpm5", "youtu", "granite-embed-multi-97m":
		return LlamaCppOptions{IgnoreMerges: true}
	case "chameleon":
		return LlamaCppOptions{AddBOS: true}
	case "gemma4":
		return LlamaCppOptions{CharLevel: true, EscapeSpaces: true}
	case "whitespace":
		return LlamaCppOptions{CharLevel: true}
	}
	return LlamaCppOptions{}
}

// Apply sets the options in cfg: the switches, and for EscapeSpaces a
// normalizer that spells spaces ▁ and a decoding that turns ▁ back.
func (o LlamaCppOptions) Apply(cfg *Config) {
	cfg.IgnoreMerges, cfg.AddBOS, cfg.CharLevel = o.IgnoreMerges, o.AddBOS, o.CharLevel
	if o.EscapeSpaces {
		cfg.Normalize = func(s string) string { return strings.ReplaceAll(s, " ", "▁") }
		cfg.DecodeToken = func(s string) string { return strings.ReplaceAll(s, "▁", " ") }
	}
}

// PreTokenizer returns the Splitter llama.cpp uses for a GGUF
// tokenizer.ggml.pre name ("" is llama.cpp's default), or an error naming
// an unknown one. Expressions with a fast path use it, the others the
// general engine.
func PreTokenizer(name string) (Splitter, error) {
	exprs, ok := preTokenizers[CanonicalPreTokenizer(name)]
	if !ok {
		return nil, fmt.Errorf("bpe: pre-tokenizer %q is not one llama.cpp names", name)
	}
	return patternSequence(exprs, Pattern)
}

// patternSequence compiles a list of expressions with compile, as one
// Splitter.
func patternSequence(exprs []string, compile func(string) (Splitter, error)) (Splitter, error) {
	seq := make(Sequence, len(exprs))
	for i, e := range exprs {
		sp, err := compile(e)
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
