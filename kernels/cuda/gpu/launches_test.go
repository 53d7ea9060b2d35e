package gpu

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/batch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/sample"
)

// plainBackend hides every optional capability of a Backend (fused ops,
// greedy and sampled rows on the device): the runner then runs the op
// sequence a backend without them gets, and the engine samples every
// row from logits copied back whole.
type plainBackend struct{ model.Backend }

// TestDecodeLaunches counts the kernel launches (a matrix product as
// one) and the bytes copied back of a warmed-up decode step of 8 sampled
// rows (temperature, top-p and a repetition penalty) on two 2-layer
// models, one with q/k norms, three ways: without the backend's
// capabilities (16 launches a layer, 18 with the q/k norms, and every
// row's logits back, for the host's Sampler), with the fused ops (9 a
// layer, the q/k norms inside rope_kv_append) but the logits still back,
// and with the rows drawn on the device (one sample_rows launch for the
// step, and 4 bytes a row back). Besides the layers: the embedding, the final norm and the
// classifier. It logs the kernels of each, the figures the README gives.
func TestDecodeLaunches(t *testing.T) {
	each(t, []src.DType{src.BF16}, func(t *testing.T, plain Device) {
		for _, mi := range []int{0, 2} {
			decodeLaunches(t, plain, mi)
		}
	})
}

// decodeLaunches is TestDecodeLaunches on forwardModels[mi].
func decodeLaunches(t *testing.T, plain Device, mi int) {
	m := forwardModel(mi)
	c := m.Config
	const rows, bs, blocks = 8, 8, 4
	p := sample.Params{Temperature: 0.8, TopP: 0.9, RepetitionPenalty: 1.1, Seed: 1}
	unfused := 16
	if c.Arch.QKNorm {
		unfused += 2 // the q and k head norms
	}
	for _, w := range []struct {
		name    string
		plain   bool // the Backend's capabilities hidden
		sampled bool // ForwardSample with a draw per row
		layer   int  // launches a layer
		head    int  // launches besides the layers
		back    int  // bytes copied back
	}{
		{"no fused ops, host sampling", true, false, unfused, 3, 4 * rows * c.Vocab},
		{"fused ops, host sampling", false, false, 9, 3, 4 * rows * c.Vocab},
		{"fused ops, device sampling", false, true, 9, 4, 4 * rows},
	} {
		dev := launchLog{plain, map[string]int{}}
		b := NewBackend(dev)
		var mb model.Backend = b
		if w.plain {
			mb = plainBackend{b}
		}
		r, err := model.NewRunnerOn(roundMatrices(t, m, dev.DType()), mb)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		if _, err := r.NewKV(rows*blocks, bs); err != nil {
			t.Fatal(err)
		}
		tb := seqTables(rows, blocks, bs)
		var prefill, decode []batch.Row
		for i := range rows {
			prefill = append(prefill, batch.Row{Tokens: tokens(i+1, 7, c.Vocab), Blocks: tb[i], Logits: true})
			decode = append(decode, batch.Row{Tokens: tokens(i+20, 1, c.Vocab), Start: 7, Blocks: tb[i], Logits: true})
		}
		if _, err := r.Forward(prefill); err != nil {
			t.Fatal(err)
		}
		draws := make([]*sample.Draw, rows)
		for i := range draws {
			s, err := sample.NewFor(p, c.Vocab, prefill[i].Tokens, 0)
			if err != nil {
				t.Fatal(err)
			}
			draws[i] = new(sample.Draw)
			s.Offload(draws[i])
		}
		step := func() error {
			clear(dev.kernels)
			if w.sampled {
				_, _, err := r.ForwardSample(decode, make([]bool, rows), draws)
				return err
			}
			_, err := r.Forward(decode)
			return err
		}
		// The second run over the same positions, warmed up.
		if err := errors.Join(step(), step()); err != nil {
			t.Fatal(err)
		}
		n, back := 0, dev.kernels["bytes back"]
		delete(dev.kernels, "bytes back")
		var names []string
		for _, k := range slices.Sorted(maps.Keys(dev.kernels)) {
			n += dev.kernels[k]
			names = append(names, fmt.Sprintf("%s %d", k, dev.kernels[k]))
		}
		t.Logf("%s, %s: %d launches (%s), %d bytes back", forwardModels[mi].name, w.name, n, strings.Join(names, ", "), back)
		if want := w.layer*c.Layers + w.head; n != want || back != w.back {
			t.Errorf("%s: %d launches and %d bytes back, want %d and %d", w.name, n, back, want, w.back)
		}

	}
}
