package bpe

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// hfSteps parses a pre_tokenizer for a test.
func hfSteps(t testing.TB, js string) hfPipeline {
	t.Helper()
	var steps hfPipeline
	var byteLevel bool
	if err := parseHFPre(json.RawMessage(js), &steps, &byteLevel); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return steps
}

// TestHFPreTokenizers checks each tokenizer.json pre-tokenizer on the
// examples of Hugging Face's documentation and on cases worked out from
// its code.
func TestHFPreTokenizers(t *testing.T) {
	split := func(behavior string, invert bool) string {
		inv := "false"
		if invert {
			inv = "true"
		}
		return `{"type": "Split", "pattern": {"String": "-"}, "behavior": "` + behavior + `", "invert": ` + inv + `}`
	}
	const countdown = "the-final--countdown"
	for _, c := range []struct {
		pre, in string
		atStart bool
		want    []string
	}{
		{split("Removed", false), countdown, true, []string{"the", "final", "countdown"}},
		{split("Isolated", false), countdown, true, []string{"the", "-", "final", "-", "-", "countdown"}},
		{split("MergedWithPrevious", false), countdown, true, []string{"the-", "final-", "-", "countdown"}},
		{split("MergedWithNext", false), countdown, true, []string{"the", "-final", "-", "-countdown"}},
		{split("Contiguous", false), countdown, true, []string{"the", "-", "final", "--", "countdown"}},
		{split("Removed", true), countdown, true, []string{"-", "-", "-"}},
		{split("MergedWithPrevious", true), countdown, true, []string{"the", "-final", "-", "-countdown"}},
		{`{"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed"}`, " a  b ", true, []string{"a", "b"}},
		{`{"type": "Split", "pattern": {"Regex": "\\d"}, "behavior": "Contiguous"}`, "ab12c3", true, []string{"ab", "12", "c", "3"}},
		{`{"type": "Split", "pattern": {"Regex": "(?=\\d)"}, "behavior": "MergedWithNext"}`, "ab12", true, []string{"ab", "1", "2"}},
		{`{"type": "Digits", "individual_digits": false}`, "Call 123 please", true, []string{"Call ", "123", " please"}},
		{`{"type": "Digits", "individual_digits": true}`, "Call 123 please", true, []string{"Call ", "1", "2", "3", " please"}},
		{`{"type": "Punctuation"}`, "Hey friend!     How are you?!?", true, []string{"Hey friend", "!", "     How are you", "?", "!", "?"}},
		{`{"type": "Punctuation", "behavior": "Contiguous"}`, "a$+b", true, []string{"a", "$+", "b"}},
		{`{"type": "Whitespace"}`, "How are you doing?", true, []string{"How", "are", "you", "doing", "?"}},
		{`{"type": "Whitespace"}`, "Hey man!\u00a0ok", true, []string{"Hey", "man", "!", "ok"}},
		{`{"type": "WhitespaceSplit"}`, "Hey man!\u0085ok", true, []string{"Hey", "man!", "ok"}},
		{`{"type": "Metaspace"}`, "Hey friend!", true, []string{"▁Hey", "▁friend!"}},
		{`{"type": "Metaspace"}`, "  a", true, []string{"▁", "▁a"}},
		{`{"type": "Metaspace", "split": false}`, "Hey friend", true, []string{"▁Hey▁friend"}},
		{`{"type": "Metaspace", "prepend_scheme": "first"}`, "Hey", true, []string{"▁Hey"}},
		{`{"type": "Metaspace", "prepend_scheme": "first"}`, "Hey", false, []string{"Hey"}},
		{`{"type": "Metaspace", "prepend_scheme": "never"}`, "Hey you", true, []string{"Hey", "▁you"}},
		{`{"type": "Metaspace", "replacement": "_", "add_prefix_space": false}`, "a b", true, []string{"a", "_b"}},
		{`{"type": "ByteLevel", "add_prefix_space": true}`, "Hello world", true, []string{" Hello", " world"}},
		{`{"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "ByteLevel", "add_prefix_space": true, "use_regex": false}]}`, "a b", true, []string{" a", " b"}},
		{`{"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true}, {"type": "Punctuation"}]}`, "1.5x", true, []string{"1", ".", "5", "x"}},
	} {
		got := hfSteps(t, c.pre).splitAt(nil, c.in, c.atStart)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s on %q: got %q, want %q", c.pre, c.in, got, c.want)
		}
	}
}

