package bpe

import (
	"slices"
	"strings"
	"testing"
)

// splitCases are pre-tokenizations worked out by hand from each regular
// expression's meaning (leftmost-first alternation, greedy quantifiers,
// the lookahead \s+(?!\S)).
var splitCases = []struct {
	name string
	sp   Splitter
	in   string
	want []string
}{
	{"gpt2 words", gpt2{}, "Hello world", []string{"Hello", " world"}},
	{"gpt2 contraction and spaces", gpt2{}, "I've  got 123 apples!!", []string{"I", "'ve", " ", " got", " 123", " apples", "!!"}},
	{"gpt2 newlines", gpt2{}, "a\n\nb", []string{"a", "\n", "\n", "b"}},
	{"gpt2 trailing spaces", gpt2{}, "x   ", []string{"x", "   "}},
	{"gpt2 case-sensitive contraction", gpt2{}, "'S", []string{"'", "S"}},
	{"gpt2 punctuation run", gpt2{}, "a ...b", []string{"a", " ...", "b"}},
	{"gpt2 unicode letters", gpt2{}, "нещо на", []string{"нещо", " на"}},
	{"llama3 contraction any case", llama3{maxDigits: 3}, "I'VE 12345 ok", []string{"I", "'VE", " ", "123", "45", " ok"}},
	{"llama3 newline run", llama3{maxDigits: 3}, "a\n\n  b", []string{"a", "\n\n", " ", " b"}},
	{"llama3 punctuation takes newlines", llama3{maxDigits: 3}, "!!\n\nx", []string{"!!\n\n", "x"}},
	{"llama3 tab prefixes a word", llama3{maxDigits: 3}, "\tword", []string{"\tword"}},
	{"llama3 punctuation prefixes a word", llama3{maxDigits: 3}, "(hello)", []string{"(hello", ")"}},
	{"llama3 digits in threes", llama3{maxDigits: 3}, "2024", []string{"202", "4"}},
	{"qwen2 single digits", llama3{maxDigits: 1}, "2024", []string{"2", "0", "2", "4"}},
	{"llama3 spaces before newline", llama3{maxDigits: 3}, "a  \n b", []string{"a", "  \n", " b"}},
	{"each number", classRun{class: isNumber, count: 1}, "ab12c", []string{"ab", "1", "2", "c"}},
	{"three ASCII digits", classRun{class: bracket("0-9"), count: 3}, "x12345", []string{"x", "123", "45"}},
	{"deepseek letters", fastPaths[`\s?[`+deepseekLetters+`]+`], "Hi there!", []string{"Hi", " there", "!"}},
	{"deepseek punctuation", fastPaths[`\s?[`+deepseekPunct+`]+`], "1 ,.2", []string{"1", " ,.", "2"}},
	{"deepseek CJK", fastPaths[`[`+deepseekCJK+`]+`], "ab我想c", []string{"ab", "我想", "c"}},
	{"trailing space", trailingSpace{}, "ab  ", []string{"ab", "  "}},
	{"only space", trailingSpace{}, "  ", []string{"  "}},
	{"falcon punctuation", fastPaths[`[`+falconPunct+`]+`], "a+=b`", []string{"a", "+=", "b", "`"}},
	{"starcoder digits then gpt2", Sequence{classRun{class: isNumber, count: 1}, gpt2{}}, " 42 apples", []string{" ", "4", "2", " apples"}},
}

func TestSplitters(t *testing.T) {
	for _, c := range splitCases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.sp.Split(nil, c.in); !slices.Equal(got, c.want) {
				t.Fatalf("Split(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestPreTokenizerNames(t *testing.T) {
	for _, name := range []string{"llama-bpe", "llama3", "qwen2", "gpt-2", "starcoder", "smollm", "deepseek-llm", "falcon", "default", ""} {
		if _, err := PreTokenizer(name); err != nil {
			t.Errorf("PreTokenizer(%q): %v", name, err)
		}
	}
	if _, err := PreTokenizer("klingon"); err == nil || !strings.Contains(err.Error(), `"klingon"`) {
		t.Errorf("unknown pre-tokenizer: error %v does not name it", err)
	}
	if _, err := Pattern(`(\w+`); err == nil || !strings.Contains(err.Error(), `(\\w+`) {
		t.Errorf("bad pattern: error %v does not name it", err)
	}
}

// allSplitters is every splitter this package has, for the fuzz target.
func allSplitters(t testing.TB) map[string]Splitter {
	out := map[string]Splitter{}
	for name := range preTokenizers {
		sp, err := PreTokenizer(name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = sp
	}
	for expr, sp := range fastPaths {
		out[expr] = sp
	}
	return out
}

// FuzzSplitters checks that every splitter cuts any text, valid UTF-8 or
// not, into non-empty pieces that concatenate back to it.
func FuzzSplitters(f *testing.F) {
	for _, c := range splitCases {
		f.Add(c.in)
	}
	f.Add("\xff\xfe 'll\r\n\u3000 \u00a0x")
	sps := allSplitters(f)
	f.Fuzz(func(t *testing.T, s string) {
		for name, sp := range sps {
			checkPieces(t, name, s, sp.Split(nil, s))
		}
	})
}

// checkPieces fails t unless pieces are non-empty and join to s.
func checkPieces(t *testing.T, name, s string, pieces []string) {
	t.Helper()
	for _, p := range pieces {
		if p == "" {
			t.Fatalf("%s: empty piece in %q", name, pieces)
		}
	}
	if got := strings.Join(pieces, ""); got != s {
		t.Fatalf("%s: pieces %q join to %q, not %q", name, pieces, got, s)
	}
}
