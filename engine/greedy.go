package engine

// GreedyModel is a Model that can return a row's argmax token instead of
// its logits (model.Runner implements it): on a GPU a row that decodes
// greedily then sends back 4 bytes instead of a vocabulary of logits.
type GreedyModel interface {
	Model
	// ForwardGreedy is Forward, except that greedy has one entry per row
	// that asks for logits, in order, and for each i with greedy[i] set
	// ids[i] is that row's sample.Argmax (or -2 where the model can tell
	// that the row holds NaN or an infinity) while its logits row is
	// unspecified. Both slices are valid until the next call.
	ForwardGreedy(rows []Row, greedy []bool) (logits []float32, ids []int32, err error)
}

// forward runs the step's rows on the model. On a GreedyModel the rows
// whose next token is the argmax of the raw logits (a greedy sampler
// with no bias or penalty, no log-probabilities asked, not a beam and
// not a request whose other choices sample from the same logits) come
// back as ids; sc.greedy marks them, one entry per logits row
// (Row.LogitRows of each row; all false on another Model, whose ids are
// nil).
func (sc *scheduler) forward() ([]float32, []int32, error) {
	sc.greedy = sc.greedy[:0]
	gm := sc.gm
	if gm == nil {
		logits, err := sc.e.cfg.Model.Forward(sc.rows)
		return logits, nil, err
	}
	some := false
	for i := range sc.plan {
		p := &sc.plan[i]
		if !p.logits() {
			continue
		}
		s := p.s
		g := s.group == nil && s.choices == nil && !s.req.Logprobs && s.sampler.Greedy()
		for range 1 + p.drafts {
			sc.greedy = append(sc.greedy, g)
		}
		some = some || g
	}
	if !some {
		logits, err := gm.Forward(sc.rows)
		return logits, nil, err
	}
	return gm.ForwardGreedy(sc.rows, sc.greedy)
}

// nonFiniteID is the id a GreedyModel returns for a greedy row whose
// logits hold NaN or an infinity.
const nonFiniteID = -2

// greedyID returns the model's token for the li-th logits row when the
// row came back as one (nonFiniteID if its logits were not finite), else
// -1: its sampler draws from the row's logits.
func (sc *scheduler) greedyID(li int, ids []int32) int32 {
	if ids != nil && sc.greedy[li] {
		return ids[li]
	}
	return -1
}