// FuzzHFPreTokenizers checks that the pre-tokenizers that keep all text
// (every behavior but Removed) return non-empty pieces that join to it.
func FuzzHFPreTokenizers(f *testing.F) {
	for _, s := range []string{"the-final--countdown", "Call 123 please!", "a\u00a0b\xff"} {
		f.Add(s)
	}
	var pipes []hfPipeline
	for _, b := range []string{"Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"} {
		for _, pat := range []string{`{"String": "-"}`, `{"String": "ab"}`, `{"Regex": "\\s+|(?=\\d)"}`, `{"Regex": "\\p{L}*"}`} {
			for _, inv := range []string{"false", "true"} {
				pipes = append(pipes, hfSteps(f, `{"type": "Split", "pattern": `+pat+`, "behavior": "`+b+`", "invert": `+inv+`}`))
			}
		}
	}
	pipes = append(pipes, hfSteps(f, `{"type": "Digits"}`), hfSteps(f, `{"type": "Punctuation", "behavior": "MergedWithNext"}`))
	f.Fuzz(func(t *testing.T, s string) {
		for i, p := range pipes {
			checkPieces(t, fmt.Sprint("pipeline ", i), s, p.Split(nil, s))
		}
	})
}

// TestHFNormalizers checks each normalizer.
func TestHFNormalizers(t *testing.T) {
	for _, c := range []struct{ norm, in, want string }{
		{`{"type": "NFC"}`, "e\u0301", "é"},
		{`{"type": "NFD"}`, "é", "e\u0301"},
		{`{"type": "NFKC"}`, "ﬁ①", "fi1"},
		{`{"type": "NFKD"}`, "ﬁé", "fie\u0301"},
		{`{"type": "Lowercase"}`, "HeLLo ÀB", "hello àb"},
		{`{"type": "Replace", "pattern": {"String": " "}, "content": "▁"}`, "a b  c", "a▁b▁▁c"},
		{`{"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}`, "a \t\n b", "a b"},
		{`{"type": "Replace", "pattern": {"Regex": "x"}, "content": "$1"}`, "axb", "a$1b"},
		{`{"type": "Prepend", "prepend": "▁"}`, "a", "▁a"},
		{`{"type": "Prepend", "prepend": "▁"}`, "", ""},
		{`{"type": "Strip", "strip_left": true, "strip_right": false}`, " \u3000a ", "a "},
		{`{"type": "Strip", "strip_left": true, "strip_right": true}`, " a\u0085", "a"},
		{`{"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Prepend", "prepend": "_"}]}`, "ＡＢ", "_ab"},
	} {
		f, err := hfNormalizer(json.RawMessage(c.norm))
		if err != nil {
			t.Fatalf("%s: %v", c.norm, err)
		}
		if got := f(c.in); got != c.want {
			t.Errorf("%s on %q: got %q, want %q", c.norm, c.in, got, c.want)
		}
	}
}

// charVocab is a tokenizer.json model over single characters, for added
// token and decoder tests.
const charVocab = `"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, " ": 2, "x": 3, "<": 4, "m": 5, ">": 6, "▁": 7, "▁a": 8, "<0x41>": 9, "<unk>": 11}, "merges": ["▁ a"], "byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>"}`

