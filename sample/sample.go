// Package sample picks the next token from a row of logits: greedy argmax,
// or a draw from the temperature-scaled softmax restricted by min-p, top-k
// and top-p (nucleus) filtering, using a per-request seeded PRNG so the
// same seed and logits always give the same tokens. Before either, logit
// biases and repetition, frequency and presence penalties rewrite the
// logits (in vLLM's order), and after a draw the Sampler reports the
// token's log-probability and the most likely alternatives under the
// distribution it was drawn from.
package sample

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// ErrParams is wrapped by every parameter validation error.
var ErrParams = errors.New("sample: invalid parameters")

// ErrNonFinite is wrapped by the error of Next, and of CheckFinite, for a
// row of logits holding NaN or an infinity, from which no token can be
// drawn and no log-probability computed.
var ErrNonFinite = errors.New("sample: non-finite logit")

// MinRepetitionPenalty is the smallest repetition penalty other than 0
// (none): dividing a logit by less could overflow it to +Inf, and the
// softmax of a row holding +Inf is NaN.
const MinRepetitionPenalty = 0.01

// Params configures a Sampler. The zero value is greedy decoding.
type Params struct {
	// Temperature divides the logits before the softmax; 0 means greedy
	// (argmax, lowest token ID on ties). Must be finite and >= 0.
	Temperature float32
	// TopK keeps only the K most likely tokens; 0 keeps all. Must be >= 0.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// sums to at least TopP; 0 or 1 keeps all. Must be in [0, 1].
	TopP float32
	// MinP keeps only tokens at least MinP times as likely as the most
	// likely one (after temperature, before top-k and top-p); 0 keeps all.
	// Must be in [0, 1].
	MinP float32
	// FrequencyPenalty is subtracted from a token's logit once for every
	// time it occurs in the output so far, PresencePenalty once if it
	// occurs at all (OpenAI's definitions). Each must be in [-2, 2].
	FrequencyPenalty, PresencePenalty float32
	// RepetitionPenalty divides the positive logits, and multiplies the
	// negative ones, of every token in the prompt or the output so far
	// (CTRL's penalty, as in vLLM and Hugging Face); 0 or 1 is none. Must
	// be 0 or in [MinRepetitionPenalty, 10].
	RepetitionPenalty float32
	// LogitBias is added to the logits of the tokens it names before any
	// other step. Each bias must be in [-100, 100] and each token >= 0; a
	// token beyond the logits row is ignored (the engine refuses them).
	LogitBias map[int32]float32
	// Seed seeds the Sampler's PRNG.
	Seed uint64
}

// penalized reports whether any penalty applies.
func (p *Params) penalized() bool {
	return p.FrequencyPenalty != 0 || p.PresencePenalty != 0 || p.RepetitionPenalty != 0 && p.RepetitionPenalty != 1
}

// TokenLogprob is a token and its log-probability.
type TokenLogprob struct {
	ID      int32
	Logprob float32
}

// Validate reports parameters a Sampler cannot use, wrapping ErrParams.
func (p Params) Validate() error {
	t := float64(p.Temperature)
	switch {
	case math.IsNaN(t) || math.IsInf(t, 0) || t < 0:
		return fmt.Errorf("%w: temperature %v must be finite and >= 0", ErrParams, p.Temperature)
	case p.TopK < 0:
		return fmt.Errorf("%w: top-k %d must be >= 0", ErrParams, p.TopK)
	case !(p.TopP >= 0 && p.TopP <= 1):
		return fmt.Errorf("%w: top-p %v must be in [0, 1]", ErrParams, p.TopP)
	case !(p.MinP >= 0 && p.MinP <= 1):
		return fmt.Errorf("%w: min-p %v must be in [0, 1]", ErrParams, p.MinP)
	case !(p.FrequencyPenalty >= -2 && p.FrequencyPenalty <= 2):
		return fmt.Errorf("%w: frequency penalty %v must be in [-2, 2]", ErrParams, p.FrequencyPenalty)
	case !(p.PresencePenalty >= -2 && p.PresencePenalty <= 2):
		return fmt.Errorf("%w: presence penalty %v must be in [-2, 2]", ErrParams, p.PresencePenalty)
	case !(p.RepetitionPenalty == 0 || p.RepetitionPenalty >= MinRepetitionPenalty && p.RepetitionPenalty <= 10):
		return fmt.Errorf("%w: repetition penalty %v must be 0 (none) or in [%v, 10]", ErrParams, p.RepetitionPenalty, MinRepetitionPenalty)
	}
	for id, b := range p.LogitBias {
		if id < 0 {
			return fmt.Errorf("%w: logit bias names token %d", ErrParams, id)
		}
		if !(b >= -100 && b <= 100) {
			return fmt.Errorf("%w: logit bias %v of token %d must be in [-100, 100]", ErrParams, b, id)
		}
	}
	return nil
}

