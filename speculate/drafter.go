package speculate

// drafter is the Drafter of one sequence.
type drafter struct {
	s       *Speculator
	ns      string
	k       int
	seq     []int32 // prompt, then every accepted token
	indexed int     // the tokens of seq that ngram or local holds
	pred    *predictor
	ngram   *ngramIndex

	local   *trie  // Suffix: the sequence's own trie, its one text seq
	matched []at   // Suffix: a buffer for matches
	space   *space // Suffix: the namespace's finished sequences, once it has any
}

// Draft implements Drafter: the prediction's drafts if it has any, else the
// mode's.
func (d *drafter) Draft(dst []int32, k int) ([]int32, bool) {
	k = min(k, d.k)
	if k <= 0 {
		return dst, false
	}
	if d.pred != nil {
		if out := d.pred.draft(dst, d.seq, k, d.s.chunk); len(out) > len(dst) {
			return out, true
		}
	}
	switch {
	case d.ngram != nil:
		d.index()
		return d.ngram.draft(dst, d.seq, k), false
	case d.local != nil:
		d.index()
		return d.suffixDraft(dst, k), false
	}
	return dst, false
}

// index adds at most s.chunk tokens of seq that the mode's index lacks.
func (d *drafter) index() {
	for end := d.indexed + 1; end <= min(len(d.seq), d.indexed+d.s.chunk); end++ {
		if d.ngram != nil {
			d.ngram.grew(d.seq[:end])
		} else {
			d.local.grew(d.seq[:end])
		}
	}
	d.indexed = min(len(d.seq), d.indexed+d.s.chunk)
}

// Accept implements Drafter.
func (d *drafter) Accept(tokens []int32) {
	if d.pred == nil && d.ngram == nil && d.local == nil {
		return // Off with no prediction
	}
	if d.pred != nil {
		d.pred.accept(tokens)
	}
	d.seq = append(d.seq, tokens...) // Draft indexes them
}

// suffixDraft drafts from the better of the sequence's own trie and its
// namespace's, the own on ties.
func (d *drafter) suffixDraft(dst []int32, k int) []int32 {
	cfg := &d.s.cfg
	tail := d.seq[max(0, len(d.seq)-cfg.MaxDepth):]
	if d.indexed == len(d.seq) {
		d.matched = d.local.ends(d.matched)
	} else {
		d.matched = d.local.match(tail, d.matched)
	}
	own := d.local.choose(d.matched, k, cfg.MaxSpecFactor, cfg.MinTokenProb)
	if d.space == nil {
		d.space = d.s.space(d.ns, false)
	}
	// A Finished writing the namespace at this moment (from another
	// goroutine) is not waited for: this draft comes from the sequence alone.
	if sp := d.space; sp != nil && sp.mu.TryRLock() {
		defer sp.mu.RUnlock()
		d.matched = sp.trie.match(tail, d.matched)
		if c := sp.trie.choose(d.matched, k, cfg.MaxSpecFactor, cfg.MinTokenProb); c.score > own.score {
			return sp.trie.follow(dst, c.a, c.n)
		}
	}
	return d.local.follow(dst, own.a, own.n)
}
