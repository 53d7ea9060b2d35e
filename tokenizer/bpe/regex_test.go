package bpe

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prefixd/prefixd/internal/vocabtest"
)

// hardParts are the texts where pre-tokenizers disagree when one is wrong:
// contractions in both cases (and 'ſ, which (?i) folds to 's), CJK,
// emoji with ZWJ and skin tones, combining marks, digits of several
// scripts, and every kind of whitespace run, U+0085 (whitespace to Rust)
// and U+FEFF (not) among them.
var hardParts = []string{
	"It's", "IT'S", "we'LL", "they'Re", "I'M", "she'D", "'ſ", "'\u212a", "don't", "'", "''",
	"我想在apple工作", "日本語のテキスト", "한국어 문장", "ｶﾀｶﾅ",
	"👩\u200d💻", "👍🏽", "🇺🇸", "🦙.cpp",
	"e\u0301", "a\u0308b", "ก\u0e31", "क्षि", "\u0301x",
	"0", "12", "123", "1234567", "٣٤٥", "①②", "Ⅻ", "3.14", "1,000,000",
	" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n\n", " \n ", "\v\f", "\u0085", "\u00a0", "\u3000", "\u2028", "\ufeff", "\u180e", "\u200b",
	"Hello", " world", "func(x)", "{\n\t}", "a+=b", "<|x|>", "...", "!!!", "$var", "a_b", "—", "«»", "`",
	"\xff", "\xc3", "Ωmega", "ǅ", "ßẞ", "Ⅰ",
}

// hardCorpus returns about n bytes of hardParts and vocabtest.MixedText pieces in a
// deterministic random order, so that every pair of neighbours occurs.
func hardCorpus(n int) string {
	r := rand.New(rand.NewPCG(3, 9))
	mixed := vocabtest.MixedText(1 << 16)
	var b strings.Builder
	for b.Len() < n {
		if r.IntN(4) == 0 {
			k := r.IntN(len(mixed) - 64)
			b.WriteString(mixed[k : k+r.IntN(64)])
			continue
		}
		b.WriteString(hardParts[r.IntN(len(hardParts))])
	}
	return b.String()
}

// TestFastPathsMatchEngine proves each hand-written splitter equal to the
// general engine running its expression, on a large mixed corpus cut into
// texts of many lengths (so that text ends fall everywhere).
func TestFastPathsMatchEngine(t *testing.T) {
	corpus := hardCorpus(1 << 19)
	r := rand.New(rand.NewPCG(5, 5))
	var texts []string
	for i := 0; i < len(corpus); {
		n := 1 + r.IntN(200)
		texts = append(texts, corpus[i:min(i+n, len(corpus))])
		i += n
	}
	texts = append(texts, hardParts...)
	for expr, fast := range fastPaths {
		general, err := Compile(expr, Rust)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		for _, text := range texts {
			if got, want := fast.Split(nil, text), general.Split(nil, text); !slices.Equal(got, want) {
				t.Fatalf("%.40q on %q:\nfast    %q\ngeneral %q", expr, text, got, want)
			}
		}
	}
}

// FuzzFastPathsMatchEngine checks the fast paths against the general
// engine on any text, valid UTF-8 or not.
func FuzzFastPathsMatchEngine(f *testing.F) {
	for _, p := range hardParts {
		f.Add(p + " " + p)
	}
	type pair struct {
		expr          string
		fast, general Splitter
	}
	var pairs []pair
	for expr, fast := range fastPaths {
		general, err := Compile(expr, Rust)
		if err != nil {
			f.Fatal(err)
		}
		pairs = append(pairs, pair{expr, fast, general})
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range pairs {
			if got, want := p.fast.Split(nil, s), p.general.Split(nil, s); !slices.Equal(got, want) {
				t.Fatalf("%.40q on %q:\nfast    %q\ngeneral %q", p.expr, s, got, want)
			}
		}
	})
}

