package gpu

import (
	"slices"
	"testing"

	"github.com/prefixd/prefixd/batch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/sample"
)

// TestForwardGreedy runs each step twice on the device's runner, through
// Forward and through ForwardGreedy with some rows marked greedy (none,
// some, all), over the same positions (the second pass rewrites the same
// K/V): each marked row's id, picked on the device, is sample.Argmax of
// the row's logits from Forward, and each unmarked row's logits are
// Forward's, bit for bit, though they came back in runs beside rows that
// sent only their id.
func TestForwardGreedy(t *testing.T) {
	each(t, []src.DType{src.F32, src.BF16}, func(t *testing.T, dev Device) {
		r, c, tb := fourSequences(t, dev)
		prefill := []batch.Row{{Tokens: tokens(1, 11, c.Vocab), Blocks: tb[0], Logits: true},
			{Tokens: tokens(2, 6, c.Vocab), Blocks: tb[1]},
			{Tokens: tokens(3, 9, c.Vocab), Blocks: tb[2], Logits: true},
			{Tokens: tokens(4, 3, c.Vocab), Blocks: tb[3], Logits: true}}
		decode := []batch.Row{{Tokens: tokens(5, 1, c.Vocab), Start: 11, Blocks: tb[0], Logits: true},
			{Tokens: tokens(6, 1, c.Vocab), Start: 6, Blocks: tb[1], Logits: true},
			{Tokens: tokens(7, 1, c.Vocab), Start: 9, Blocks: tb[2], Logits: true},
			{Tokens: tokens(8, 1, c.Vocab), Start: 3, Blocks: tb[3], Logits: true}}
		// A verify row of speculative decoding: an entry per logits row.
		verify := []batch.Row{{Tokens: tokens(9, 4, c.Vocab), Start: 12, Blocks: tb[0], Logits: true, Drafts: 3},
			{Tokens: tokens(10, 1, c.Vocab), Start: 7, Blocks: tb[1], Logits: true}}
		for _, st := range []struct {
			rows   []batch.Row
			greedy []bool
		}{
			{prefill, []bool{true, false, true}},
			{decode, []bool{false, true, true, false}},
			{decode, []bool{true, true, true, true}},
			{decode, []bool{false, false, false, false}},
			{verify, []bool{true, false, true, true, false}},
		} {
			want, err := r.Forward(st.rows)
			if err != nil {
				t.Fatal(err)
			}
			want = slices.Clone(want)
			logits, ids, err := r.ForwardGreedy(st.rows, st.greedy)
			if err != nil {
				t.Fatal(err)
			}
			for i, g := range st.greedy {
				row := want[i*c.Vocab : (i+1)*c.Vocab]
				if g {
					if id := sample.Argmax(row); ids[i] != id {
						t.Errorf("greedy %v row %d: device argmax %d, sample.Argmax %d", st.greedy, i, ids[i], id)
					}
				} else if !slices.Equal(logits[i*c.Vocab:(i+1)*c.Vocab], row) {
					t.Errorf("greedy %v row %d: logits differ from Forward's", st.greedy, i)
				}
			}
		}
		if _, _, err := r.ForwardGreedy(decode, []bool{true}); err == nil {
			t.Error("ForwardGreedy took one flag for four rows that want logits")
		}
	})
}

// The runner's optional capabilities this backend has: greedy rows'
// argmax on the device, and the fused ops that save launches.
var (
	_ model.GreedyBackend = (*Backend)(nil)
	_ model.FusedBackend  = (*Backend)(nil)
)
