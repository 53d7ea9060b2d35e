package engine

import (
	"slices"
	"time"
)

// Speculative decoding. A sequence that decodes asks its Drafter for up
// to Config.SpecTokens tokens d1..dk likely to follow, and its decode row
// becomes [next token, d1..dk] with logits at all k+1 positions
// (Row.Drafts): one forward pass, which on a memory-bound step costs
// little more than one token. The drafts' K/V go into the sequence's own
// tail blocks (Table.Append copies a shared block before anything writes
// it). Then the sequence's sampler draws position by position, exactly as
// it would without drafts (biases, penalties, temperature, top-k/p,
// grammar, each seeing the tokens before it): the draft d(i+1) is accepted
// when the draw after position i equals it, and the first draw that
// differs (or the draw after dk, the bonus token) ends the step. Rejected
// positions are rolled back by truncating the table, and only verified
// blocks are offered to the prefix cache (offerBlocks reads computed,
// which counts verified positions only).
//
// For a draft that is a single token (a point mass), sampling x from the
// target distribution p and accepting d exactly when x == d is the
// rejection sampler of speculative sampling: d is accepted with
// probability p(d), and a rejected step emits x distributed as p with d
// removed and renormalized. So the output distribution is p's at every
// temperature, and greedy output is the output without speculation, as
// long as the model's logits do not depend on how many positions a pass
// computes (see README: kernels whose rounding depends on the row count
// can flip an exact near tie, as batching itself can).
//
// Beam search does not speculate (a beam's candidates come from the
// whole distribution, not one sampled path).

// Speculator drafts tokens for sequences from text already seen; package
// speculate implements it. The engine calls it from its scheduler
// goroutine only.
type Speculator interface {
	// NewDrafter returns the drafter of one sequence of a request in namespace ns, with its prompt
	// and the request's predicted output (nil when it has none).
	NewDrafter(ns string, prompt, prediction []int32) Drafter
	// Finished records a finished sequence of namespace ns (prompt then output) for later drafts.
	Finished(ns string, tokens []int32)
}

// Drafter drafts the continuation of one sequence. It is an alias of an
// unnamed interface type, as package speculate declares its own, so the
// two are one type and speculate.Speculator implements Speculator
// without either package importing the other.
type Drafter = interface {
	// Draft appends to dst up to k tokens proposed to follow the sequence so far and returns it;
	// predicted reports that they came from the request's predicted output.
	Draft(dst []int32, k int) (drafts []int32, predicted bool)
	// Accept tells the drafter the tokens appended to the sequence since the last call
	// (verified drafts, then the token sampled after them).
	Accept(tokens []int32)
}

// MaxSpecTokens bounds Config.SpecTokens.
const MaxSpecTokens = 16

// Speculation defaults (see Config), from the measurements in README's
// Speculative decoding. K = 7 makes a verify row 8 tokens, one pass of the
// CPU's eight-row quantized kernels or its GEMM (a 5-token row would add a
// pass of the one-row kernels): on the 110M F16 model the agent loop gained
// 2.5-2.7x per CPU second with K = 7, 1.55x with K = 3. Steps of more than
// 4 decoding sequences draft nothing: at 8 the gain fell to 1.16x with
// every draft accepted (F16), and below 1 from 2 rows at acceptance
// 0.7-0.85 (Q8_0, K = 3); the per-sequence back-off covers the rest.
const (
	defaultSpecTokens  = 7
	defaultSpecMaxRows = 4
)

// Per-sequence back-off: acceptance is an exponentially weighted average
// of accepted/drafted over the steps that drafted; below specMinRate the
// sequence stops drafting for a pause that doubles, from specPause to
// specMaxPause steps, each time a probe after it fails.
const (
	specWeight   = 0.3 // of the newest step in the average
	specMinRate  = 0.3
	specPause    = 8
	specMaxPause = 256
)

// specState is a sequence's speculation.
type specState struct {
	drafter   Drafter
	fed       int     // leading tokens of seq.tokens the drafter has seen
	drafts    []int32 // this step's drafts
	predicted bool    // they came from the request's prediction
	rate      float64 // acceptance average; 1 until a step measures it
	wait      int     // steps left without drafting
	pause     int     // the next back-off's length
}

// speculates reports whether the step's decode rows (decodes of them)
// draft at all: the engine has a Speculator, and the step is small enough
// to be bound by reading the weights, not by compute.
func (sc *scheduler) speculates(decodes int) bool {
	c := &sc.e.cfg
	return c.Speculator != nil && c.SpecTokens > 0 && decodes <= c.SpecMaxRows
}

