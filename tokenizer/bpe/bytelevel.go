package bpe

import "unicode/utf8"

// byteRune is GPT-2's bytes_to_unicode: byte-level vocabularies store every
// byte as a printable rune, the printable Latin-1 bytes as themselves and
// the others (controls, space, ...) as U+0100 onwards in byte order, so
// that no token text holds whitespace or a control character.
var byteRune [256]rune

// runeByte inverts byteRune for runes below 0x144, -1 elsewhere.
var runeByte [0x144]int16

func init() {
	for i := range runeByte {
		runeByte[i] = -1
	}
	next := rune(0x100)
	for b := range 256 {
		printable := b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE
		if printable {
			byteRune[b] = rune(b)
		} else {
			byteRune[b] = next
			next++
		}
		runeByte[byteRune[b]] = int16(b)
	}
}

// appendByteLevel appends s with each byte as its byte-level rune.
func appendByteLevel(dst []byte, s string) []byte {
	for i := range len(s) {
		dst = utf8.AppendRune(dst, byteRune[s[i]])
	}
	return dst
}

// decodeByteLevel turns a byte-level token text back into its bytes. A rune
// outside the byte-level alphabet (vocabularies may hold a few) stays as
// its UTF-8.
func decodeByteLevel(text string) []byte {
	out := make([]byte, 0, len(text))
	for _, r := range text {
		if r < rune(len(runeByte)) && runeByte[r] >= 0 {
			out = append(out, byte(runeByte[r]))
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	return out
}
