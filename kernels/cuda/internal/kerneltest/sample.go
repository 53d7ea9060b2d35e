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
// which tokens are kept), except under top-k alone, where the device walks the kept
// tokens most likely first and the Sampler in its quickselect's order:
// there the device token must be a most-likely-first walk's (a reference
// here) and the Sampler's kept tokens the same k. A row whose logits are
// not finite gives -1.
func Sampling(t *testing.T, e *Env) {
	const vocab, steps = 700, 10
	cases := []struct {
		name  string
		p     sample.Params
		exact bool
		focus bool // only the tokens with a bias or a penalty are likely: each one moves the draw
	}{
		{"temperature", sample.Params{Temperature: 0.8, Seed: 1}, true, false},
		{"min-p", sample.Params{Temperature: 1.3, MinP: 0.05, Seed: 2}, true, false},
		{"top-p", sample.Params{Temperature: 0.9, TopP: 0.9, Seed: 3}, true, false},
		{"top-k and top-p", sample.Params{Temperature: 1.1, TopK: 40, TopP: 0.8, Seed: 4}, true, false},
		{"penalties and biases", sample.Params{Temperature: 0.7, FrequencyPenalty: 0.5, PresencePenalty: 1.5,
			RepetitionPenalty: 1.3, LogitBias: map[int32]float32{5: 3, 9: -2, 650: 10}, Seed: 5}, true, false},
		{"penalties focused", sample.Params{Temperature: 1.5, FrequencyPenalty: 0.7, PresencePenalty: 0.9,
			RepetitionPenalty: 1.8, LogitBias: map[int32]float32{5: 1, 9: -1}, Seed: 8}, true, true},
		{"greedy with penalties", sample.Params{RepetitionPenalty: 1.5, FrequencyPenalty: 1, PresencePenalty: 2,
			LogitBias: map[int32]float32{17: 2.5}, Seed: 6}, true, true},
		{"top-k", sample.Params{Temperature: 1, TopK: 25, Seed: 7}, false, false},
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
		var ref []int32 // the most-likely-first walk, for the inexact cases
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
			if !c.exact {
				ref = append(ref, walkSorted(row, c.p, r.U))
				_, lp := samplers[i].Logprobs(c.p.TopK, nil)
				checkTopK(t, c.name, row, c.p, lp)
			}
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
		k := 0
		for i, c := range cases {
			w := want[i]
			if !c.exact {
				w, k = ref[k], k+1
			}
			if got[i] != w {
				t.Errorf("step %d, %s: token %d, want %d", step, c.name, got[i], w)
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

// numerators returns the Sampler's softmax numerators of row (no biases
// or penalties) at p's temperature, most likely first, lower ID first on
// ties, cut to p.TopK.
func numerators(row []float32, p sample.Params) []sample.TokenLogprob {
	hi := float64(row[sample.Argmax(row)])
	c := make([]sample.TokenLogprob, len(row))
	for i, l := range row {
		c[i] = sample.TokenLogprob{ID: int32(i), Logprob: float32(math.Exp((float64(l) - hi) / float64(p.Temperature)))}
	}
	slices.SortFunc(c, func(a, b sample.TokenLogprob) int {
		if x := cmp.Compare(b.Logprob, a.Logprob); x != 0 {
			return x
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return c[:p.TopK]
}

// walkSorted is the reference for top-k alone: the first token, most
// likely first, whose running mass exceeds u times the kept total.
func walkSorted(row []float32, p sample.Params, u float64) int32 {
	c := numerators(row, p)
	total := 0.0
	for _, x := range c {
		total += float64(x.Logprob)
	}
	left := u * total
	for _, x := range c {
		left -= float64(x.Logprob)
		if left < 0 {
			return x.ID
		}
	}
	return c[len(c)-1].ID
}

// checkTopK checks that the Sampler kept the same k tokens as the
// reference, with the same probabilities.
func checkTopK(t *testing.T, name string, row []float32, p sample.Params, lp []sample.TokenLogprob) {
	t.Helper()
	c := numerators(row, p)
	total := 0.0
	for _, x := range c {
		total += float64(x.Logprob)
	}
	if len(lp) != len(c) {
		t.Fatalf("%s: the Sampler kept %d tokens, want %d", name, len(lp), len(c))
	}
	for i, x := range c {
		want := math.Log(float64(x.Logprob) / total)
		if lp[i].ID != x.ID || math.Abs(float64(lp[i].Logprob)-want) > 1e-5 {
			t.Errorf("%s: kept token %d is %d (log-probability %g), want %d (%g)", name, i, lp[i].ID, lp[i].Logprob, x.ID, want)
		}
	}
}
