package bpe

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// hfPattern is a Replace pattern: a literal or a regular expression.
type hfPattern struct{ Regex, String *string }

// replacer returns the function that replaces each match of the pattern
// with content (literally: content holds no group references).
func (p hfPattern) replacer(what, content string) (func(string) string, error) {
	switch {
	case p.String != nil:
		old := *p.String
		if old == "" {
			return func(s string) string { return s }, nil
		}
		return func(s string) string { return strings.ReplaceAll(s, old, content) }, nil
	case p.Regex != nil:
		sp, err := Compile(*p.Regex, Oniguruma)
		if err != nil {
			return nil, fmt.Errorf("%w (tokenizer.json %s Replace)", err, what)
		}
		re := sp.(*regexSplitter)
		return func(s string) string {
			var b strings.Builder
			gap := 0
			re.find(s, func(start, end int) {
				b.WriteString(s[gap:start])
				b.WriteString(content)
				gap = end
			})
			if gap == 0 {
				return s
			}
			b.WriteString(s[gap:])
			return b.String()
		}, nil
	}
	return nil, fmt.Errorf("bpe: tokenizer.json %s Replace has neither a Regex nor a String pattern", what)
}

// hfNormalizer maps a normalizer: NFC, NFD, NFKC, NFKD, Lowercase,
// Replace, Prepend, Strip, or a Sequence of them; nil for none.
//
// Lowercase is Go's strings.ToLower, which maps each rune alone: Rust's
// to_lowercase, which Hugging Face uses, also spells İ as i + U+0307 and a
// word-final Σ as ς.
func hfNormalizer(raw json.RawMessage) (func(string) string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var n struct {
		Type        string
		Normalizers []json.RawMessage
		Pattern     hfPattern
		Content     string
		Prepend     string
		StripLeft   bool `json:"strip_left"`
		StripRight  bool `json:"strip_right"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("bpe: tokenizer.json normalizer: %w", err)
	}
	switch n.Type {
	case "NFC":
		return norm.NFC.String, nil
	case "NFD":
		return norm.NFD.String, nil
	case "NFKC":
		return norm.NFKC.String, nil
	case "NFKD":
		return norm.NFKD.String, nil
	case "Lowercase":
		return strings.ToLower, nil
	case "Replace":
		return n.Pattern.replacer("normalizer", n.Content)
	case "Prepend":
		p := n.Prepend
		return func(s string) string {
			if s == "" {
				return s
			}
			return p + s
		}, nil
	case "Strip":
		left, right := n.StripLeft, n.StripRight
		return func(s string) string {
			if left {
				s = strings.TrimLeftFunc(s, unicode.IsSpace)
			}
			if right {
				s = strings.TrimRightFunc(s, unicode.IsSpace)
			}
			return s
		}, nil
	case "Sequence":
		var fs []func(string) string
		for _, r := range n.Normalizers {
			f, err := hfNormalizer(r)
			if err != nil {
				return nil, err
			}
			if f != nil {
				fs = append(fs, f)
			}
		}
		return chain(fs), nil
	}
	return nil, fmt.Errorf("bpe: tokenizer.json normalizer %q is not supported (NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Strip, Sequence)", n.Type)
}

// chain composes functions in order; nil for none.
func chain(fs []func(string) string) func(string) string {
	switch len(fs) {
	case 0:
		return nil
	case 1:
		return fs[0]
	}
	return func(s string) string {
		for _, f := range fs {
			s = f(s)
		}
		return s
	}
}

// hfDecoder is what a tokenizer.json decoder does, split into what each
// token's text becomes on its own and what is stripped at the start of
// a decoded text, so that token pieces can be streamed.
type hfDecoder struct {
	token        []func(string) string // applied in turn to a Normal token's text
	first        []func(string) string // the same for the first token of a text
	firstDiffers bool                  // first is not token
	byteLevel    bool                  // a ByteLevel decoder comes first
	fused        bool                  // a Fuse has joined the tokens into one text
	strip        string                // Config.StripLeading
}

// add appends a step that treats every token alike.
func (d *hfDecoder) add(f func(string) string) {
	d.token, d.first = append(d.token, f), append(d.first, f)
}

// parse reads a decoder: ByteLevel, Metaspace, ByteFallback, Fuse, Strip,
// Replace, or a Sequence of them. ByteFallback needs nothing here: Byte
// tokens always decode to their byte.
func (d *hfDecoder) parse(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var n struct {
		Type           string
		Decoders       []json.RawMessage
		Pattern        hfPattern
		Content        *string
		Start, Stop    int
		Replacement    *string
		PrependScheme  *string `json:"prepend_scheme"`
		AddPrefixSpace *bool   `json:"add_prefix_space"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return fmt.Errorf("bpe: tokenizer.json decoder: %w", err)
	}
	switch n.Type {
	case "Sequence":
		for _, r := range n.Decoders {
			if err := d.parse(r); err != nil {
				return err
			}
		}
	case "ByteLevel":
		if len(d.token) > 0 {
			return errors.New("bpe: tokenizer.json ByteLevel decoder after another decoder is not supported")
		}
		d.byteLevel = true
		d.add(func(s string) string { return string(decodeByteLevel(s)) })
	case "ByteFallback":
	case "Fuse":
		d.fused = true
	case "Replace":
		if n.Content == nil {
			return errors.New("bpe: tokenizer.json Replace decoder has no content")
		}
		f, err := n.Pattern.replacer("decoder", *n.Content)
		if err != nil {
			return err
		}
		d.add(f)
	case "Metaspace":
		repl := "▁"
		if n.Replacement != nil {
			repl = *n.Replacement
		}
		space := func(s string) string { return strings.ReplaceAll(s, repl, " ") }
		d.token = append(d.token, space)
		// The first token loses every replacement, not only the one that
		// stands for the prepended space (Hugging Face's decode_chain),
		// unless prepend_scheme is never.
		if (n.PrependScheme == nil || *n.PrependScheme != "never") && (n.AddPrefixSpace == nil || *n.AddPrefixSpace) {
			d.first = append(d.first, func(s string) string { return strings.ReplaceAll(s, repl, "") })
			d.firstDiffers = true
		} else {
			d.first = append(d.first, space)
		}
	case "Strip":
		c := " "
		if n.Content != nil {
			c = *n.Content
		}
		if len([]rune(c)) != 1 {
			return fmt.Errorf("bpe: tokenizer.json Strip decoder content %q is not one character", c)
		}
		if !d.fused {
			start, stop := n.Start, n.Stop
			d.add(func(s string) string {
				for i := 0; i < start && strings.HasPrefix(s, c); i++ {
					s = s[len(c):]
				}
				for i := 0; i < stop && strings.HasSuffix(s, c); i++ {
					s = s[:len(s)-len(c)]
				}
				return s
			})
			break
		}
		if n.Stop > 0 {
			return fmt.Errorf("bpe: tokenizer.json Strip decoder stop %d after Fuse is not supported (it needs the end of the text)", n.Stop)
		}
		d.strip += strings.Repeat(c, n.Start)
	default:
		return fmt.Errorf("bpe: tokenizer.json decoder %q is not supported (ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence)", n.Type)
	}
	return nil
}