// Sampler draws tokens for one request. It owns its PRNG and scratch
// buffers, which NewFor sizes for the vocabulary (New's grow on the first
// call) and are reused, so Sample allocates nothing after warm-up. A
// Sampler is not safe for concurrent use.
type Sampler struct {
	p     Params
	rng   *rand.Rand
	pcg   rand.PCG   // rng's state
	peek  rand.PCG   // a copy of pcg that Offload draws from
	prng  *rand.Rand // on peek
	cands []cand
	proc  []float32 // the logits after biases and penalties, when any apply
	bias  []TokenLogprob
	// Penalty state: the output's token counts, the prompt's tokens.
	counts   []int32
	inPrompt []bool
	// The same state as lists, for Offload: the distinct tokens of the
	// output so far, and of the prompt when the repetition penalty reads it.
	seen, prompt []int32
	vocab        int // NewFor's; 0 if unknown

	// The distribution of the last draw, for Logprobs: token t's
	// log-probability is (row[t]-hi)*scale - logZ if t is in kept (nil:
	// every token; logZ is then computed on demand, NaN until).
	row       []float32
	hi, scale float64
	logZ      float64
	kept      []cand
	last      int32

	con    Constraint // see Constrain
	strict bool       // mask every draw, not only refused ones
	masked []float32  // the row restricted to con's mask
}

// cand is a candidate token and its unnormalised probability.
type cand struct {
	p  float32
	id int32
}

// before orders candidates most likely first, lower ID first on ties.
func before(a, b cand) bool { return a.p > b.p || a.p == b.p && a.id < b.id }

// byLikelihood is before as a comparison for slices.SortFunc.
func byLikelihood(a, b cand) int {
	if c := cmp.Compare(b.p, a.p); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// New returns a Sampler for p, or an error wrapping ErrParams. Penalties
// see only the tokens it samples: NewFor also knows the prompt.
func New(p Params) (*Sampler, error) { return NewFor(p, 0, nil, 0) }

// NewFor returns a Sampler for p with its buffers sized for a vocabulary of
// vocab tokens, whose repetition penalty also counts the tokens of prompt.
// Stream selects one of the independent PRNG streams of p.Seed (the engine
// gives choice i of a request stream i; stream 0 is New's).
func NewFor(p Params, vocab int, prompt []int32, stream uint64) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s := &Sampler{p: p, pcg: *rand.NewPCG(p.Seed, 0x9e3779b97f4a7c15^stream)}
	s.rng, s.prng, s.vocab = rand.New(&s.pcg), rand.New(&s.peek), vocab
	for id, b := range p.LogitBias {
		s.bias = append(s.bias, TokenLogprob{id, b})
	}
	slices.SortFunc(s.bias, func(a, b TokenLogprob) int { return cmp.Compare(a.ID, b.ID) })
	if p.Temperature > 0 {
		s.cands = make([]cand, vocab)
	}
	if len(s.bias) > 0 || p.penalized() {
		s.proc = make([]float32, vocab)
	}
	if p.penalized() {
		s.counts = make([]int32, vocab)
		if p.RepetitionPenalty != 0 && p.RepetitionPenalty != 1 {
			s.inPrompt = make([]bool, vocab)
			for _, t := range prompt {
				if t >= 0 && int(t) < vocab && !s.inPrompt[t] {
					s.inPrompt[t] = true
					s.prompt = append(s.prompt, t)
				}
			}
		}
	}
	return s, nil
}

