package bpe

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// piece is a pre-token of a tokenizer.json pre-tokenizer: its text (which
// Metaspace and ByteLevel's add_prefix_space rewrite) and whether it
// starts the input (Metaspace's prepend_scheme "first").
type piece struct {
	text    string
	atStart bool
}

// hfStep is one tokenizer.json pre-tokenizer: it appends the pieces p
// becomes to dst.
type hfStep interface {
	apply(dst []piece, p piece) []piece
}

// hfPipeline is a tokenizer.json pre_tokenizer, its steps applied in turn
// to every piece the previous ones produced. Unlike the regular-expression
// Splitters its pieces need not concatenate to the text: Split's Removed
// behavior, Whitespace and WhitespaceSplit drop text, Metaspace rewrites
// it.
type hfPipeline []hfStep

// Split implements Splitter for a text that starts the input.
func (h hfPipeline) Split(dst []string, s string) []string { return h.splitAt(dst, s, true) }

// splitAt splits s, which starts the input if atStart (the tokenizer cuts
// its input at added tokens and pre-tokenizes each run).
func (h hfPipeline) splitAt(dst []string, s string, atStart bool) []string {
	if s == "" {
		return dst
	}
	cur := []piece{{s, atStart}}
	var next []piece
	for _, st := range h {
		next = next[:0]
		for _, p := range cur {
			next = st.apply(next, p)
		}
		cur, next = next, cur
	}
	for _, p := range cur {
		dst = append(dst, p.text)
	}
	return dst
}

// span is a part of a piece's text and whether a pattern matched it.
type span struct {
	start, end int
	match      bool
}

// behavior is Split's SplitDelimiterBehavior: what becomes of the
// matches.
type behavior int

// Behaviors, as tokenizer.json names them.
const (
	removed behavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

var behaviors = map[string]behavior{"Removed": removed, "Isolated": isolated,
	"MergedWithPrevious": mergedWithPrevious, "MergedWithNext": mergedWithNext, "Contiguous": contiguous}

// splitStep cuts a piece where find matches, Hugging Face's
// NormalizedString::split: the matched and unmatched spans (inverted if
// invert) are kept, dropped or joined as the behavior says, and empty
// pieces are dropped.
type splitStep struct {
	find     func(s string, dst []span) []span // the spans of s, in order, covering it
	behavior behavior
	invert   bool
}

func (st splitStep) apply(dst []piece, p piece) []piece {
	spans := st.find(p.text, nil)
	if st.invert {
		for i := range spans {
			spans[i].match = !spans[i].match
		}
	}
	spans = joinSpans(spans, st.behavior)
	for _, sp := range spans {
		if sp.start < sp.end && !(st.behavior == removed && sp.match) {
			dst = append(dst, piece{p.text[sp.start:sp.end], p.atStart && sp.start == 0})
		}
	}
	return dst
}

// joinSpans merges spans as the behavior says.
func joinSpans(spans []span, b behavior) []span {
	out := spans[:0]
	prevMatch := false
	switch b {
	case removed, isolated:
		return spans
	case mergedWithPrevious:
		for _, sp := range spans {
			if sp.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, sp)
			}
			prevMatch = sp.match
		}
	case mergedWithNext:
		// Walk backwards, so a match joins the span after it; out grows
		// from the start, so it cannot share spans' array.
		out = make([]span, 0, len(spans))
		for i := len(spans) - 1; i >= 0; i-- {
			sp := spans[i]
			if sp.match && !prevMatch && i < len(spans)-1 && len(out) > 0 {
				out[len(out)-1].start = sp.start
			} else {
				out = append(out, sp)
			}
			prevMatch = sp.match
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	case contiguous:
		for _, sp := range spans {
			if sp.match == prevMatch && len(out) > 0 {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, sp)
			}
			prevMatch = sp.match
		}
	}
	return out
}

// matchesToSpans turns match bounds into spans covering s: each match,
// and the text between matches as unmatched spans (Hugging Face's
// find_matches; an empty s is one empty unmatched span).
func matchesToSpans(s string, dst []span, each func(match func(start, end int))) []span {
	gap := 0
	each(func(start, end int) {
		if gap < start {
			dst = append(dst, span{gap, start, false})
		}
		dst = append(dst, span{start, end, true})
		gap = end
	})
	if gap < len(s) || len(s) == 0 {
		dst = append(dst, span{gap, len(s), false})
	}
	return dst
}

