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
	// to the row's sample.Argmax and need not fill the row's logits. The
	// logits keep Logits' layout, a vocabulary per logits row;
	// ids has one entry per such row (those without greedy set are
	// unspecified). Both slices are the backend's, valid until the next
	// step.
	LogitsGreedy(x kernels.Buf, norm, classifier kernels.Weight, eps float32, greedy []bool) ([]float32, []int32, error)
}

// ForwardGreedy is Forward for a caller that needs only the argmax of
// some rows: greedy has one entry per logits row (Seq.LogitRows of each
// sequence), in order.
// For each i with greedy[i], ids[i] is that row's sample.Argmax (-2 if
// the row holds NaN or an infinity, on a backend other than a
// GreedyBackend) and its logits (row i of the returned logits, in
// Forward's layout) are unspecified; the other rows' logits are Forward's. On a GreedyBackend
// the argmax runs on the device; on another backend it runs here over
// Forward's logits. Both slices are reused by the next call.
func (r *Runner) ForwardGreedy(seqs []Seq, greedy []bool) ([]float32, []int32, error) {
	n := 0
	for i := range seqs {
		n += seqs[i].LogitRows()
	}
	if len(greedy) != n {
		return nil, nil, fmt.Errorf("%w: %d greedy flags for %d logits rows", ErrInvalidBatch, len(greedy), n)
	}
	if err := r.layers(seqs); err != nil {
		return nil, nil, err
	}
	eps := r.m.Config.NormEps
	if r.gb != nil {
		return r.gb.LogitsGreedy(r.x, r.w.finalNorm, r.w.classifier, eps, greedy)
	}
	logits, err := r.b.Logits(r.x, r.w.finalNorm, r.w.classifier, eps)
	if err != nil {
		return nil, nil, err
	}
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
	return logits, r.ids, nil
}
