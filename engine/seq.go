package engine

import (
	"slices"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/grammar"
	"github.com/prefixd/prefixd/radix"
	"github.com/prefixd/prefixd/sample"
)

// seq is one sequence the scheduler owns: a request, or one beam of a beam
// search group. Only the scheduler goroutine touches it once submitted.
type seq struct {
	req    *Request
	stream *Stream
	group  *beamGroup // nil unless a beam

	tokens   []int32 // prompt, then generated tokens
	nPrompt  int
	table    *blockstore.Table // nil while waiting
	computed int               // leading positions whose K/V are in table
	inserted int               // leading whole blocks offered to the prefix cache
	pin      radix.Handle      // the cached prefix adopted at admission
	sampler  *sample.Sampler
	matcher  *grammar.Matcher // follows req.Constraint; nil without one
	score    float64          // beam: summed log-probability

	// choices are a request's other choices (Request.N), waiting for this,
	// its first, to finish the prompt; nil once forked. choiceOf is the
	// first choice of one of those.
	choices  []*seq
	choiceOf *seq
	// Logprobs, sized at submission: one per output token, and the
	// backing array of their alternatives.
	logprobs []TokenLogprobs
	topBuf   []Logprob

	callerGone <-chan struct{} // the submitter's ctx.Done()
	fetched    chan struct{}   // remote tier fetch: nil before it starts, closed when it ends
	lease      remoteLease     // remote tier: the fleet's lease on computing its prompt, if it took it
	cancelled  bool            // cancelled by the engine itself (Close)
	finished   bool            // its Result has been delivered
	skipped    int             // CachedFirst: times passed over
	admitSeq   uint64          // admission order, for choosing whom to preempt

	submitted, admitted, lastToken time.Time
	everAdmitted                   bool
	usage                          Usage
	breakpoints                    []eviction.Breakpoint // req.Cache.Breakpoints, for the cache
	itl                            []time.Duration
	text                           outText
	spec                           specState
}

// newSeq makes the sequence of req's choice i (sampling from PRNG stream
// i), with every buffer its run needs.
func newSeq(e *Engine, req *Request, i int, now time.Time) (*seq, error) {
	smp, err := sample.NewFor(req.Sampling, e.cfg.Model.VocabSize(), req.Prompt, uint64(i))
	if err != nil {
		// validate checked each sampling field by name already; this only
		// fires if package sample grows a rule the engine does not know.
		return nil, invalid("", "%v", err)
	}
	ch := make(chan Token, req.MaxTokens+1)
	s := &seq{
		req:       req,
		stream:    &Stream{Tokens: ch, tokens: ch, done: make(chan struct{})},
		tokens:    append(make([]int32, 0, len(req.Prompt)+req.MaxTokens), req.Prompt...),
		itl:       make([]time.Duration, 0, req.MaxTokens),
		nPrompt:   len(req.Prompt),
		sampler:   smp,
		submitted: now,
		text:      newOutText(req.StopStrings),
	}
	if req.Constraint != nil {
		s.matcher = req.Constraint.NewMatcher()
		smp.Constrain(s.matcher, req.Logprobs) // logprobs of the restricted distribution
	}
	if req.Logprobs {
		s.logprobs = make([]TokenLogprobs, 0, req.MaxTokens)
		s.topBuf = make([]Logprob, 0, req.MaxTokens*req.TopLogprobs)
	}
	s.usage.PromptTokens = len(req.Prompt)
	for _, bp := range req.Cache.Breakpoints {
		s.breakpoints = append(s.breakpoints, eviction.Breakpoint{Tokens: bp.Tokens, TTL: bp.TTL})
	}
	if e.cfg.Speculator != nil && req.Beam.Width <= 1 {
		s.spec.drafts = make([]int32, 0, e.cfg.SpecTokens)
	}
	if req.Beam.Width > 1 {
		s.group = &beamGroup{root: s, width: req.Beam.Width, beams: []*seq{s}}
	}
	return s, nil
}

// slots is how many running sequences s becomes once admitted.
func (s *seq) slots() int { return max(1, s.req.Beam.Width, 1+len(s.choices)) }

// recordLogprobs notes the log-probabilities of the token s's sampler
// just returned, if the request asked for them.
func (s *seq) recordLogprobs() {
	if !s.req.Logprobs {
		return
	}
	n := len(s.topBuf)
	lp, top := s.sampler.Logprobs(s.req.TopLogprobs, s.topBuf)
	s.topBuf = top
	s.logprobs = append(s.logprobs, TokenLogprobs{Logprob: lp, Top: top[n:len(top):len(top)]})
}

// owner is the sequence that carries the request: s, or its group's root.
func (s *seq) owner() *seq {
	if s.group != nil {
		return s.group.root
	}
	return s
}

// isCancelled reports whether the request's caller went away or the engine
// cancelled it. For a beam it asks the group's root.
func (s *seq) isCancelled() bool {
	s = s.owner()
	if s.cancelled {
		return true
	}
	select {
	case <-s.callerGone:
		return true
	default:
		return false
	}
}

// generated returns the output tokens so far.
func (s *seq) generated() []int32 { return s.tokens[s.nPrompt:] }

// pending is the number of positions the next forward must compute.
func (s *seq) pending() int { return len(s.tokens) - s.computed }

// cacheUse is what the request asked of the cache.
func (s *seq) cacheUse() eviction.Use {
	return eviction.Use{TTL: s.req.Cache.TTL, Priority: s.req.Cache.Priority, Readmit: s.everAdmitted, Breakpoints: s.breakpoints}
}

// release gives back everything the sequence holds in the pool and tree.
func (s *seq) release(e *Engine) {
	if s.table != nil {
		s.table.Release()
		s.table = nil
	}
	e.cache.Done(s.pin, s.cacheUse())
	s.pin = radix.Handle{}
	s.computed, s.inserted = 0, 0
	s.lease.end()
}

// stopReason reports whether the sequence must stop after its newest token
// and why; trim is how many trailing tokens to drop from the output. It
// adds the token's text, which a stop string cuts.
func (s *seq) stopReason(e *Engine) (reason FinishReason, stop bool, trim int) {
	out := s.generated()
	last := out[len(out)-1]
	if (!s.req.IgnoreEOS && last == e.cfg.EOS) || slices.Contains(s.req.StopTokens, last) {
		return FinishStop, true, 1
	}
	if tk := e.cfg.Tokenizer; tk != nil && s.text.add(tk, last) {
		return FinishStop, true, 0
	}
	if len(out) >= s.req.MaxTokens {
		return FinishLength, true, 0
	}
	return "", false, 0
}
