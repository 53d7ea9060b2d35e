package sample

import "math"

// Constraint restricts the tokens a Sampler may return, for
// grammar-constrained decoding (package grammar's Matcher implements it).
// The Sampler only asks; whoever owns the Constraint advances it with the
// token Sample returns.
type Constraint interface {
	// Allowed reports whether token id may come next.
	Allowed(id int32) bool
	// Mask returns the allowed tokens as a bitset (bit id%64 of word
	// id/64; tokens past its end are refused). The Sampler does not keep
	// or modify it.
	Mask() []uint64
}

// Constrain makes every later Sample return a token c allows, or -1 when
// c allows none; nil removes the constraint. Unless strict, Sample draws
// first from the whole distribution and, only when c refuses that token,
// again from the distribution restricted to c's mask: for plain sampling
// and greedy decoding this is exactly sampling from the masked
// distribution, and most steps never build a mask. Strict draws from the
// restricted distribution every time, so that Logprobs describe it (top-k,
// top-p and min-p then cut the restricted distribution too); ask for it
// when log-probabilities will be reported.
func (s *Sampler) Constrain(c Constraint, strict bool) { s.con, s.strict = c, strict }

// drawAllowed redraws from row with the tokens the constraint refuses
// removed; -1 when it refuses every token.
func (s *Sampler) drawAllowed(row []float32) int32 {
	mask := s.con.Mask()
	if cap(s.masked) < len(row) {
		s.masked = make([]float32, len(row))
	}
	out := s.masked[:len(row)]
	any := false
	for i, l := range row {
		w := i >> 6
		if w < len(mask) && mask[w]>>(i&63)&1 != 0 {
			out[i] = l
			any = true
		} else {
			out[i] = float32(math.Inf(-1))
		}
	}
	if !any {
		return -1
	}
	return s.draw(out)
}
