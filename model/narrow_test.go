package model

import (
	"testing"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/cpu"
)

// wideBackend is a Backend that never narrows: the last layer runs on
// every token row, as it did before Narrow, the reference for it.
type wideBackend struct{ Backend }

func (wideBackend) Narrow(...kernels.Buf) {}

// TestNarrowingKeepsLogits runs one batch (a prompt that wants logits, one
// that does not, and a decode) through a runner that narrows the last
// layer to the rows wanting logits and one that does not. The logits must
// agree, on float32 weights and on Q4_K, within float32 rounding: the
// kernels a product takes, and so its summation order, depend on its row
// count.
func TestNarrowingKeepsLogits(t *testing.T) {
	q4k, err := Load(writeGGUF(t, Random(quantConfig, 81), ggufFile{arch: "llama", types: func(string) kernels.DType { return kernels.Q4_K }}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q4k.Close() })
	for name, m := range map[string]*Model{"F32": Builtin(), "Q4_K": q4k} {
		t.Run(name, func(t *testing.T) {
			var got [2][]float32
			for i, wrap := range []func(Backend) Backend{
				func(b Backend) Backend { return b },
				func(b Backend) Backend { return wideBackend{b} },
			} {
				got[i] = narrowBatch(t, m, wrap)
			}
			v := m.Config.Vocab
			if len(got[0]) != 2*v || len(got[1]) != 2*v {
				t.Fatalf("%d and %d logits, want 2 rows of %d", len(got[0]), len(got[1]), v)
			}
			if d := maxDiff32(got[0], got[1]); d > 1e-5 {
				t.Fatalf("narrowed vs every row: max difference %g", d)
			}
		})
	}
}

// narrowBatch runs the test's batch on m through a CPU backend wrapped by
// wrap and returns its logits.
func narrowBatch(t *testing.T, m *Model, wrap func(Backend) Backend) []float32 {
	w := cpu.NewWorkers(2)
	t.Cleanup(w.Close)
	r, err := NewRunnerOn(m, wrap(cpu.NewBackend(w)))
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.NewKV(16, 4)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := blockstore.New(blockstore.Config{NumBlocks: 16, BlockSize: 4, Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := pool.NewTable(), pool.NewTable(), pool.NewTable()
	if err := c.Append(3); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Forward([]Seq{{Tokens: []int32{1, 60, 7}, Blocks: c.Blocks()}}); err != nil {
		t.Fatal(err)
	}
	for tb, n := range map[*blockstore.Table]int{a: 9, b: 5, c: 1} {
		if err := tb.Append(n); err != nil {
			t.Fatal(err)
		}
	}
	logits, err := r.Forward([]Seq{
		{Tokens: []int32{5, 17, 33, 2, 8, 13, 21, 34, 55}, Blocks: a.Blocks(), Logits: true},
		{Tokens: []int32{9, 4, 61, 3, 12}, Blocks: b.Blocks()},
		{Tokens: []int32{44}, Start: 3, Blocks: c.Blocks(), Logits: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), logits...)
}
