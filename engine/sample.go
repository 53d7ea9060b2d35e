package engine

import (
	"math"
	"math/rand/v2"
	"slices"
)

// sampler picks next tokens for one request. It reuses its buffers, so
// after the first token it allocates nothing.
type sampler struct {
	p     Sampling
	rng   *rand.Rand
	idx   []int32   // candidate token IDs
	probs []float32 // their probabilities
}

// newSampler returns a sampler for p (validated by Request.validate). A
// zero seed draws a random one; any other seed makes the output
// reproducible.
func newSampler(p Sampling, vocab int) (*sampler, error) {
	s := &sampler{p: p}
	if p.Temperature > 0 {
		seed := p.Seed
		if seed == 0 {
			seed = rand.Uint64()
		}
		s.rng = rand.New(rand.NewPCG(seed, seed^0x6A09E667F3BCC908))
		s.idx = make([]int32, 0, vocab)
		s.probs = make([]float32, 0, vocab)
	}
	return s, nil
}

// argmax returns the index of the largest logit, the lowest on ties.
func argmax(logits []float32) int32 {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return int32(best)
}

// sample draws the next token from logits: greedy at temperature 0,
// otherwise from softmax(logits / T) restricted to the top-k tokens and to
// the smallest set whose probability reaches top-p.
func (s *sampler) sample(logits []float32) int32 {
	if s.rng == nil {
		return argmax(logits)
	}
	s.idx = s.idx[:0]
	for i := range logits {
		s.idx = append(s.idx, int32(i))
	}
	cut := len(s.idx)
	if k := s.p.TopK; k > 0 && k < cut || s.p.TopP > 0 && s.p.TopP < 1 {
		// Highest logit first; ties by token ID so the order is stable.
		slices.SortFunc(s.idx, func(a, b int32) int {
			switch {
			case logits[a] > logits[b]:
				return -1
			case logits[a] < logits[b]:
				return 1
			}
			return int(a - b)
		})
		if k := s.p.TopK; k > 0 && k < cut {
			cut = k
		}
	}
	maxLogit := logits[s.idx[0]]
	if cut == len(s.idx) {
		maxLogit = logits[argmax(logits)]
	}
	inv := 1 / float64(s.p.Temperature)
	s.probs = s.probs[:0]
	var sum float64
	for _, id := range s.idx[:cut] {
		p := math.Exp((float64(logits[id]) - float64(maxLogit)) * inv)
		s.probs = append(s.probs, float32(p))
		sum += p
	}
	if tp := s.p.TopP; tp > 0 && tp < 1 {
		var acc float64
		for i, p := range s.probs {
			acc += float64(p)
			if acc >= float64(tp)*sum {
				cut = i + 1
				sum = acc
				break
			}
		}
	}
	r := s.rng.Float64() * sum
	for i, p := range s.probs[:cut] {
		if r -= float64(p); r < 0 {
			return s.idx[i]
		}
	}
	return s.idx[cut-1]
}
