package sample

import "slices"

// Draw is a Sampler's next draw, described so that it can be made where
// the logits are (a GPU sends back the token, 4 bytes, instead of a
// vocabulary of logits): the parameters, the bias and penalty state, and
// the uniform number the Sampler's PRNG gives next. Offload fills one;
// Accept takes the token it gave.
type Draw struct {
	Temperature float32 // 0: argmax, after biases and penalties
	TopK        int     // 0: all
	TopP, MinP  float32 // 0 (or TopP 1): all
	// Frequency, presence and repetition penalties, as in Params.
	Frequency, Presence, Repetition float32
	// U is the draw in [0, 1): the next rand.Float64 of the Sampler's
	// PRNG, which Sample scales by the kept mass (0 at temperature 0,
	// which draws nothing).
	U float64
	// Entries lists, once each, the tokens that have a bias, occur in the
	// output so far or, under the repetition penalty, in the prompt.
	Entries []Entry
}

// Entry is one token's bias and penalty state in a Draw.
type Entry struct {
	Token    int32
	Bias     float32
	Count    int32 // times in the output so far
	InPrompt bool  // in the prompt, for the repetition penalty
}

// Offload sets d (reusing d.Entries' memory) to the Sampler's next draw
// and reports whether a draw made elsewhere from it can give the token
// Sample would: not under a Constraint (whose redraws read a mask). It
// changes nothing in the Sampler: Accept does, with the token drawn. A vocabulary unknown to
// the Sampler (New rather than NewFor) lets a bias name a token beyond
// the logits, which the device then refuses.
func (s *Sampler) Offload(d *Draw) bool {
	p := &s.p
	if s.con != nil {
		return false
	}
	*d = Draw{Temperature: p.Temperature, TopK: p.TopK, TopP: p.TopP, MinP: p.MinP, Frequency: p.FrequencyPenalty,
		Presence: p.PresencePenalty, Repetition: p.RepetitionPenalty, Entries: d.Entries[:0]}
	if p.Temperature > 0 {
		s.peek = s.pcg
		d.U = s.prng.Float64()
	}
	count := func(t int32) int32 {
		if int(t) < len(s.counts) {
			return s.counts[t]
		}
		return 0
	}
	inPrompt := func(t int32) bool { return int(t) < len(s.inPrompt) && s.inPrompt[t] }
	biased := func(t int32) bool {
		_, ok := slices.BinarySearchFunc(s.bias, t, func(b TokenLogprob, t int32) int { return int(b.ID) - int(t) })
		return ok
	}
	for _, b := range s.bias {
		if s.vocab == 0 || int(b.ID) < s.vocab {
			d.Entries = append(d.Entries, Entry{b.ID, b.Logprob, count(b.ID), inPrompt(b.ID)})
		}
	}
	for _, t := range s.seen {
		if !biased(t) {
			d.Entries = append(d.Entries, Entry{t, 0, s.counts[t], inPrompt(t)})
		}
	}
	for _, t := range s.prompt {
		if count(t) == 0 && !biased(t) {
			d.Entries = append(d.Entries, Entry{Token: t, InPrompt: true})
		}
	}
	return true
}

// Accept records tok, the token a draw made elsewhere from Offload's Draw
// gave, as Sample would have: the PRNG moves past the draw and the
// penalties count tok. Logprobs is then unavailable until the next
// Sample. REQUIRES: Offload's Draw was the Sampler's current one.
func (s *Sampler) Accept(tok int32) {
	if s.p.Temperature > 0 {
		s.rng.Float64()
	}
	s.row = nil
	if s.counts != nil && int(tok) >= len(s.counts) {
		s.counts = append(s.counts, make([]int32, int(tok)+1-len(s.counts))...)
	}
	s.accept(tok)
}