// TestHFAddedTokenOptions checks lstrip, rstrip, single_word and
// normalized.
func TestHFAddedTokenOptions(t *testing.T) {
	for _, c := range []struct {
		added, normalizer, in string
		want                  []int32
	}{
		{`{"id": 10, "content": "<m>"}`, "", "a <m> b", []int32{0, 2, 10, 2, 1}},
		{`{"id": 10, "content": "<m>", "lstrip": true}`, "", "a <m> b", []int32{0, 10, 2, 1}},
		{`{"id": 10, "content": "<m>", "rstrip": true}`, "", "a <m>  b", []int32{0, 2, 10, 1}},
		{`{"id": 10, "content": "<m>", "lstrip": true, "rstrip": true}`, "", "a  <m> b", []int32{0, 10, 1}},
		{`{"id": 10, "content": "<m>", "single_word": true}`, "", "x<m> <m>", []int32{3, 4, 5, 6, 2, 10}},
		{`{"id": 10, "content": "<m>", "single_word": true}`, "", "<m>_", []int32{4, 5, 6, 11}},
		{`{"id": 10, "content": "<M>", "normalized": true}`, `{"type": "Lowercase"}`, "a<M>", []int32{0, 10}},
		{`{"id": 10, "content": "<M>", "normalized": false}`, `{"type": "Lowercase"}`, "a<M>", []int32{0, 10}},
		{`{"id": 10, "content": "<M>", "normalized": false}`, `{"type": "Lowercase"}`, "a<m>", []int32{0, 4, 5, 6}},
		{`{"id": 10, "content": "<m>", "normalized": true}`, `{"type": "Lowercase"}`, "a<M>", []int32{0, 10}},
	} {
		js := `{"added_tokens": [` + c.added + `], ` + charVocab
		if c.normalizer != "" {
			js += `, "normalizer": ` + c.normalizer
		}
		tk, err := FromHF([]byte(js+`}`), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.added, err)
		}
		if got := tk.Encode(c.in); !slices.Equal(got, c.want) {
			t.Errorf("%s %s: Encode(%q) = %v, want %v", c.added, c.normalizer, c.in, got, c.want)
		}
	}
}

// TestHFCharLevel checks BPE on the text itself: Metaspace's ▁, byte
// fallback, fused unknown characters, and the decoders that undo them.
func TestHFCharLevel(t *testing.T) {
	const meta = `{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"}`
	tk, err := FromHF([]byte(`{"added_tokens": [{"id": 11, "content": "<unk>", "special": true}], `+charVocab+`, "pre_tokenizer": `+meta+`, "decoder": {"type": "Sequence", "decoders": [`+meta+`, {"type": "ByteFallback"}, {"type": "Fuse"}]}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in     string
		want   []int32
		decode string
	}{
		{"a", []int32{8}, "a"},
		{"a b", []int32{8, 7, 1}, "a b"},
		{"aA", []int32{8, 9}, "aA"},           // A has no token: its byte's
		{"aéé", []int32{8, 11}, "a"},          // é has none: one fused unknown
		{"a éa", []int32{8, 7, 11, 0}, "a a"}, // the unknown decodes to nothing
	} {
		ids := tk.Encode(c.in)
		if !slices.Equal(ids, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.in, ids, c.want)
		}
		if got := tk.Decode(ids); got != c.decode {
			t.Errorf("Decode(%v) = %q, want %q", ids, got, c.decode)
		}
	}
	// Hugging Face's Metaspace decoder drops every ▁ of the first token,
	// and only of that one.
	if got := tk.Decode([]int32{7, 8}); got != " a" {
		t.Errorf("Decode(▁, ▁a) = %q, want \" a\"", got)
	}
}

// TestConcurrentGeneralEngine encodes from several goroutines at once
// with a tokenizer whose pre-tokenizers run on the general engine (run
// with -race): compiled expressions and pipelines are shared.
func TestConcurrentGeneralEngine(t *testing.T) {
	tk, err := FromHF([]byte(`{`+charVocab+`, "normalizer": {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
		"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?=b)"}, "behavior": "MergedWithNext"}, {"type": "Whitespace"}, {"type": "Metaspace"}]}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("a ab  xa\tb ", 50)
	want := tk.Encode(text)
	errs := make(chan string, 8)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if got := tk.Encode(text); !slices.Equal(got, want) {
					errs <- "differs"
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}