// process returns logits with the biases and penalties applied: logits
// itself when there are none, else a copy.
func (s *Sampler) process(logits []float32) []float32 {
	if s.proc == nil && len(s.bias) == 0 && !s.p.penalized() {
		return logits
	}
	n := len(logits)
	if len(s.proc) < n {
		s.proc = make([]float32, n)
	}
	row := s.proc[:n]
	copy(row, logits)
	for _, b := range s.bias {
		if int(b.ID) < n {
			row[b.ID] += b.Logprob
		}
	}
	if !s.p.penalized() {
		return row
	}
	if len(s.counts) < n {
		s.counts = append(s.counts, make([]int32, n-len(s.counts))...)
	}
	rp, freq, pres := s.p.RepetitionPenalty, s.p.FrequencyPenalty, s.p.PresencePenalty
	for i, c := range s.counts[:n] {
		if rp != 0 && rp != 1 && (c > 0 || i < len(s.inPrompt) && s.inPrompt[i]) {
			if row[i] > 0 {
				row[i] /= rp
			} else {
				row[i] *= rp
			}
		}
		if c > 0 {
			row[i] -= freq*float32(c) + pres
		}
	}
	return row
}

// Sample returns the next token ID for logits (one vocabulary row, not
// modified) and counts it in the output the penalties see. It panics if
// logits is empty. Top-k selects in expected O(vocab) time (quickselect)
// and sorts the k it keeps; top-p sorts only the tokens that can be in
// the nucleus. The draw walks the kept tokens most likely first under
// top-k or top-p, else in token order. Under a
// Constraint (see Constrain) it returns -1 when the constraint allows no
// token.
func (s *Sampler) Sample(logits []float32) int32 {
	if len(logits) == 0 {
		panic("sample: empty logits")
	}
	return s.pick(s.process(logits))
}

// Next is Sample for logits that may not be finite: if the row it would
// draw from (the logits after biases and penalties) holds NaN or an
// infinity, it draws nothing and returns an error wrapping ErrNonFinite.
// Under a Constraint it returns -1 when the constraint allows no token.
func (s *Sampler) Next(logits []float32) (int32, error) {
	if len(logits) == 0 {
		panic("sample: empty logits")
	}
	row := s.process(logits)
	if err := CheckFinite(row); err != nil {
		return 0, err
	}
	return s.pick(row), nil
}

// pick draws from row, redrawing from the allowed tokens when a
// Constraint refuses the first draw, and counts the token (-1 when the
// constraint allows none, which is not counted).
func (s *Sampler) pick(row []float32) int32 {
	var tok int32
	if s.con != nil && s.strict {
		tok = s.drawAllowed(row)
	} else {
		tok = s.draw(row)
	}
	if s.con != nil && (tok < 0 || !s.con.Allowed(tok)) {
		if tok = s.drawAllowed(row); tok < 0 {
			s.last = tok
			return tok
		}
	}
	return s.accept(tok)
}

// accept counts tok in the output the penalties see and returns it.
func (s *Sampler) accept(tok int32) int32 {
	if s.counts != nil {
		if s.counts[tok] == 0 {
			s.seen = append(s.seen, tok)
		}
		s.counts[tok]++
	}
	s.last = tok
	return tok
}

// CheckFinite returns an error wrapping ErrNonFinite that names the first
// token of row whose logit is NaN or infinite, or nil if there is none.
func CheckFinite(row []float32) error {
	for i, l := range row {
		// l-l is 0 for a finite l, NaN for NaN and the infinities.
		if l-l != 0 {
			return fmt.Errorf("%w: token %d's logit is %v", ErrNonFinite, i, l)
		}
	}
	return nil
}

