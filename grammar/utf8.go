package grammar

import "unicode/utf8"

// byteRange is an inclusive range of bytes.
type byteRange struct{ lo, hi byte }

// utf8Seqs appends to dst the byte-range sequences whose concatenations
// are exactly the UTF-8 encodings of the code points lo..hi (surrogates
// excluded by the caller). Each sequence is one encoded length; the range
// is split until every position but the first varies over whole
// continuation ranges, so a sequence of ranges means their product.
func utf8Seqs(lo, hi rune, dst [][]byteRange) [][]byteRange {
	if lo > hi {
		return dst
	}
	// Split where the encoded length changes.
	for _, max := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= max && hi > max {
			dst = utf8Seqs(lo, max, dst)
			return utf8Seqs(max+1, hi, dst)
		}
	}
	if hi <= 0x7F {
		return append(dst, []byteRange{{byte(lo), byte(hi)}})
	}
	// Split until the low 6*i bits of lo are all 0 and of hi all 1
	// wherever lo and hi differ above them.
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				dst = utf8Seqs(lo, lo|m, dst)
				return utf8Seqs((lo|m)+1, hi, dst)
			}
			if hi&m != m {
				dst = utf8Seqs(lo, (hi&^m)-1, dst)
				return utf8Seqs(hi&^m, hi, dst)
			}
		}
	}
	var a, b [4]byte
	utf8.EncodeRune(a[:], lo)
	utf8.EncodeRune(b[:], hi)
	s := make([]byteRange, n)
	for i := range n {
		s[i] = byteRange{a[i], b[i]}
	}
	return append(dst, s)
}
