// Package sample picks the next token from a row of logits: greedy argmax,
// or a draw from the temperature-scaled softmax restricted by top-k and
// top-p (nucleus) filtering, using a per-request seeded PRNG so the same
// seed and logits always give the same tokens.
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
	// Seed seeds the Sampler's PRNG.
	Seed uint64
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
	}
	return nil
}

// Sampler draws tokens for one request. It owns its PRNG and a scratch
// buffer, which grows to the vocabulary size on the first call and is
// reused, so Sample allocates nothing after warm-up. A Sampler is not safe
// for concurrent use.
type Sampler struct {
	p     Params
	rng   *rand.Rand
	cands []cand
}

// cand is a candidate token and its unnormalised probability.
type cand struct {
	p  float32
	id int32
}

// before orders candidates most likely first, lower ID first on ties.
func before(a, b cand) bool { return a.p > b.p || a.p == b.p && a.id < b.id }

// New returns a Sampler for p, or an error wrapping ErrParams.
func New(p Params) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, 0x9e3779b97f4a7c15))}, nil
}

// Sample returns the next token ID for logits (one vocabulary row, not
// modified). It panics if logits is empty. Top-k runs in expected O(vocab)
// time (quickselect); top-p sorts only the tokens that can be in the
// nucleus.
func (s *Sampler) Sample(logits []float32) int32 {
	if len(logits) == 0 {
		panic("sample: empty logits")
	}
	if s.p.Temperature == 0 {
		return Argmax(logits)
	}
	n := len(logits)
	if cap(s.cands) < n {
		s.cands = make([]cand, n)
	}
	// Softmax numerators exp((l - max) / T), in float64: 1/T of a tiny
	// float32 temperature overflows float32, and 0 x Inf would be NaN.
	c := s.cands[:n]
	hi, inv := float64(logits[Argmax(logits)]), 1/float64(s.p.Temperature)
	var total float64
	for i, l := range logits {
		c[i] = cand{float32(math.Exp((float64(l) - hi) * inv)), int32(i)}
		total += float64(c[i].p)
	}
	if k := s.p.TopK; k > 0 && k < n {
		selectTop(c, k)
		c, total = c[:k], sum(c[:k])
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
		slices.SortFunc(c, func(a, b cand) int {
			if c := cmp.Compare(b.p, a.p); c != 0 {
				return c
			}
			return cmp.Compare(a.id, b.id)
		})
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
	u := s.rng.Float64() * total
	for _, x := range c {
		u -= float64(x.p)
		if u < 0 {
			return x.id
		}
	}
	return c[len(c)-1].id // rounding left u a hair above zero
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
