package engine

import "github.com/prefixd/prefixd/sample"

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

// SamplingModel is a GreedyModel that can also make a sampled row's draw
// where the logits are (model.Runner implements it; Draws says whether
// its backend does), so that on a GPU such a row too sends back 4 bytes.
type SamplingModel interface {
	GreedyModel
	// Draws reports whether ForwardSample draws: if not, the engine
	// does not describe draws to it.
	Draws() bool
	// ForwardSample is ForwardGreedy, except that draws too has one
	// entry per row that asks for logits: for each i with draws[i] set
	// (and greedy[i] not), ids[i] is the token the draw picked (-2 if the
	// row after the draw's biases and penalties held NaN or an infinity)
	// and the logits row is unspecified, or -1 if the model did not draw,
	// whose logits row is then Forward's.
	ForwardSample(rows []Row, greedy []bool, draws []*sample.Draw) (logits []float32, ids []int32, err error)
}

// forward runs the step's rows on the model. On a GreedyModel the rows
// whose next token is the argmax of the raw logits (a greedy sampler
// with no bias or penalty, no log-probabilities asked, not a beam and
// not a request whose other choices sample from the same logits) come
// back as ids; sc.greedy marks them, one entry per logits row
// (Row.LogitRows of each row; all false on another Model, whose ids are
// nil). On a SamplingModel that draws, each other such row that is not a
// speculative verify row and whose sampler can Offload its draw goes to
// the model too (sc.draws), and sampleNext Accepts the model's token.
func (sc *scheduler) forward() ([]float32, []int32, error) {
	sc.greedy, sc.draws = sc.greedy[:0], sc.draws[:0]
	gm := sc.gm
	if gm == nil {
		logits, err := sc.e.cfg.Model.Forward(sc.rows)
		return logits, nil, err
	}
	if sc.sm != nil && len(sc.drawBuf) < len(sc.plan) {
		sc.drawBuf = make([]sample.Draw, len(sc.plan)) // a draw at most per item; rare after warm-up
	}
	some, drawn, k := false, false, 0
	for i := range sc.plan {
		p := &sc.plan[i]
		if !p.logits() {
			continue
		}
		s := p.s
		whole := s.group == nil && s.choices == nil && !s.req.Logprobs
		g := whole && s.sampler.Greedy()
		var d *sample.Draw
		if sc.sm != nil && whole && !g && p.drafts == 0 {
			if d, k = &sc.drawBuf[k], k+1; !s.sampler.Offload(d) {
				d = nil
			}
		}
		for range 1 + p.drafts {
			sc.greedy, sc.draws = append(sc.greedy, g), append(sc.draws, d)
		}
		some, drawn = some || g, drawn || d != nil
	}
	switch {
	case drawn:
		return sc.sm.ForwardSample(sc.rows, sc.greedy, sc.draws)
	case some:
		return gm.ForwardGreedy(sc.rows, sc.greedy)
	}
	logits, err := gm.Forward(sc.rows)
	return logits, nil, err
}

// nonFiniteID is the id a GreedyModel returns for a greedy row whose
// logits hold NaN or an infinity.
const nonFiniteID = -2

// greedyID returns the model's token for the li-th logits row when the
// row came back as one, its argmax or its draw (nonFiniteID if its logits
// were not finite), else -1: its sampler draws from the row's logits.
func (sc *scheduler) greedyID(li int, ids []int32) int32 {
	if ids != nil && (sc.greedy[li] || sc.draws[li] != nil) {
		return ids[li]
	}
	return -1
}
