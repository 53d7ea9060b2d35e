package sample

import "testing"

// setConstraint allows a fixed set of tokens and counts mask requests.
type setConstraint struct {
	allowed map[int32]bool
	masks   int
}

func (c *setConstraint) Allowed(id int32) bool { return c.allowed[id] }
func (c *setConstraint) Mask() []uint64 {
	c.masks++
	m := make([]uint64, 2)
	for id := range c.allowed {
		m[id>>6] |= 1 << (id & 63)
	}
	return m
}

func TestConstrainGreedy(t *testing.T) {
	logits := []float32{0, 9, 1, 5, 2, 4}
	s, err := New(Params{})
	if err != nil {
		t.Fatal(err)
	}
	c := &setConstraint{allowed: map[int32]bool{1: true, 3: true}}
	if !s.Greedy() {
		t.Fatal("an unconstrained greedy sampler is not Greedy")
	}
	s.Constrain(c, false)
	if s.Greedy() {
		t.Fatal("a constrained sampler claims Greedy: a raw argmax elsewhere would ignore its grammar")
	}
	if got := s.Sample(logits); got != 1 || c.masks != 0 {
		t.Fatalf("Sample = %d after %d masks, want 1 without a mask (the argmax is allowed)", got, c.masks)
	}
	c.allowed = map[int32]bool{3: true, 5: true}
	if got := s.Sample(logits); got != 3 || c.masks != 1 {
		t.Fatalf("Sample = %d after %d masks, want 3 with one mask", got, c.masks)
	}
	c.allowed = map[int32]bool{}
	if got := s.Sample(logits); got != -1 {
		t.Fatalf("Sample = %d with nothing allowed, want -1", got)
	}
	s.Constrain(nil, false)
	if got := s.Sample(logits); got != 1 {
		t.Fatalf("Sample = %d unconstrained, want 1", got)
	}
}

func TestConstrainSampling(t *testing.T) {
	logits := make([]float32, 100)
	for i := range logits {
		logits[i] = float32(i%7) * 0.3
	}
	s, err := NewFor(Params{Temperature: 1, TopP: 0.9, Seed: 4, FrequencyPenalty: 0.5}, 100, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := &setConstraint{allowed: map[int32]bool{2: true, 40: true, 99: true}}
	s.Constrain(c, false)
	seen := map[int32]int{}
	for range 300 {
		tok := s.Sample(logits)
		if !c.allowed[tok] {
			t.Fatalf("Sample returned %d, which the constraint refuses", tok)
		}
		seen[tok]++
		if lp, _ := s.Logprobs(0, nil); lp > 0 || lp < -10 {
			t.Fatalf("logprob %v of a token of the restricted distribution", lp)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("sampled %v, want every allowed token", seen)
	}
}

// TestConstrainStrict: strict sampling masks every draw, so the reported
// distribution holds only allowed tokens.
func TestConstrainStrict(t *testing.T) {
	logits := []float32{0, 9, 1, 5, 2, 4}
	s, err := New(Params{Temperature: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := &setConstraint{allowed: map[int32]bool{3: true, 5: true}}
	s.Constrain(c, true)
	for range 20 {
		tok := s.Sample(logits)
		if !c.allowed[tok] {
			t.Fatalf("sampled %d", tok)
		}
		_, top := s.Logprobs(6, nil)
		for _, x := range top {
			if !c.allowed[x.ID] && x.Logprob > -1e30 {
				t.Fatalf("top logprobs hold refused token %d (%v)", x.ID, x.Logprob)
			}
		}
	}
	if c.masks != 20 {
		t.Fatalf("%d masks for 20 strict draws", c.masks)
	}
}
