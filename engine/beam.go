package engine

import (
	"math"
	"slices"

	"github.com/prefixd/prefixd/sample"
)

// beamGroup is a beam search: width beams advancing in lockstep, each a
// sequence whose block table was forked from its parent's, so the prompt
// and common history are shared and a block is copied only when a beam
// writes into it. The root sequence carries the request (stream, usage);
// it is beam 0 until it is dropped.
//
// Each step every live beam proposes its best 2*width next tokens; the
// group keeps the width best non-stop candidates by summed log-probability.
// A stop token among the top width candidates closes a hypothesis. The
// search ends when width hypotheses are closed or MaxTokens is reached, and
// returns the hypothesis with the best logprob / length^LengthPenalty
// (length counted in generated tokens, the stop token excluded).
type beamGroup struct {
	root     *seq
	width    int
	beams    []*seq
	admitSeq uint64

	cands    []candidate
	finished []hypothesis
	// nonFinite is set when a beam's logits this step held NaN or an
	// infinity: advance then fails the search.
	nonFinite error
}

type candidate struct {
	parent *seq
	rank   int // the parent's index in beams, for deterministic ties
	tok    int32
	score  float64
}

type hypothesis struct {
	tokens []int32
	score  float64 // normalised by length
	stop   bool    // ended with a stop token
}

// collect records beam s's candidates from its next-token logits.
func (g *beamGroup) collect(s *seq, logits []float32) {
	if err := sample.CheckFinite(logits); err != nil {
		if g.nonFinite == nil {
			g.nonFinite = err
		}
		return
	}
	rank := slices.Index(g.beams, s)
	lse := logSumExp(logits)
	top := topK(logits, 2*g.width)
	for _, tok := range top {
		g.cands = append(g.cands, candidate{
			parent: s, rank: rank, tok: tok,
			score: s.score + float64(logits[tok]) - lse,
		})
	}
}

// advance chooses the next beams once every live beam has reported.
func (g *beamGroup) advance(sc *scheduler) {
	e := sc.e
	if g.nonFinite != nil {
		sc.failNonFinite(g.root, len(g.root.generated()), g.nonFinite)
		return
	}
	slices.SortStableFunc(g.cands, func(a, b candidate) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		case a.rank != b.rank:
			return a.rank - b.rank
		}
		return int(a.tok - b.tok)
	})
	genLen := len(g.beams[0].generated()) // equal for every beam
	var next []candidate
	for i, c := range g.cands {
		if g.isStop(e, c.tok) {
			if i < g.width {
				g.close(c.parent.generated(), c.score, genLen, true)
			}
			continue
		}
		next = append(next, c)
		if len(next) == g.width {
			break
		}
	}
	g.cands = g.cands[:0]
	if genLen+1 >= g.root.req.MaxTokens {
		for _, c := range next {
			g.close(append(slices.Clone(c.parent.generated()), c.tok), c.score, genLen+1, false)
		}
		next = nil
	}
	if len(g.finished) >= g.width || len(next) == 0 {
		g.finish(sc, "", nil)
		return
	}
	g.regroup(sc, next)
}

// regroup makes next the live beams: a parent chosen once continues
// itself, a parent chosen again is forked (sharing every block), and a
// parent not chosen is released.
func (g *beamGroup) regroup(sc *scheduler, next []candidate) {
	beams := make([]*seq, len(next))
	used := make(map[*seq]bool, len(next))
	for i, c := range next { // forks first, while parents are unchanged
		if used[c.parent] {
			beams[i] = c.parent.fork()
			beams[i].admitSeq = g.admitSeq
			sc.running = append(sc.running, beams[i])
		}
		used[c.parent] = true
	}
	for i, c := range next {
		if beams[i] == nil {
			beams[i] = c.parent
		}
		beams[i].tokens = append(beams[i].tokens, c.tok)
		beams[i].score = c.score
	}
	for _, b := range g.beams {
		if !used[b] {
			sc.dropRunning(b)
			b.release(sc.e)
		}
	}
	g.beams = beams
	sc.totals.GeneratedTokens += uint64(len(beams))
}

// fork returns a new beam sharing every block and token of s.
func (s *seq) fork() *seq {
	return &seq{
		req: s.req, stream: s.stream, group: s.group,
		tokens:   slices.Clone(s.tokens),
		nPrompt:  s.nPrompt,
		table:    s.table.Fork(),
		computed: s.computed,
		inserted: s.inserted,
		score:    s.score,
	}
}

func (g *beamGroup) isStop(e *Engine, tok int32) bool {
	return (!g.root.req.IgnoreEOS && tok == e.cfg.EOS) || slices.Contains(g.root.req.StopTokens, tok)
}

// close records a finished hypothesis of genLen generated tokens.
func (g *beamGroup) close(tokens []int32, score float64, genLen int, stop bool) {
	norm := score / math.Pow(float64(max(genLen, 1)), float64(g.root.req.Beam.LengthPenalty))
	g.finished = append(g.finished, hypothesis{tokens: slices.Clone(tokens), score: norm, stop: stop})
}

// finish ends the search (or the request, when reason is set: a cancel or
// an error), releases every beam and delivers the best hypothesis.
func (g *beamGroup) finish(sc *scheduler, reason FinishReason, err error) {
	for _, b := range g.beams {
		sc.dropRunning(b)
		b.release(sc.e)
	}
	sc.dropRunning(g.root)
	g.root.release(sc.e)
	var out []int32
	if reason == "" {
		best := g.finished[0]
		for _, h := range g.finished[1:] {
			if h.score > best.score {
				best = h
			}
		}
		out, reason = best.tokens, FinishLength
		if best.stop {
			reason = FinishStop
		}
		if len(out) > 0 { // the caller's first token comes with the result
			g.root.stream.result.Timing.FirstToken = sc.e.cfg.Clock.Now().Sub(g.root.submitted)
		}
		tk := sc.e.cfg.Tokenizer
		for i, t := range out {
			stop := tk != nil && g.root.text.add(tk, t)
			sc.send(g.root, t, stop || i == len(out)-1)
			if stop {
				out, reason = out[:i+1], FinishStop
				break
			}
		}
	}
	sc.deliver(g.root, out, reason, err)
}

// reset drops every beam and returns the root, ready to be admitted again
// from its prompt (preemption: beam search is deterministic, so starting
// over gives the same result).
func (g *beamGroup) reset(sc *scheduler) *seq {
	for _, b := range g.beams {
		sc.dropRunning(b)
		b.release(sc.e)
	}
	sc.dropRunning(g.root)
	g.root.release(sc.e)
	g.root.tokens = g.root.tokens[:g.root.nPrompt]
	g.root.score = 0
	g.beams = append(g.beams[:0], g.root)
	g.cands = g.cands[:0]
	g.finished = g.finished[:0]
	return g.root
}

// logSumExp is log(sum(exp(x))), computed stably.
func logSumExp(x []float32) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	sum := 0.0
	for _, v := range x {
		sum += math.Exp(float64(v) - m)
	}
	return m + math.Log(sum)
}

// topK returns the indices of the k largest values, largest first, lower
// index first on ties.
func topK(x []float32, k int) []int32 {
	k = min(k, len(x))
	idx := make([]int32, 0, k+1)
	for i, v := range x {
		pos := len(idx)
		for pos > 0 && x[idx[pos-1]] < v {
			pos--
		}
		if pos < k {
			idx = slices.Insert(idx, pos, int32(i))
			if len(idx) > k {
				idx = idx[:k]
			}
		}
	}
	return idx
}
