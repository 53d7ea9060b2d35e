package gpu

import (
	"math"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/batch"
	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels/cuda/src"
	"github.com/prefixd/prefixd/model"
)

// TestForwardRepeats runs the same steps several times over the same
// positions (each run rewriting the same K/V): the device's kernels and
// products are deterministic, so every run's logits are the first run's,
// bit for bit, with and without rows that want no logits (Narrow's
// gathers), and with greedy flags that send some rows back whole.
func TestForwardRepeats(t *testing.T) {
	each(t, []src.DType{src.F32, src.BF16}, func(t *testing.T, dev Device) {
		r, c, tb := fourSequences(t, dev)
		all := []batch.Row{{Tokens: tokens(1, 11, c.Vocab), Blocks: tb[0], Logits: true},
			{Tokens: tokens(2, 6, c.Vocab), Blocks: tb[1], Logits: true},
			{Tokens: tokens(3, 9, c.Vocab), Blocks: tb[2], Logits: true},
			{Tokens: tokens(4, 3, c.Vocab), Blocks: tb[3], Logits: true}}
		some := slices.Clone(all)
		some[1].Logits = false
		for _, st := range []struct {
			name string
			rows []batch.Row
		}{{"all rows", all}, {"some rows", some}} {
			var first []float32
			for run := range 4 {
				var got []float32
				var err error
				if run == 3 {
					got, _, err = r.ForwardGreedy(st.rows, make([]bool, countLogits(st.rows)))
				} else {
					got, err = r.Forward(st.rows)
				}
				if err != nil {
					t.Fatal(err)
				}
				if run == 0 {
					first = slices.Clone(got)
					continue
				}
				for i := range len(first) / c.Vocab {
					a, b := first[i*c.Vocab:(i+1)*c.Vocab], got[i*c.Vocab:(i+1)*c.Vocab]
					if !slices.Equal(a, b) {
						t.Errorf("%s, run %d: logits row %d differs from run 0's by up to %g", st.name, run, i, maxDiff(a, b))
					}
				}
			}
		}
	})
}

// fourSequences returns a runner on dev for forwardModels[0] (random
// weights, rounded to dev's type), its configuration, and block tables of
// 8 blocks of 8 slots for four sequences, none sharing a block with
// another: a prefill of all four from position 0 writes distinct slots
// (seqTables' sequence 2 shares sequence 0's first blocks, a cached
// prefix: written twice in one step, a race on a GPU).
func fourSequences(t *testing.T, dev Device) (*model.Runner, model.Config, [][]blockstore.BlockID) {
	c := forwardModels[0].cfg
	c.MaxSeqLen, c.RopeTheta, c.NormEps, c.BOS, c.EOS = 256, 10000, 1e-5, -1, -1
	r := runnerOn(t, roundMatrices(t, model.Random(c, 5), dev.DType()), dev)
	const bs, blocks = 8, 8
	if _, err := r.NewKV(5*blocks, bs); err != nil {
		t.Fatal(err)
	}
	tb := seqTables(5, blocks, bs)
	tb[2] = tb[4]
	return r, c, tb[:4]
}

// countLogits returns the logits rows of a step.
func countLogits(rows []batch.Row) int {
	n := 0
	for _, r := range rows {
		n += r.LogitRows()
	}
	return n
}

// maxDiff returns the largest |a[i] - b[i]|.
func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}
