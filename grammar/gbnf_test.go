package grammar

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func mustGBNF(t testing.TB, src string) *Grammar {
	t.Helper()
	g, err := ParseGBNF(src, Limits{})
	if err != nil {
		t.Fatalf("ParseGBNF(%q): %v", src, err)
	}
	return g
}

func TestGBNFMatch(t *testing.T) {
	cases := []struct {
		name, src string
		yes, no   []string
	}{
		{"literal", `root ::= "abc"`, []string{"abc"}, []string{"", "ab", "abcd", "abd"}},
		{"alt", `root ::= "a" | "bc" | ""`, []string{"a", "bc", ""}, []string{"b", "abc"}},
		{"star", `root ::= "a"* "b"`, []string{"b", "ab", "aaaab"}, []string{"", "a", "ba"}},
		{"plus", `root ::= [0-9]+`, []string{"0", "0123"}, []string{"", "a", "1a"}},
		{"opt", `root ::= "-"? [1-9]`, []string{"-1", "9"}, []string{"-", "0", "--1"}},
		{"counts", `root ::= "x"{2,3}`, []string{"xx", "xxx"}, []string{"x", "xxxx"}},
		{"exact", `root ::= "x"{2}`, []string{"xx"}, []string{"x", "xxx"}},
		{"atleast", `root ::= "x"{2,}`, []string{"xx", "xxxxx"}, []string{"x"}},
		{"negclass", `root ::= [^a-c]`, []string{"d", "é", "日", "\n"}, []string{"a", "b", "", "dd"}},
		{"unicode", `root ::= [α-ω]+`, []string{"αβγ", "ω"}, []string{"a", "Α"}},
		{"any", `root ::= .`, []string{"a", "日", "\U0001F600"}, []string{"", "ab", "\xff"}},
		{"escapes", `root ::= "\x41\u00e9\n\"" [\]\-]`, []string{"Aé\n\"]", "Aé\n\"-"}, []string{"Aé\n\"a"}},
		{"rules", "root ::= greeting \" \" name\ngreeting ::= \"hi\" | \"hello\"\nname ::= [a-z]+ # a name\n",
			[]string{"hi bob", "hello x"}, []string{"hi", "hey bob", "hi Bob"}},
		{"groups", `root ::= ("a" ("b" | "c")*)+`, []string{"a", "abcb", "aab"}, []string{"", "b", "abd"}},
		{"recursion", "root ::= \"(\" root \")\" | \"\"", []string{"", "()", "((()))"}, []string{"(", "())", ")("}},
		{"multiline", "root ::=\n  \"a\"\n  | \"b\"\nother ::= \"c\"", []string{"a", "b"}, []string{"c"}},
		{"nullable", `root ::= x y "z"
x ::= "a"?
y ::= "b"*`, []string{"z", "az", "abbz", "bz"}, []string{"", "ba"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := mustGBNF(t, tc.src)
			for _, s := range tc.yes {
				if !g.Match([]byte(s)) {
					t.Errorf("%q rejected", s)
				}
			}
			for _, s := range tc.no {
				if g.Match([]byte(s)) {
					t.Errorf("%q accepted", s)
				}
			}
		})
	}
}

func TestGBNFErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{`root ::= "a`, "unterminated literal"},
		{`root ::= [a`, "unterminated class"},
		{`root ::= x`, `rule "x" is used but not defined`},
		{`foo ::= "a"`, "no root rule"},
		{`root ::= ("a"`, "expected )"},
		{"root ::= root \"a\"", "left recursion"},
		{"root ::= x \"a\"\nx ::= \"\" | root", "left recursion"},
		{`root ::= "a"{3,2}`, "max below min"},
		{`root ::= "a"{99999}`, "repetition count above"},
		{`root ::= "\q"`, "unknown escape"},
		{"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
		{`root ::= [z-a]`, "backwards"},
		{`root ::= @`, "unexpected"},
		{"root ::= " + strings.Repeat("(", 100) + `"a"` + strings.Repeat(")", 100), "nested deeper"},
	}
	for _, tc := range cases {
		_, err := ParseGBNF(tc.src, Limits{})
		var ge *Error
		if err == nil || !errors.As(err, &ge) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseGBNF(%q) = %v, want an *Error containing %q", tc.src, err, tc.want)
		}
	}
}

func TestGBNFErrorNamesLine(t *testing.T) {
	_, err := ParseGBNF("root ::= \"a\"\nb ::= [x", Limits{})
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("error %v does not name line 2", err)
	}
}

// TestHugeClasses: classes of many single characters are normalized in
// O(n log n), not inserted one by one; one too large to lower is an
// error, one that fits matches exactly its characters.
func TestHugeClasses(t *testing.T) {
	class := func(n int) string {
		var b strings.Builder
		b.WriteString("root ::= [")
		for r := rune(0x4E00); r < 0x4E00+rune(2*n); r += 2 { // every other code point: no merging
			b.WriteRune(r)
		}
		b.WriteString("]")
		return b.String()
	}
	var ge *Error
	if _, err := ParseGBNF(class(100_000), Limits{}); !errors.As(err, &ge) || !strings.Contains(ge.Msg, "larger than") {
		t.Fatalf("100,000 characters: %v, want a too-large error", err)
	}
	g, err := ParseGBNF(class(5_000), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !g.Match([]byte("\u4e00")) || g.Match([]byte("\u4e01")) || !g.Match([]byte(string(rune(0x4E00+2*4999)))) {
		t.Fatal("the class does not match exactly every other code point")
	}
}

// TestLongWordList: a rule of thousands of literal alternatives is
// factored, so its states stay small and the matcher follows it.
func TestLongWordList(t *testing.T) {
	var b strings.Builder
	b.WriteString("root ::= ")
	for i := range 5000 {
		if i > 0 {
			b.WriteString(" | ")
		}
		fmt.Fprintf(&b, `"w%d"`, i)
	}
	g, err := ParseGBNF(b.String(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{"w0": true, "w4999": true, "w5000": false, "w": false} {
		if g.Match([]byte(s)) != want {
			t.Errorf("Match(%q) = %v", s, !want)
		}
	}
}
