package speculate

import "slices"

// gramHashes sets h[n-1] to the hash of the n tokens of seq ending at
// end-1, for n from 1 to len(h) (as far as seq reaches back), and returns
// how many it set. Hashing backwards from the end gives every length in one
// pass.
func gramHashes(seq []int32, end int, h []uint64) int {
	x := uint64(0xcbf29ce484222325)
	n := 0
	for ; n < len(h) && n < end; n++ {
		x = (x ^ uint64(uint32(seq[end-1-n]))) * 0x100000001b3
		x ^= x >> 29
		h[n] = x
	}
	return n
}

// ngramIndex maps each n-gram (NgramMin <= n <= NgramMax) of a growing
// text to the position after its most recent occurrence that a token
// follows. Entries are keyed by a hash and checked against the text, so a
// collision costs a miss, never a wrong draft.
type ngramIndex struct {
	min, max int
	last     map[uint64]int32
	h        [maxNgramLimit]uint64
}

func newNgramIndex(minN, maxN int) *ngramIndex {
	return &ngramIndex{min: minN, max: maxN, last: make(map[uint64]int32)}
}

// grew indexes the n-grams that seq's last token now follows: those ending
// at len(seq)-2. Calling it after each appended token keeps the index whole.
func (x *ngramIndex) grew(seq []int32) {
	end := len(seq) - 1
	for n := range gramHashes(seq, end, x.h[:x.max]) {
		if n+1 >= x.min {
			x.last[x.h[n]] = int32(end)
		}
	}
}

// draft appends to dst the at most k tokens that followed the most recent
// earlier occurrence of the longest n-gram ending seq.
func (x *ngramIndex) draft(dst, seq []int32, k int) []int32 {
	got := gramHashes(seq, len(seq), x.h[:x.max])
	for n := got; n >= x.min; n-- {
		p, ok := x.last[x.h[n-1]]
		if ok && int(p) >= n && slices.Equal(seq[int(p)-n:p], seq[len(seq)-n:]) {
			return append(dst, seq[p:min(len(seq), int(p)+k)]...)
		}
	}
	return dst
}
