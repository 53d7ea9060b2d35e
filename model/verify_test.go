package model

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/sample"
)

// TestDraftLogitsMatchSteps checks the logits of a speculative decoding
// row (Seq.Drafts): one row [t0, d1..dk] must give, at each of its k+1
// positions, the logits that feeding the same tokens one step at a time
// gives, within the rounding of the kernels (a product's summation order
// depends on its row count: float32 on stories260K, the trained model;
// on a random Q8_0 GGUF, genmodel's type, the integer kernels of 1, 2, 4
// and 8 rows sum a row's blocks in different orders, and the next
// product's 8-bit activations turn those last-bit differences into whole
// quantization steps: a prompt prefilled at once differs from the same
// tokens fed one at a time by 0.8% of the largest logit too). The row runs beside a prefill chunk that wants no logits and a
// decode, so Narrow packs rows from the middle of the step; ForwardGreedy's
// ids must be the argmax of each position's logits in the same batch.
func TestDraftLogitsMatchSteps(t *testing.T) {
	for _, tc := range []struct {
		name   string
		load   func(t *testing.T) *Model
		prompt []int32
		drafts []int32
		tol    float64 // of the largest logit
	}{
		{"stories260K", func(t *testing.T) *Model {
			m, err := Load(sharedModel(t, "stories260K.bin"))
			if err != nil {
				t.Fatal(err)
			}
			return m
		}, []int32{1, 403, 407, 261, 378, 375, 280}, []int32{291, 260, 306, 41, 7}, 2e-5},
		{"Q8_0", func(t *testing.T) *Model {
			m, err := Load(writeGGUF(t, Random(quantConfig, 29), ggufFile{arch: "llama", types: func(string) kernels.DType { return kernels.Q8_0 }}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			return m
		}, []int32{3, 9, 27, 17, 50, 2, 44, 61, 8}, []int32{12, 12, 40, 5}, 2e-2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.load(t)
			v := m.Config.Vocab
			h := newHarness(t, m, 24, 4)
			k := len(tc.drafts)
			row := append([]int32{tc.drafts[0] ^ 1}, tc.drafts...)[:k+1] // t0, d1..dk

			// One token at a time.
			step := h.pool.NewTable()
			h.prefill(t, step, tc.prompt)
			var want [][]float32
			for _, tok := range row {
				want = append(want, h.prefill(t, step, []int32{tok}))
			}

			// One verify row, between a prefill chunk and a decode.
			verify, other, dec := h.pool.NewTable(), h.pool.NewTable(), h.pool.NewTable()
			h.prefill(t, verify, tc.prompt)
			h.prefill(t, dec, tc.prompt[:3])
			start := verify.Len()
			if err := errors.Join(verify.Append(k+1), other.Append(6), dec.Append(1)); err != nil {
				t.Fatal(err)
			}
			seqs := []Seq{
				{Tokens: tc.prompt[:6], Blocks: other.Blocks()},
				{Tokens: row, Start: start, Blocks: verify.Blocks(), Logits: true, Drafts: k},
				{Tokens: tc.prompt[3:4], Start: 3, Blocks: dec.Blocks(), Logits: true},
			}
			wide, _, err := h.r.ForwardGreedy(seqs, make([]bool, k+2))
			if err != nil {
				t.Fatal(err)
			}
			if len(wide) != (k+2)*v {
				t.Fatalf("%d logits for %d logits rows of %d", len(wide), k+2, v)
			}
			wide = slices.Clone(wide)
			for i := range k + 1 {
				if d, top := maxDiff32(wide[i*v:(i+1)*v], want[i]), largest(want[i]); d > tc.tol*top {
					t.Fatalf("position %d: logits differ by %g (largest %g)", i, d, top)
				}
			}
			greedy := make([]bool, k+2)
			for i := range greedy {
				greedy[i] = i%2 == 0
			}
			logits, ids, err := h.r.ForwardGreedy(seqs, greedy)
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != k+2 {
				t.Fatalf("%d ids for %d logits rows", len(ids), k+2)
			}
			for i, g := range greedy {
				row := wide[i*v : (i+1)*v]
				if g {
					if got, w := ids[i], sample.Argmax(row); got != w {
						t.Fatalf("logits row %d: device argmax %d, of its logits %d", i, got, w)
					}
				} else if d := maxDiff32(logits[i*v:(i+1)*v], row); d != 0 {
					t.Fatalf("logits row %d: greedy neighbours changed its logits by %g", i, d)
				}
			}

			// The same row through Forward, alone: every position's logits.
			again := h.pool.NewTable()
			h.prefill(t, again, tc.prompt)
			if err := again.Append(k + 1); err != nil {
				t.Fatal(err)
			}
			logits, err = h.r.Forward([]Seq{{Tokens: row, Start: start, Blocks: again.Blocks(), Logits: true, Drafts: k}})
			if err != nil {
				t.Fatal(err)
			}
			if len(logits) != (k+1)*v {
				t.Fatalf("%d logits, want %d rows of %d", len(logits), k+1, v)
			}
			for i := range k + 1 {
				if d, top := maxDiff32(logits[i*v:(i+1)*v], want[i]), largest(want[i]); d > tc.tol*top {
					t.Fatalf("alone, position %d: logits differ by %g (largest %g)", i, d, top)
				}
			}
		})
	}
}

// largest is the largest magnitude in x.
func largest(x []float32) float64 {
	top := 0.0
	for _, w := range x {
		top = math.Max(top, math.Abs(float64(w)))
	}
	return top
}

// TestDraftRowsValidated: a row cannot ask for more draft logits than it
// has tokens before its last, nor for drafts without logits.
func TestDraftRowsValidated(t *testing.T) {
	h := newHarness(t, Builtin(), 4, 4)
	tb := h.pool.NewTable()
	if err := tb.Append(3); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Seq{
		{Tokens: []int32{1, 2, 3}, Blocks: tb.Blocks(), Logits: true, Drafts: 3},
		{Tokens: []int32{1, 2, 3}, Blocks: tb.Blocks(), Logits: true, Drafts: -1},
		{Tokens: []int32{1, 2, 3}, Blocks: tb.Blocks(), Drafts: 1},
	} {
		if _, err := h.r.Forward([]Seq{s}); !errors.Is(err, ErrInvalidBatch) {
			t.Errorf("Drafts %d, logits %v: err %v, want ErrInvalidBatch", s.Drafts, s.Logits, err)
		}
	}
	if _, err := h.r.Forward([]Seq{{Tokens: []int32{1, 2, 3}, Blocks: tb.Blocks(), Logits: true, Drafts: 2}}); err != nil {
		t.Fatal(err)
	}
}