// TestEngineSemantics pins the places where regexp2 alone would differ
// from Rust's regex crate and Oniguruma, the two dialects, and the
// splitting rules. Oniguruma's column was checked against Hugging Face's
// tokenizers (TestHFTokenizersReference's probes).
func TestEngineSemantics(t *testing.T) {
	both := func(want ...string) [2][]string { return [2][]string{want, want} }
	for _, c := range []struct {
		expr, in string
		want     [2][]string // Rust, Oniguruma
	}{
		{`\s+`, "a\u0085b", both("a", "\u0085", "b")},             // NEL is White_Space
		{`\s+`, "a\ufeffb", both("a\ufeffb")},                     // BOM is not
		{`\s+`, "a\u00a0\u3000b", both("a", "\u00a0\u3000", "b")}, // nor are these
		{`\s+(?!\S)|\s+`, "a   b", both("a", "  ", " ", "b")},     // lookahead
		{`(?i:'s)`, "x'ſ", both("x", "'ſ")},                       // simple case folding orbit
		{`(?i:k)+`, "kK\u212a!", both("kK\u212a", "!")},
		{`(?i)'s`, "'S", both("'S")},
		{`\w+`, "ab\u0903c d", both("ab\u0903c", " ", "d")}, // Mc is a word rune
		{`\w+`, "4 ½ Ⅻ①", [2][]string{{"4", " ½ ", "Ⅻ", "①"}, {"4", " ", "½", " ", "Ⅻ", "①"}}},
		{`\w+`, "Ⓐb\u200dc", both("Ⓐb\u200dc")},           // Other_Alphabetic and Join_Control
		{`\bx`, "x\u0903x x", both("x", "\u0903x ", "x")}, // no boundary between x and Mc
		{`\s+$`, "a \n", both("a", " \n")},
		{`\s+$`, "a  \nb", [2][]string{{"a  \nb"}, {"a", "  ", "\nb"}}}, // $ ends the text, or a line
		{`a$`, "a\n", [2][]string{{"a\n"}, {"a", "\n"}}},
		{`^a`, "aa\nab", [2][]string{{"a", "a\nab"}, {"a", "a\n", "a", "b"}}},
		{`\p{L}++a`, "bba", both("bba")}, // possessive: no match
		{`[a-z]*+b|x`, "aab x", both("aab ", "x")},
		{`(?>a+)b`, "aab", both("aab")},
		{`[\p{L}&&[^\p{Han}]]+`, "ab我c", both("ab", "我", "c")}, // intersection
		{`\p{Han}+`, "ab我想c", both("ab", "我想", "c")},
		{`(?=(\d{3})+(?!\d))`, "1234567", both("1", "234", "567")}, // empty matches cut
		{afmoeDigits, "1234567 12", both("1", "234", "567", " ", "12")},
		{`(?P<d>\d)`, "a1", both("a", "1")},
		{`x{2}+`, "xxxxx", both("xxxx", "x")},                            // (?:x{2})+ as Oniguruma reads it
		{`a{,2}`, "a{,2}", both("a{,2}")},                                // a literal brace
		{`.`, "\xffa", both("\xff", "a")},                                // invalid UTF-8 is a rune
		{`\pL+`, "ab1", both("ab", "1")},                                 // property names: one letter,
		{`\p{Letter}+|\p{Decimal_Number}`, "ab12", both("ab", "1", "2")}, // long,
		{`\p{sc=Han}+|\p{gc=Nd}`, "x我1", both("x", "我", "1")},            // name=value,
		{`\p{^N}+|\P{L}`, "ab1 2", both("ab", "1", " ", "2")},            // negated,
		{`[\p{Alphabetic}]+`, "Ⓐb\u0903Ⅻ1", both("Ⓐb\u0903Ⅻ", "1")},      // Alphabetic, which Go has no table for
		{`[^\P{L}]+`, "ab1c", both("ab", "1", "c")},
	} {
		for d, want := range c.want {
			sp, err := Compile(c.expr, Dialect(d))
			if err != nil {
				t.Errorf("%q: %v", c.expr, err)
				continue
			}
			if got := sp.Split(nil, c.in); !slices.Equal(got, want) {
				t.Errorf("%q on %q in dialect %d: got %q, want %q", c.expr, c.in, d, got, want)
			}
		}
	}
	for _, bad := range []string{`(a`, `a)`, `[a`, `\`, `\p{`, `[[:alpha:]]`, `[a&&b]`, `\p{NoSuchClass}`, `*+`, `[\P{Alphabetic}]`, `\p{}`} {
		if _, err := Compile(bad, Rust); err == nil || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("Compile(%q): error %v does not name it", bad, err)
		}
	}
	// The \s+$ fast path has Rust's meaning, so Oniguruma's gets the engine.
	if sp, _ := patternIn(`\s+$`, Oniguruma); sp == fastPaths[`\s+$`] {
		t.Error("the fast path of \\s+$ serves Oniguruma's line-end $")
	}
	if sp, _ := patternIn(gpt2Pattern, Oniguruma); sp != fastPaths[gpt2Pattern] {
		t.Error("GPT-2's expression, the same in both dialects, lost its fast path")
	}
}

// TestAllPreTokenizersLoad loads every name llama.cpp maps to a
// pre-tokenizer and splits the corpus with it.
func TestAllPreTokenizersLoad(t *testing.T) {
	text := hardCorpus(1 << 12)
	names := []string{}
	for n := range preTokenizers {
		names = append(names, n)
	}
	for n := range preAliases {
		names = append(names, n)
	}
	for _, name := range names {
		sp, err := PreTokenizer(name)
		if err != nil {
			t.Errorf("%q: %v", name, err)
			continue
		}
		if got := strings.Join(sp.Split(nil, text), ""); got != text {
			t.Errorf("%q: pieces do not join to the text", name)
		}
	}
	if _, err := PreTokenizer("klingon"); err == nil || !strings.Contains(err.Error(), `"klingon"`) {
		t.Errorf("unknown pre-tokenizer: error %v does not name it", err)
	}
}

// TestLlamaCppCustomSplitters checks the expressions that stand for
// llama.cpp's hand-run splitters on cases worked out from its code.
func TestLlamaCppCustomSplitters(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []string
	}{
		{"afmoe", "x 12345", []string{"x", " ", "12", "345"}},
		{"kimi-k2", "Hello我们's", []string{"Hello", "我们", "'s"}},
		{"kimi-k2", "ABCdef's 1234", []string{"ABCdef's", " ", "123", "4"}},
		{"superbpe", "x1234567", []string{"x", "1", "234", "567"}},
		{"gemma4", "a b\n\nc", []string{"a b", "\n\n", "c"}},
		{"whitespace", "a  b", []string{"a", "  ", "b"}},
	} {
		sp, err := PreTokenizer(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := sp.Split(nil, c.in); !slices.Equal(got, c.want) {
			t.Errorf("%s on %q: got %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

// TestPreTokenizerOptions checks llama.cpp's per-name switches: only its
// Llama 3 names, tekken, minicpm5, youtu and granite-embed-multi-97m
// ignore merges (not dbrx or glm4, which share Llama 3's expression);
// gemma4's kind run BPE on text with spaces as ▁.
func TestPreTokenizerOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		want LlamaCppOptions
	}{
		{"llama3", LlamaCppOptions{IgnoreMerges: true, AddBOS: true}}, {"pixtral", LlamaCppOptions{IgnoreMerges: true, AddBOS: true}},
		{"tekken", LlamaCppOptions{IgnoreMerges: true, AddBOS: true}}, {"minicpm5", LlamaCppOptions{IgnoreMerges: true}},
		{"dbrx", LlamaCppOptions{}}, {"glm4", LlamaCppOptions{}}, {"chameleon", LlamaCppOptions{AddBOS: true}},
		{"qwen2", LlamaCppOptions{}}, {"", LlamaCppOptions{}},
		{"sarvam-moe", LlamaCppOptions{CharLevel: true, EscapeSpaces: true}}, {"whitespace", LlamaCppOptions{CharLevel: true}},
	} {
		if got := PreTokenizerOptions(c.name); got != c.want {
			t.Errorf("%q: %+v, want %+v", c.name, got, c.want)
		}
	}
	// Escaped spaces: a vocabulary of text with ▁, split at newlines.
	cfg := Config{Tokens: []string{"▁", "a", "▁a", "\n", "<0x62>"}, Types: []TokenType{Normal, Normal, Normal, Normal, Byte},
		Merges: []Merge{{"▁", "a"}}, Unknown: -1, BOS: -1, EOS: -1}
	PreTokenizerOptions("gemma4").Apply(&cfg)
	var err error
	if cfg.Pre, err = PreTokenizer("gemma4"); err != nil {
		t.Fatal(err)
	}
	tk, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ids := tk.Encode("a a\nb")
	if want := []int32{1, 2, 3, 4}; !slices.Equal(ids, want) {
		t.Errorf("Encode = %v, want %v", ids, want)
	}
	if got := tk.Decode(ids); got != "a a\nb" {
		t.Errorf("Decode = %q", got)
	}
}

// FuzzCompile feeds the expression translator any text in both dialects:
// errors are fine, panics are not, and an expression it accepts splits a
// text into pieces that join back to it.
func FuzzCompile(f *testing.F) {
	for expr := range fastPaths {
		f.Add(expr, "Hello 'S world 123\n")
	}
	for _, exprs := range preTokenizers {
		for _, e := range exprs {
			f.Add(e, "x ab我c 1234567")
		}
	}
	for _, e := range []string{`(?i)a(?-i:b)`, `[^]a]`, `\p{L}*+|x{2,}+`, `(?P<n>a)|^$`, `[\w&&[^\d]]`, `a{`, `\x{41}`, `[a-`} {
		f.Add(e, "aAb]1")
	}
	f.Fuzz(func(t *testing.T, expr, s string) {
		for _, d := range []Dialect{Rust, Oniguruma} {
			sp, err := Compile(expr, d)
			if err != nil {
				continue
			}
			if sp.(*regexSplitter).re.MatchTimeout > time.Second {
				sp.(*regexSplitter).re.MatchTimeout = time.Second // a catastrophic expression is no translator bug
			}
			checkPieces(t, expr, s, sp.Split(nil, s))
		}
	})
}

// TestCatastrophicPatternIsBounded: a hostile tokenizer.json's pattern
// that backtracks exponentially on a run of a's ((a+)+b: 2^60 ways to
// fail) stops at matchTimeout instead of holding the request, and the
// text still comes back whole, in pieces that concatenate to it.
func TestCatastrophicPatternIsBounded(t *testing.T) {
	defer func(d time.Duration) { matchTimeout = d }(matchTimeout)
	matchTimeout = 20 * time.Millisecond
	sp, err := Compile(`(a+)+b|\s+`, Rust)
	if err != nil {
		t.Fatal(err)
	}
	text := "x " + strings.Repeat("a", 60) + " y"
	pieces := sp.Split(nil, text)
	if got := strings.Join(pieces, ""); got != text {
		t.Fatalf("pieces %q join to %q, want %q", pieces, got, text)
	}
	// The space before the run was split off before the match gave up.
	if len(pieces) < 2 || pieces[0] != "x" || pieces[1] != " " {
		t.Fatalf("pieces %q: want \"x\", \" \" first", pieces)
	}
}
