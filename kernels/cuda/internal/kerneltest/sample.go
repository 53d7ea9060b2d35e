package kerneltest

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/sample"
)

// samplerStream is the PCG stream sample.NewFor gives stream 0: the test
// replays the Sampler's draws with it, as the host hands them to the
// device.
const samplerStream = 0x9e3779b97f4a7c15

// Sampling runs sample.Sampler and sample_rows side by side over several
// steps of random logits, one row per parameter set in each launch, the
// penalties seeing the tokens drawn so far and a prompt: each device
// token must be the Sampler's, given the draw the Sampler made (its PRNG
// replayed; under top-k the logits are whole halves, so that ties decide
// which tokens are kept and in which order they are walked). A row whose
// logits are not finite gives -1.
func Sampling(t *testing.T, e *Env) {
	const vocab, steps = 700, 10
	cases := []struct {
		name  string
		p     sample.Params
		focus bool // only the tokens with a bias or a penalty are likely: each one moves the draw
		// sparse: only the prompt's tokens and those drawn have numerators
		// that do not underflow to 0, and they are alike.
		sparse bool
	}{
		{"temperature", sample.Params{Temperature: 0.8, Seed: 1}, false, false},
		{"min-p", sample.Params{Temperature: 1.3, MinP: 0.05, Seed: 2}, false, false},
		{"top-p", sample.Params{Temperature: 0.9, TopP: 0.9, Seed: 3}, false, false},
		{"top-k and top-p", sample.Params{Temperature: 1.1, TopK: 40, TopP: 0.8, Seed: 4}, false, false},
		{"penalties and biases", sample.Params{Temperature: 0.7, FrequencyPenalty: 0.5, PresencePenalty: 1.5,
			RepetitionPenalty: 1.3, LogitBias: map[int32]float32{5: 3, 9: -2, 650: 10}, Seed: 5}, false, false},
		{"penalties focused", sample.Params{Temperature: 1.5, FrequencyPenalty: 0.7, PresencePenalty: 0.9,
			RepetitionPenalty: 1.8, LogitBias: map[int32]float32{5: 1, 9: -1}, Seed: 8}, true, false},
		{"greedy with penalties", sample.Params{RepetitionPenalty: 1.5, FrequencyPenalty: 1, PresencePenalty: 2,
			LogitBias: map[int32]float32{17: 2.5}, Seed: 6}, true, false},
		{"top-k", sample.Params{Temperature: 1, TopK: 25, Seed: 7}, false, false},
		// Fewer numerators above 0 than top-k keeps: the Sampler still
		// keeps 25 candidates and walks them most likely first.
		{"top-k underflow", sample.Params{Temperature: 1, TopK: 25, Seed: 9}, false, true},
		// Top-k keeping more than min-p does: no cut, a walk in token order.
		{"top-k beyond min-p", sample.Params{Temperature: 1, TopK: 400, MinP: 0.02, Seed: 10}, false, false},
	}
	prompt := []int32{3, 17, 17, 250, 699}
	samplers := make([]*sample.Sampler, len(cases))
	draws := make([]*rand.Rand, len(cases))
	counts := make([]map[int32]int32, len(cases))
	for i, c := range cases {
		s, err := sample.NewFor(c.p, vocab, prompt, 0)
		if err != nil {
			t.Fatal(err)
		}
		samplers[i], draws[i], counts[i] = s, rand.New(rand.NewPCG(c.p.Seed, samplerStream)), map[int32]int32{}
	}
	for step := range steps {
		var sb launch.SampleBuilder
		var logits []float32
		want := make([]int32, len(cases))
		for i, c := range cases {
			row := e.randF32(vocab)
			for j := range row {
				row[j] *= 6 // peaks enough for min-p and top-p to cut
			}
			// The prompt's tokens and those drawn so far among the most
			// likely, where each penalty moves the draw.
			for _, tok := range prompt {
				row[tok] += 4
			}
			for tok := range counts[i] {
				row[tok] += 6
			}
			for j := range row {
				_, biased := c.p.LogitBias[int32(j)]
				switch {
				case c.sparse && !slices.Contains(prompt, int32(j)) && counts[i][int32(j)] == 0:
					row[j] = -200
				case c.sparse:
					row[j] /= 4
				case c.focus && !biased && !slices.Contains(prompt, int32(j)) && counts[i][int32(j)] == 0:
					row[j] = -30
				case c.focus:
					row[j] -= 6 // mostly negative: the repetition penalty multiplies them
				case c.p.TopK > 0:
					// Whole halves: tied numerators, which top-k and
					// top-p keep lower ID first.
					row[j] = float32(math.Round(float64(row[j])*2) / 2)
				}
			}
			logits = append(logits, row...)
			r := launch.SampleRow{Row: i, Draw: sample.Draw{Temperature: c.p.Temperature, TopK: c.p.TopK, TopP: c.p.TopP,
				MinP: c.p.MinP, Frequency: c.p.FrequencyPenalty, Presence: c.p.PresencePenalty, Repetition: c.p.RepetitionPenalty,
				Entries: entries(c.p.LogitBias, counts[i], prompt)}}
			if c.p.Temperature > 0 {
				r.U = draws[i].Float64()
			}
			if err := sb.Add(r, vocab); err != nil {
				t.Fatal(err)
			}
			want[i] = samplers[i].Sample(row)
			counts[i][want[i]]++
		}
		// A row that is not finite.
		nan := e.randF32(vocab)
		nan[123] = float32(math.NaN())
		logits = append(logits, nan...)
		if err := sb.Add(launch.SampleRow{Row: len(cases), Draw: sample.Draw{Temperature: 1, U: 0.5}}, vocab); err != nil {
			t.Fatal(err)
		}
		out := e.alloc(4 * sb.Rows())
		e.launch(launch.Sample(e.d, out, e.floats(logits), e.ints(sb.Packed()), &sb, vocab))
		got := e.readInts(out, sb.Rows())
		for i, c := range cases {
			if got[i] != want[i] {
				t.Errorf("step %d, %s: token %d, want %d", step, c.name, got[i], want[i])
			}
		}
		if got[len(cases)] != -1 {
			t.Errorf("step %d: a row holding NaN gave %d, want -1", step, got[len(cases)])
		}
	}
}

// entries lists the tokens with a bias, an output count or a place in the
// prompt, once each.
func entries(bias map[int32]float32, counts map[int32]int32, prompt []int32) []sample.Entry {
	m := map[int32]*sample.Entry{}
	get := func(tok int32) *sample.Entry {
		if m[tok] == nil {
			m[tok] = &sample.Entry{Token: tok}
		}
		return m[tok]
	}
	for tok, b := range bias {
		get(tok).Bias = b
	}
	for tok, c := range counts {
		get(tok).Count = c
	}
	for _, tok := range prompt {
		get(tok).InPrompt = true
	}
	var out []sample.Entry
	for _, en := range m {
		out = append(out, *en)
	}
	slices.SortFunc(out, func(a, b sample.Entry) int { return cmp.Compare(a.Token, b.Token) })
	return out
}