// regexSpans finds the matches of a compiled expression.
func regexSpans(re *regexSplitter) func(string, []span) []span {
	return func(s string, dst []span) []span {
		return matchesToSpans(s, dst, func(match func(int, int)) { re.find(s, match) })
	}
}

// stringSpans finds the non-overlapping occurrences of a literal; an empty
// literal matches nothing.
func stringSpans(lit string) func(string, []span) []span {
	return func(s string, dst []span) []span {
		return matchesToSpans(s, dst, func(match func(int, int)) {
			for i := 0; lit != "" && i <= len(s); {
				k := strings.Index(s[i:], lit)
				if k < 0 {
					return
				}
				match(i+k, i+k+len(lit))
				i += k + len(lit)
			}
		})
	}
}

// runeSpans makes each rune for which in is true a match of its own.
func runeSpans(in func(rune) bool) func(string, []span) []span {
	return func(s string, dst []span) []span {
		return matchesToSpans(s, dst, func(match func(int, int)) {
			for i := 0; i < len(s); {
				r, n := utf8.DecodeRuneInString(s[i:])
				if in(r) {
					match(i, i+n)
				}
				i += n
			}
		})
	}
}

// splitterStep runs an expression's Splitter (a fast path where there is
// one): Split with behavior Isolated and no inversion.
type splitterStep struct{ sp Splitter }

func (st splitterStep) apply(dst []piece, p piece) []piece {
	off := 0
	for _, s := range st.sp.Split(nil, p.text) {
		dst = append(dst, piece{s, p.atStart && off == 0})
		off += len(s)
	}
	return dst
}

// byteLevelStep is the ByteLevel pre-tokenizer: a space before each piece
// that lacks one (add_prefix_space), then GPT-2's expression (use_regex).
// The model maps the bytes to GPT-2's alphabet.
type byteLevelStep struct {
	addPrefixSpace, useRegex bool
}

func (st byteLevelStep) apply(dst []piece, p piece) []piece {
	if st.addPrefixSpace && !strings.HasPrefix(p.text, " ") {
		p.text = " " + p.text
	}
	if !st.useRegex {
		return append(dst, p)
	}
	return splitterStep{gpt2{}}.apply(dst, p)
}

// metaspaceStep is the Metaspace pre-tokenizer: spaces become the
// replacement (▁), which is prepended as prepend_scheme says, and with
// split each replacement starts a piece.
type metaspaceStep struct {
	repl   string
	scheme string // "always", "first" or "never"
	split  bool
}

func (st metaspaceStep) apply(dst []piece, p piece) []piece {
	p.text = strings.ReplaceAll(p.text, " ", st.repl)
	if !strings.HasPrefix(p.text, st.repl) && (st.scheme == "always" || st.scheme == "first" && p.atStart) {
		p.text = st.repl + p.text
	}
	if !st.split {
		return append(dst, p)
	}
	return splitStep{find: stringSpans(st.repl), behavior: mergedWithNext}.apply(dst, p)
}

// isHFPunct is Hugging Face's is_punc: ASCII punctuation (symbols such as
// $ + < = > ^ ` | ~ included) or a Unicode punctuation rune.
func isHFPunct(r rune) bool {
	return r < utf8.RuneSelf && unicode.IsPrint(r) && !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != ' ' || unicode.IsPunct(r)
}

// hfWhitespace is the Whitespace pre-tokenizer's expression; its pieces
// are the matches. Hugging Face runs it on Rust's regex crate, not on
// Oniguruma as Split patterns, so its \w has Rust's meaning.
const hfWhitespace = `\w+|[^\w\s]+`

