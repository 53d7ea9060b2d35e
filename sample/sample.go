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

// Sampler draws tokens for one request. It owns its PRNG and scratch
// buffers, which grow to the vocabulary size on the first call and are
// reused, so Sample allocates nothing after warm-up. A Sampler is not safe
// for concurrent use.
type Sampler struct {
	p     Params
	rng   *rand.Rand
	idx   []int32   // candidate token IDs
	probs []float32 // their unnormalised probabilities, parallel to idx
}

// New returns a Sampler for p, or an error wrapping ErrParams.
func New(p Params) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, 0x9e3779b97f4a7c15))}, nil
}

// Sample returns the next token ID for logits (one vocabulary row, not
// modified). It panics if logits is empty.
func (s *Sampler) Sample(logits []float32) int32 {
	if len(logits) == 0 {
		panic("sample: empty logits")
	}
	if s.p.Temperature == 0 {
		return Argmax(logits)
	}
	n := len(logits)
	if cap(s.idx) < n {
		s.idx, s.probs = make([]int32, n), make([]float32, n)
	}
	idx, probs := s.idx[:n], s.probs[:n]
	for i := range idx {
		idx[i] = int32(i)
	}
	filter := (s.p.TopK > 0 && s.p.TopK < n) || (s.p.TopP > 0 && s.p.TopP < 1)
	if filter {
		// Most likely first; ties by lower ID so the order is deterministic.
		slices.SortFunc(idx, func(a, b int32) int {
			if c := cmp.Compare(logits[b], logits[a]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		if s.p.TopK > 0 && s.p.TopK < n {
			idx, probs = idx[:s.p.TopK], probs[:s.p.TopK]
		}
	}
	// Softmax numerators exp((l - max) / T); max is logits of the argmax.
	hi := logits[Argmax(logits)]
	inv := 1 / s.p.Temperature
	var total float64
	for i, id := range idx {
		probs[i] = float32(math.Exp(float64((logits[id] - hi) * inv)))
		total += float64(probs[i])
	}
	if filter && s.p.TopP > 0 && s.p.TopP < 1 {
		want, cum := float64(s.p.TopP)*total, 0.0
		for i := range probs {
			cum += float64(probs[i])
			if cum >= want {
				idx, probs, total = idx[:i+1], probs[:i+1], cum
				break
			}
		}
	}
	u := s.rng.Float64() * total
	for i, p := range probs {
		u -= float64(p)
		if u < 0 {
			return idx[i]
		}
	}
	return idx[len(idx)-1] // rounding left u a hair above zero
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
