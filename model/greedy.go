package model

import (
	"fmt"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/sample"
)

// GreedyBackend is a Backend that picks greedy tokens where the logits
// are, so that a GPU sends back 4 bytes for a row that decodes greedily
// instead of its vocabulary of logits.
type GreedyBackend interface {
	Backend
	// LogitsGreedy is Logits, except that for each logits row i with
	// greedy[i] set (one entry per logits row) it sets ids[i]
	// to the row's sample.Argmax (or -2 where it can tell that the row
	// holds NaN or an infinity) and need not fill the row's logits. The
	// logits keep Logits' layout, a vocabulary per logits row;
	// ids has one entry per such row (those without greedy set are
	// unspecified). Both slices are the backend's, valid until the next
	// step.
	LogitsGreedy(x kernels.Buf, norm, classifier kernels.Weight, eps float32, greedy []bool) ([]float32, []int32, error)
}

// SamplingBackend is a GreedyBackend that also makes sampled rows' draws
// where the logits are (sample.Sampler's Offload describes each), so that
// such a row too sends back 4 bytes instead of its vocabulary of logits.
type SamplingBackend interface {
	GreedyBackend
	// LogitsSample is LogitsGreedy, except that for each logits row i
	// with draws[i] set (and greedy[i] not) it sets ids[i] to the token
	// that draw picks from the row's logits, or -2 where the row after
	// the draw's biases and penalties holds NaN or an infinity, and need
	// not fill the row's logits. draws is nil or has an entry per logits
	// row; greedy too.
	LogitsSample(x kernels.Buf, norm, classifier kernels.Weight, eps float32, greedy []bool, draws []*sample.Draw) ([]float32, []int32, error)
}

// ForwardGreedy is Forward for a caller that needs only the argmax of
// some rows: ForwardSample without draws.
func (r *Runner) ForwardGreedy(seqs []Seq, greedy []bool) ([]float32, []int32, error) {
	return r.ForwardSample(seqs, greedy, nil)
}

// Draws reports whether ForwardSample makes draws where the logits are
// (on a SamplingBackend): elsewhere it hands every draw back, and a
// caller gains nothing by describing them.
func (r *Runner) Draws() bool { return r.sb != nil }

// ForwardSample is Forward for a caller that needs only the argmax of
// some rows, or a sample.Draw made from them: greedy, and draws unless
// nil, have one entry per logits row (Seq.LogitRows of each sequence), in
// order.
// For each i with greedy[i], ids[i] is that row's sample.Argmax (-2 if
// the row holds NaN or an infinity, on a backend other than a
// GreedyBackend) and its logits (row i of the returned logits, in
// Forward's layout) are unspecified. For each other i with draws[i] set,
// on a SamplingBackend ids[i] is the draw's token (-2 if the row after
// its biases and penalties is not finite) and the logits are unspecified;
// on another backend ids[i] is -1 and the logits are Forward's, for the
// caller to sample. The other rows' logits are Forward's. On a
// GreedyBackend the argmax runs on the device; on another backend it
// runs here over Forward's logits. Both slices are reused by the next
// call.
func (r *Runner) ForwardSample(seqs []Seq, greedy []bool, draws []*sample.Draw) ([]float32, []int32, error) {
	n := 0
	for i := range seqs {
		n += seqs[i].LogitRows()
	}
	if len(greedy) != n || draws != nil && len(draws) != n {
		return nil, nil, fmt.Errorf("%w: %d greedy flags and %d draws for %d logits rows", ErrInvalidBatch, len(greedy), len(draws), n)
	}
	if err := r.layers(seqs); err != nil {
		return nil, nil, err
	}
	eps := r.m.Config.NormEps
	if r.sb != nil {
		return r.sb.LogitsSample(r.x, r.w.finalNorm, r.w.classifier, eps, greedy, draws)
	}
	var logits []float32
	var ids []int32
	var err error
	if r.gb != nil {
		logits, ids, err = r.gb.LogitsGreedy(r.x, r.w.finalNorm, r.w.classifier, eps, greedy)
	} else {
		logits, err = r.b.Logits(r.x, r.w.finalNorm, r.w.classifier, eps)
		ids = r.argmax(logits, greedy)
	}
	if err != nil {
		return nil, nil, err
	}
	for i := range draws {
		if draws[i] != nil && !greedy[i] {
			ids[i] = -1 // not drawn: the caller samples the logits
		}
	}
	return logits, ids, nil
}

// argmax returns the ids ForwardSample gives the greedy rows of logits
// on a backend that is not a GreedyBackend.
func (r *Runner) argmax(logits []float32, greedy []bool) []int32 {
	vocab := r.m.Config.Vocab
	r.ids = r.ids[:0]
	for i, g := range greedy {
		var id int32
		if row := logits[i*vocab : (i+1)*vocab]; g {
			id = sample.Argmax(row)
			if sample.CheckFinite(row) != nil {
				id = -2 // as engine.GreedyModel says
			}
		}
		r.ids = append(r.ids, id)
	}
	return r.ids
}
