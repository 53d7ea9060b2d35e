package sample

// Greedy reports whether Sample picks Argmax of the logits exactly as
// given and keeps no state that a later Sample reads: temperature 0, no
// logit bias, no penalty, no Constraint (whose argmax is of the allowed
// tokens only). A caller that computes the argmax elsewhere (a
// GPU returning 4 bytes per row instead of the logits) may then skip
// Sample for that token; Logprobs, which reads the last Sample's row, is
// then unavailable for it.
func (s *Sampler) Greedy() bool {
	return s.p.Temperature == 0 && len(s.bias) == 0 && !s.p.penalized() && s.con == nil
}