// parseHFPre reads a tokenizer.json pre_tokenizer into steps.
func parseHFPre(raw json.RawMessage, steps *hfPipeline, byteLevel *bool) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var n struct {
		Type             string
		Pretokenizers    []json.RawMessage
		Pattern          struct{ Regex, String *string }
		Behavior         *string
		Invert           bool
		AddPrefixSpace   *bool   `json:"add_prefix_space"`
		UseRegex         *bool   `json:"use_regex"`
		IndividualDigits bool    `json:"individual_digits"`
		Replacement      *string `json:"replacement"`
		PrependScheme    *string `json:"prepend_scheme"`
		Split            *bool   `json:"split"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return fmt.Errorf("bpe: tokenizer.json pre_tokenizer: %w", err)
	}
	beh := func(def behavior) (behavior, error) {
		if n.Behavior == nil {
			return def, nil
		}
		b, ok := behaviors[*n.Behavior]
		if !ok {
			return 0, fmt.Errorf("bpe: tokenizer.json %s behavior %q is not one Hugging Face defines", n.Type, *n.Behavior)
		}
		return b, nil
	}
	switch n.Type {
	case "Sequence":
		for _, r := range n.Pretokenizers {
			if err := parseHFPre(r, steps, byteLevel); err != nil {
				return err
			}
		}
	case "Split":
		b, err := beh(isolated)
		if err != nil {
			return err
		}
		switch {
		case n.Pattern.String != nil:
			*steps = append(*steps, splitStep{find: stringSpans(*n.Pattern.String), behavior: b, invert: n.Invert})
		case n.Pattern.Regex == nil:
			return fmt.Errorf("bpe: tokenizer.json Split has neither a Regex nor a String pattern")
		case b == isolated && !n.Invert:
			sp, err := patternIn(*n.Pattern.Regex, Oniguruma)
			if err != nil {
				return fmt.Errorf("%w (tokenizer.json Split)", err)
			}
			*steps = append(*steps, splitterStep{sp})
		default:
			sp, err := Compile(*n.Pattern.Regex, Oniguruma)
			if err != nil {
				return fmt.Errorf("%w (tokenizer.json Split)", err)
			}
			*steps = append(*steps, splitStep{find: regexSpans(sp.(*regexSplitter)), behavior: b, invert: n.Invert})
		}
	case "ByteLevel":
		*byteLevel = true
		*steps = append(*steps, byteLevelStep{
			addPrefixSpace: n.AddPrefixSpace != nil && *n.AddPrefixSpace, // a field Hugging Face requires
			useRegex:       n.UseRegex == nil || *n.UseRegex,
		})
	case "Digits":
		b := contiguous
		if n.IndividualDigits {
			b = isolated
		}
		*steps = append(*steps, splitStep{find: runeSpans(unicode.IsNumber), behavior: b})
	case "Punctuation":
		b, err := beh(isolated)
		if err != nil {
			return err
		}
		*steps = append(*steps, splitStep{find: runeSpans(isHFPunct), behavior: b})
	case "Whitespace":
		sp, err := Compile(hfWhitespace, Rust)
		if err != nil {
			return err
		}
		*steps = append(*steps, splitStep{find: regexSpans(sp.(*regexSplitter)), behavior: removed, invert: true})
	case "WhitespaceSplit":
		*steps = append(*steps, splitStep{find: runeSpans(unicode.IsSpace), behavior: removed})
	case "Metaspace":
		st := metaspaceStep{repl: "▁", scheme: "always", split: n.Split == nil || *n.Split}
		if n.Replacement != nil {
			if utf8.RuneCountInString(*n.Replacement) != 1 {
				return fmt.Errorf("bpe: tokenizer.json Metaspace replacement %q is not one character", *n.Replacement)
			}
			st.repl = *n.Replacement
		}
		switch {
		case n.PrependScheme != nil:
			st.scheme = *n.PrependScheme
			if st.scheme != "always" && st.scheme != "first" && st.scheme != "never" {
				return fmt.Errorf("bpe: tokenizer.json Metaspace prepend_scheme %q is not always, first or never", st.scheme)
			}
		case n.AddPrefixSpace != nil && !*n.AddPrefixSpace: // the older spelling
			st.scheme = "never"
		}
		*steps = append(*steps, st)
	default:
		return fmt.Errorf("bpe: tokenizer.json pre_tokenizer %q is not supported (ByteLevel, Split, Digits, Punctuation, Metaspace, Whitespace, WhitespaceSplit, Sequence)", n.Type)
	}
	return nil
}
