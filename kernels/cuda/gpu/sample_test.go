package gpu

import (
	"math"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/batch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/sample"
)

// TestForwardSample runs decode steps twice on the device's runner,
// through Forward and through ForwardSample over the same positions: a
// greedy row, rows drawn on the device (sample_rows) from a Sampler's
// Offload, and a row whose logits come back whole. Each drawn row's
// token must be the one a twin Sampler of the same parameters samples on
// the host from Forward's logits of the row, step after step (so the
// draw carries the PRNG's next number and the penalty state, which
// Accept moves on); the greedy row's is sample.Argmax; the whole row's
// logits are Forward's bit for bit. A draw whose bias makes its row
// infinite comes back as -2.
func TestForwardSample(t *testing.T) {
	params := []sample.Params{
		{Temperature: 0.8, Seed: 1},
		{Temperature: 1.2, MinP: 0.02, TopP: 0.9, Seed: 2},
		{Temperature: 1, TopK: 20, TopP: 0.95, Seed: 3, FrequencyPenalty: 0.6, PresencePenalty: 0.4, RepetitionPenalty: 1.2,
			LogitBias: map[int32]float32{2: 3, 5: -1}},
		{Seed: 4, PresencePenalty: 1.5, LogitBias: map[int32]float32{7: 2}}, // argmax after penalties
		{Temperature: 0.9, TopK: 12, Seed: 5},
	}
	each(t, []src.DType{src.F32, src.BF16}, func(t *testing.T, dev Device) {
		c := forwardModels[0].cfg
		c.MaxSeqLen, c.RopeTheta, c.NormEps, c.BOS, c.EOS = 256, 10000, 1e-5, -1, -1
		m := roundMatrices(t, model.Random(c, 5), dev.DType())
		const bs, blocks, steps = 8, 8, 12
		rows := len(params) + 2 // then a greedy row and one whose logits come back whole
		g, whole := len(params), len(params)+1
		r := runnerOn(t, m, dev)
		if _, err := r.NewKV(rows*blocks, bs); err != nil {
			t.Fatal(err)
		}
		tb := seqTables(rows, blocks, bs)
		var prompts [][]int32
		var prefill []batch.Row
		for i := range rows {
			p := tokens(i+1, 5+i, c.Vocab)
			prompts = append(prompts, p)
			prefill = append(prefill, batch.Row{Tokens: p, Blocks: tb[i]})
		}
		if _, err := r.Forward(prefill); err != nil {
			t.Fatal(err)
		}
		host, dv := make([]*sample.Sampler, len(params)), make([]*sample.Sampler, len(params))
		for i, p := range params {
			var err error
			if host[i], err = sample.NewFor(p, c.Vocab, prompts[i], 0); err != nil {
				t.Fatal(err)
			}
			dv[i], _ = sample.NewFor(p, c.Vocab, prompts[i], 0)
		}
		last := make([]int32, rows)
		for i := range rows {
			last[i] = prompts[i][len(prompts[i])-1]
		}
		draws := make([]*sample.Draw, rows)
		greedy := make([]bool, rows)
		greedy[g] = true
		for step := range steps {
			decode := make([]batch.Row, rows)
			for i := range rows {
				decode[i] = batch.Row{Tokens: []int32{last[i]}, Start: len(prompts[i]) + step, Blocks: tb[i], Logits: true}
			}
			want, err := r.Forward(decode)
			if err != nil {
				t.Fatal(err)
			}
			want = slices.Clone(want)
			for i := range params {
				draws[i] = new(sample.Draw)
				if !dv[i].Offload(draws[i]) {
					t.Fatalf("params %d: Offload refused", i)
				}
			}
			logits, ids, err := r.ForwardSample(decode, greedy, draws)
			if err != nil {
				t.Fatal(err)
			}
			row := func(i int) []float32 { return want[i*c.Vocab : (i+1)*c.Vocab] }
			for i := range params {
				w := host[i].Sample(row(i))
				if ids[i] != w {
					t.Fatalf("step %d row %d: device drew %d, the Sampler %d", step, i, ids[i], w)
				}
				dv[i].Accept(ids[i])
				last[i] = ids[i]
			}
			if id := sample.Argmax(row(g)); ids[g] != id {
				t.Errorf("step %d: device argmax %d, sample.Argmax %d", step, ids[g], id)
			}
			last[g] = ids[g]
			if !slices.Equal(logits[whole*c.Vocab:(whole+1)*c.Vocab], row(whole)) {
				t.Errorf("step %d: the whole row's logits differ from Forward's", step)
			}
			last[whole] = sample.Argmax(row(whole))
		}
		// A draw whose row is not finite after its bias (a value the
		// Sampler's validation refuses, so only a device check sees it).
		decode := []batch.Row{{Tokens: []int32{1}, Start: len(prompts[0]) + steps, Blocks: tb[0], Logits: true}}
		inf := &sample.Draw{Temperature: 1, U: 0.5, Entries: []sample.Entry{{Token: 3, Bias: float32(math.Inf(1))}}}
		_, ids, err := r.ForwardSample(decode, []bool{false}, []*sample.Draw{inf})
		if err != nil {
			t.Fatal(err)
		}
		if ids[0] != -2 {
			t.Errorf("a draw from an infinite row gave %d, want -2", ids[0])
		}
		// A draw the kernel's packing refuses fails the step.
		bad := &sample.Draw{Temperature: 1, U: 0.5, Entries: []sample.Entry{{Token: int32(c.Vocab)}}}
		if _, _, err := r.ForwardSample(decode, []bool{false}, []*sample.Draw{bad}); err == nil {
			t.Error("a draw naming a token beyond the vocabulary did not fail the step")
		}
	})
}

// The runner draws sampled rows on this backend.
var _ model.SamplingBackend = (*Backend)(nil)
