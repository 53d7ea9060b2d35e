package speculate

import "slices"

// predictor drafts from a request's predicted output (OpenAI's Predicted
// Outputs). While the output follows the prediction it proposes the
// prediction's next tokens; after a token that departs from it (an edited
// line) it waits until the output's last n tokens (NgramMin <= n <=
// NgramMax, longest first) occur in the prediction again and resumes after
// that occurrence: the first one at or after the point of departure, else
// the last one before it. A resumption on weak evidence (tentative)
// drafts at most tentativeK tokens until the output confirms it.
type predictor struct {
	pred       []int32
	pos        int  // the index in pred of the next expected token; the point of departure when !synced
	synced     bool // the output's last tokens are pred[:pos]'s
	tentative  bool // synced on weak evidence, and no token since has followed the prediction
	out        int  // output tokens accepted so far
	departed   int  // out before the token that departed from the prediction
	minN, maxN int
	indexed    int              // the n-grams followed by pred[:indexed] are in grams
	head       map[uint64]int32 // an n-gram's hash to its last entry in grams
	grams      []gram
	h          [maxNgramLimit]uint64
}

// gram is an occurrence of an n-gram of the prediction: the position after
// it and the entry of the previous occurrence of the same hash, or none.
type gram struct{ at, prev int32 }

func newPredictor(pred []int32, minN, maxN int) *predictor {
	return &predictor{pred: slices.Clone(pred), synced: true, minN: minN, maxN: maxN, indexed: 1, head: make(map[uint64]int32)}
}

// index adds the n-grams that at most budget more tokens of the prediction
// follow.
func (p *predictor) index(budget int) {
	for ; budget > 0 && p.indexed < len(p.pred); budget-- {
		end := p.indexed
		for n := range gramHashes(p.pred, end, p.h[:p.maxN]) {
			if n+1 >= p.minN {
				prev, ok := p.head[p.h[n]]
				if !ok {
					prev = none
				}
				p.head[p.h[n]] = int32(len(p.grams))
				p.grams = append(p.grams, gram{int32(end), prev})
			}
		}
		p.indexed++
	}
}

// Resuming after a departure on an n-gram shorter than strongN is weak
// evidence where the occurrence is more than n tokens from where an edit
// of the same length would resume: short runs of common tokens (a line's
// end and the next line's indent, or a model's repeated phrase) occur all
// over a file. Such a resumption drafts at most tentativeK tokens, a
// verify row of four (the CPU's four-row kernels, where a row of eight
// costs several single-token steps), until a token confirms it.
const (
	strongN    = 4
	tentativeK = 3
)

// accept follows the output's new tokens through the prediction.
func (p *predictor) accept(tokens []int32) {
	for i, t := range tokens {
		if !p.synced {
			break // the drafter resynchronizes from the output's tail
		}
		if p.pos < len(p.pred) && p.pred[p.pos] == t {
			p.pos++
			p.tentative = false
		} else {
			p.synced, p.departed = false, p.out+i
		}
	}
	p.out += len(tokens)
}

// draft appends to dst at most k tokens of the prediction that follow the
// sequence seq (prompt and output), resynchronizing first if needed with
// the part of the prediction indexed, after indexing at most budget more
// tokens of it.
func (p *predictor) draft(dst, seq []int32, k, budget int) []int32 {
	if !p.synced {
		p.index(budget)
		p.resync(seq)
	}
	if !p.synced {
		return dst
	}
	if p.tentative {
		k = min(k, tentativeK)
	}
	return append(dst, p.pred[p.pos:min(len(p.pred), p.pos+k)]...)
}

func (p *predictor) resync(seq []int32) {
	got := gramHashes(seq, len(seq), p.h[:p.maxN])
	for n := got; n >= p.minN; n-- {
		tail := seq[len(seq)-n:]
		e, ok := p.head[p.h[n-1]]
		if !ok {
			continue
		}
		// Occurrences come latest first: the last one at or after the point
		// of departure seen is the first after it; else the first one before.
		best := none
		for ; e != none; e = p.grams[e].prev {
			at := int(p.grams[e].at)
			if at < n || !slices.Equal(p.pred[at-n:at], tail) {
				continue // another n-gram of the same hash
			}
			if at >= p.pos || best == none {
				best = at
			}
			if at < p.pos {
				break
			}
		}
		// An occurrence before the point of departure is taken only once
		// the whole prediction is indexed: one after it may be yet to come.
		if best != none && (best >= p.pos || p.indexed == len(p.pred)) {
			// An edit that kept the length resumes at pos plus the output
			// tokens since the departure.
			same := p.pos + p.out - p.departed
			p.pos, p.synced = best, true
			p.tentative = n < strongN && (best < same-n || best > same+n)
			return
		}
	}
}