// draw samples from the processed row and records its distribution.
func (s *Sampler) draw(row []float32) int32 {
	s.row, s.kept, s.scale = row, nil, 1
	if s.p.Temperature == 0 {
		tok := Argmax(row)
		s.hi, s.logZ = float64(row[tok]), math.NaN()
		return tok
	}
	n := len(row)
	if cap(s.cands) < n {
		s.cands = make([]cand, n)
	}
	// Softmax numerators exp((l - max) / T), in float64: 1/T of a tiny
	// float32 temperature overflows float32, and 0 x Inf would be NaN.
	c := s.cands[:n]
	hi, inv := float64(row[Argmax(row)]), 1/float64(s.p.Temperature)
	var total float64
	for i, l := range row {
		c[i] = cand{float32(math.Exp((float64(l) - hi) * inv)), int32(i)}
		total += float64(c[i].p)
	}
	s.hi, s.scale = hi, inv
	if m := s.p.MinP; m > 0 {
		// The most likely token's numerator is exp(0) = 1.
		kept := 0
		for _, x := range c {
			if x.p >= m {
				c[kept] = x
				kept++
			}
		}
		c = c[:kept]
		total = sum(c)
	}
	if k := s.p.TopK; k > 0 && k < len(c) {
		// The kept tokens most likely first, the order the draw walks
		// (and a device's sampler, which has no quickselect order).
		selectTop(c, k)
		c, total = c[:k], sum(c[:k])
		slices.SortFunc(c, byLikelihood)
	}
	if p := float64(s.p.TopP); p > 0 && p < 1 {
		// Tokens below (1-p)·total/len(c) together hold less than 1-p of
		// the mass, so the nucleus lies among the others: sort only those.
		floor, kept := float32((1-p)*total/float64(len(c))), 0
		for _, x := range c {
			if x.p >= floor {
				c[kept] = x
				kept++
			}
		}
		c = c[:kept]
		slices.SortFunc(c, byLikelihood)
		want, cum := p*total, 0.0
		for i, x := range c {
			cum += float64(x.p)
			if cum >= want {
				c = c[:i+1]
				break
			}
		}
		total = cum
	}
	s.kept, s.logZ = c, math.Log(total)
	u := s.rng.Float64() * total
	for _, x := range c {
		u -= float64(x.p)
		if u < 0 {
			return x.id
		}
	}
	return c[len(c)-1].id // rounding left u a hair above zero
}

// Logprobs returns the log-probability of the token the last Sample
// returned under the distribution it was drawn from (the logits after
// biases, penalties and temperature, restricted by min-p, top-k and top-p;
// greedy decoding's is the untempered softmax), and appends the top most
// likely tokens of that distribution to dst, most likely first, lower ID
// first on ties. It allocates nothing once the Sampler's buffers are
// sized. It panics if Sample was never called.
func (s *Sampler) Logprobs(top int, dst []TokenLogprob) (float32, []TokenLogprob) {
	if s.row == nil {
		panic("sample: Logprobs before Sample")
	}
	if math.IsNaN(s.logZ) {
		z := 0.0
		for _, l := range s.row {
			z += math.Exp(float64(l) - s.hi)
		}
		s.logZ = math.Log(z)
	}
	lp := func(t int32) float32 { return float32((float64(s.row[t])-s.hi)*s.scale - s.logZ) }
	c := s.kept
	if c == nil && top > 0 {
		if cap(s.cands) < len(s.row) {
			s.cands = make([]cand, len(s.row))
		}
		// Ordering by logit orders by probability.
		c = s.cands[:len(s.row)]
		for i, l := range s.row {
			c[i] = cand{l, int32(i)}
		}
	}
	if top = min(top, len(c)); top > 0 {
		selectTop(c, top)
		slices.SortFunc(c[:top], byLikelihood)
		for _, x := range c[:top] {
			dst = append(dst, TokenLogprob{x.id, lp(x.id)})
		}
	}
	return lp(s.last), dst
}

// sum adds the candidates' probabilities.
func sum(c []cand) float64 {
	t := 0.0
	for _, x := range c {
		t += float64(x.p)
	}
	return t
}

// selectTop reorders c so that its first k elements are the k that come
// first in the before order (in no particular order among themselves):
// quickselect with a middle pivot, expected O(len(c)).
func selectTop(c []cand, k int) {
	lo, hi := 0, len(c)-1
	for lo < hi {
		pivot := c[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for before(c[i], pivot) {
				i++
			}
			for before(pivot, c[j]) {
				j--
			}
			if i <= j {
				c[i], c[j] = c[j], c[i]
				i++
				j--
			}
		}
		// Now c[lo..j] come no later than pivot and c[i..hi] no earlier.
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			return
		}
	}
}

// Argmax returns the index of the largest value, the lowest on ties. NaN
// values are never chosen unless all are NaN (then 0).
func Argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] || x[best] != x[best] && v == v {
			best = i
		}
	}
	return int32(best)
}