// draft sets s.spec.drafts to the tokens s's decode row verifies this
// step, at most budget, and returns how many. REQUIRES: s decodes
// (pending() == 1).
func (sc *scheduler) draft(s *seq, budget int) int {
	c := &sc.e.cfg
	sp := &s.spec
	sp.drafts = sp.drafts[:0]
	out := len(s.tokens) - s.nPrompt
	if s.group != nil || out == 0 {
		return 0
	}
	if sp.wait > 0 {
		sp.wait--
		return 0
	}
	// The step emits at most k+1 tokens and writes positions up to
	// len(tokens)-1+k: keep both within the request (so within the blocks
	// Validate counted and the tokens' capacity, where the row's drafts
	// are written).
	k := min(c.SpecTokens, budget, s.req.MaxTokens-out-1, cap(s.tokens)-len(s.tokens), c.MaxModelLen-len(s.tokens))
	if k <= 0 {
		return 0
	}
	if sp.drafter == nil {
		sp.drafter = c.Speculator.NewDrafter(s.req.Namespace, s.tokens[:s.nPrompt], s.req.Prediction)
		sp.fed, sp.rate, sp.pause = s.nPrompt, 1, specPause
	}
	if sp.fed < len(s.tokens) {
		sp.drafter.Accept(s.tokens[sp.fed:])
		sp.fed = len(s.tokens)
	}
	sp.drafts, sp.predicted = sp.drafter.Draft(sp.drafts, k)
	vocab := int32(c.Model.VocabSize())
	n := 0
	for n < min(len(sp.drafts), k) && sp.drafts[n] >= 0 && sp.drafts[n] < vocab {
		n++ // a drafter's token outside the vocabulary ends its drafts
	}
	sp.drafts = sp.drafts[:n]
	// The row's tokens are [next, d1..dk]: the drafts go into the spare
	// capacity of s.tokens, where emit overwrites them with what it
	// appends (verify compares with sp.drafts).
	copy(s.tokens[len(s.tokens):len(s.tokens)+n], sp.drafts)
	return n
}

// verify samples the k+1 positions of s's verify row (logits rows li,
// li+1, ...; s.computed already counts the row's first token) and keeps
// the drafts the draws agree with; see the comment at the top of this
// file.
func (sc *scheduler) verify(s *seq, k int, logits []float32, ids []int32, li int, now time.Time) {
	vocab := sc.e.cfg.Model.VocabSize()
	sp := &s.spec
	accepted := 0
	for i := 0; ; i++ {
		sc.sampleNext(s, sc.greedyID(li+i, ids), logits[(li+i)*vocab:(li+i+1)*vocab], now)
		if s.finished || i == k || s.tokens[len(s.tokens)-1] != sp.drafts[i] {
			break
		}
		accepted++
		s.computed++ // d(i+1)'s K/V, written by the pass, is verified
	}
	t := &sc.totals
	t.SpecDrafts++
	t.SpecDraftTokens += uint64(k)
	t.SpecAcceptedTokens += uint64(accepted)
	for i := range accepted {
		t.SpecAcceptedPerPos[i]++
	}
	if sp.predicted {
		s.usage.AcceptedPredictionTokens += accepted
	}
	sp.rate += specWeight * (float64(accepted)/float64(k) - sp.rate)
	if sp.rate < specMinRate {
		sp.wait, sp.rate = sp.pause, specMinRate // a probe after the pause lifts it back or pauses again
		sp.pause = min(2*sp.pause, specMaxPause)
	} else if accepted > 0 {
		sp.pause = specPause
	}
	if s.finished {
		return
	}
	s.table.Truncate(s.computed) // roll back the rejected drafts
	sc.offerBlocks(s)
}

// specFinished hands a sequence that ended normally to the Speculator,
// for drafts of later requests in its namespace, and settles its
// prediction's usage.
func (sc *scheduler) specFinished(s *seq, out []int32, reason FinishReason) {
	if p := len(s.req.Prediction); p > 0 {
		s.usage.RejectedPredictionTokens = max(0, p-s.usage.AcceptedPredictionTokens)
	}
	spec := sc.e.cfg.Speculator
	if spec == nil || s.group != nil || reason != FinishStop && reason != FinishLength {
		return
	}
	spec.Finished(s.req.Namespace, slices.Concat(s.tokens[:s.nPrompt], out))
}
