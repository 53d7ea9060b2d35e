package speculate

import (
	"cmp"
	"slices"
)

// predictor drafts from a request's predicted output (OpenAI's Predicted
// Outputs). While the output follows the prediction it proposes the
// prediction's next tokens; after a token that departs from it (an edited
// line) it waits until the output's last n tokens (NgramMin <= n <=
// NgramMax, longest first) occur in the prediction again and resumes after
// that occurrence: the first one at or after the point of departure, else
// the last one before it.
type predictor struct {
	pred       []int32
	pos        int  // the index in pred of the next expected token; the point of departure when !synced
	synced     bool // the output's last tokens are pred[:pos]'s
	minN, maxN int
	grams      []gram // every n-gram of pred that a token follows, by hash then position
	h          [maxNgramLimit]uint64
}

// gram is an n-gram of the prediction: its hash and the position after it.
type gram struct {
	key uint64
	at  int32
}

func newPredictor(pred []int32, minN, maxN int) *predictor {
	p := &predictor{pred: slices.Clone(pred), synced: true, minN: minN, maxN: maxN}
	for end := 1; end < len(pred); end++ {
		for n := range gramHashes(pred, end, p.h[:maxN]) {
			if n+1 >= minN {
				p.grams = append(p.grams, gram{p.h[n], int32(end)})
			}
		}
	}
	slices.SortFunc(p.grams, func(a, b gram) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.at, b.at)
	})
	return p
}

// accept follows the output's new tokens through the prediction.
func (p *predictor) accept(tokens []int32) {
	for _, t := range tokens {
		if !p.synced {
			return // the drafter resynchronizes from the output's tail
		}
		if p.pos < len(p.pred) && p.pred[p.pos] == t {
			p.pos++
		} else {
			p.synced = false
		}
	}
}

// draft appends to dst at most k tokens of the prediction that follow the
// sequence seq (prompt and output), resynchronizing first if needed.
func (p *predictor) draft(dst, seq []int32, k int) []int32 {
	if !p.synced {
		p.resync(seq)
	}
	if !p.synced {
		return dst
	}
	return append(dst, p.pred[p.pos:min(len(p.pred), p.pos+k)]...)
}

func (p *predictor) resync(seq []int32) {
	got := gramHashes(seq, len(seq), p.h[:p.maxN])
	for n := got; n >= p.minN; n-- {
		tail := seq[len(seq)-n:]
		key := p.h[n-1]
		lo, _ := slices.BinarySearchFunc(p.grams, key, func(g gram, k uint64) int { return cmp.Compare(g.key, k) })
		hi := lo
		for hi < len(p.grams) && p.grams[hi].key == key {
			hi++
		}
		same := p.grams[lo:hi]
		i, _ := slices.BinarySearchFunc(same, int32(p.pos), func(g gram, at int32) int { return cmp.Compare(g.at, at) })
		for _, j := range order(i, len(same)) {
			at := int(same[j].at)
			if at >= n && slices.Equal(p.pred[at-n:at], tail) {
				p.pos, p.synced = at, true
				return
			}
		}
	}
}

// order lists the indexes i, i+1, ..., n-1, then i-1, ..., 0.
func order(i, n int) func(func(int, int) bool) {
	return func(yield func(int, int) bool) {
		k := 0
		for j := i; j < n; j++ {
			if !yield(k, j) {
				return
			}
			k++
		}
		for j := i - 1; j >= 0; j-- {
			if !yield(k, j) {
				return
			}
			k++
		}
	}
}
