package sample

import (
	"math"
	"slices"
	"testing"
)

// greedyRun samples n tokens greedily from the same logits row.
func greedyRun(t *testing.T, p Params, prompt []int32, logits []float32, n int) []int32 {
	t.Helper()
	s, err := NewFor(p, len(logits), prompt, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for range n {
		out = append(out, s.Sample(logits))
	}
	return out
}

// TestPenaltiesAndBias: each rewrite of the logits changes the argmax the
// way its definition, worked by hand in each case, says.
func TestPenaltiesAndBias(t *testing.T) {
	cases := []struct {
		name   string
		p      Params
		prompt []int32
		logits []float32
		want   []int32
	}{
		{"none", Params{}, nil, []float32{2, 1.9, 0.5}, []int32{0, 0, 0}},
		// 2 - 0.15·1 = 1.85 < 1.9: the second token moves to 1; then
		// 1.9 - 0.15 = 1.75 < 1.85: back to 0; then 2 - 0.30 = 1.70 < 1.75.
		{"frequency", Params{FrequencyPenalty: 0.15}, nil, []float32{2, 1.9, 0.5}, []int32{0, 1, 0, 1}},
		// 2 - 0.2 = 1.8 < 1.9; then both seen: 1.8 > 1.7 for good.
		{"presence", Params{PresencePenalty: 0.2}, nil, []float32{2, 1.9, 0.5}, []int32{0, 1, 0, 0}},
		// A negative penalty favours what was said: 1.9 never catches up.
		{"negative frequency", Params{FrequencyPenalty: -0.5}, nil, []float32{2, 1.9, 0.5}, []int32{0, 0, 0}},
		// Token 0 is in the prompt: 2/1.5 = 1.33 < 1.5; once 1 is said too,
		// 1.5/1.5 = 1 < 1.33. The penalty does not grow with repeats.
		{"repetition of the prompt", Params{RepetitionPenalty: 1.5}, []int32{0}, []float32{2, 1.5}, []int32{1, 0, 0}},
		// Negative logits are multiplied: -1·1.5 = -1.5 < -1.2; then
		// -1.2·1.5 = -1.8 < -1.5.
		{"repetition, negative logit", Params{RepetitionPenalty: 1.5}, []int32{0}, []float32{-1, -1.2}, []int32{1, 0, 0}},
		// The output counts too: 3/1.5 = 2 < 2.5, then 2.5/1.5 = 1.67 < 2.
		{"repetition of the output", Params{RepetitionPenalty: 1.5}, nil, []float32{3, 2.5, 0}, []int32{0, 1, 0}},
		{"bias up", Params{LogitBias: map[int32]float32{0: 5}}, nil, []float32{1, 2, 3}, []int32{0, 0}},
		{"bias ban", Params{LogitBias: map[int32]float32{2: -100}}, nil, []float32{1, 2, 3}, []int32{1, 1}},
		{"bias beyond the row", Params{LogitBias: map[int32]float32{9: 100}}, nil, []float32{1, 2, 3}, []int32{2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := greedyRun(t, c.p, c.prompt, c.logits, len(c.want)); !slices.Equal(got, c.want) {
				t.Fatalf("tokens %v, want %v", got, c.want)
			}
		})
	}
}

// logSoftmax is the reference: float64 log-softmax of logits/temp.
func logSoftmax(logits []float64, temp float64) []float64 {
	hi := math.Inf(-1)
	for _, l := range logits {
		hi = math.Max(hi, l/temp)
	}
	z := 0.0
	for _, l := range logits {
		z += math.Exp(l/temp - hi)
	}
	out := make([]float64, len(logits))
	for i, l := range logits {
		out[i] = l/temp - hi - math.Log(z)
	}
	return out
}

// TestLogprobs checks the reported log-probabilities against a float64
// log-softmax of the distribution each configuration samples from.
func TestLogprobs(t *testing.T) {
	raw := make([]float32, 1000)
	for i := range raw {
		raw[i] = float32(math.Sin(float64(i)*1.7)) * 4
	}
	f64 := func(x []float32) []float64 {
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = float64(v)
		}
		return out
	}
	const top = 5
	cases := []struct {
		name string
		p    Params
		// ref is the reference distribution's log-probabilities, -Inf
		// where a token cannot be drawn.
		ref func() []float64
	}{
		{"greedy", Params{}, func() []float64 { return logSoftmax(f64(raw), 1) }},
		{"temperature", Params{Temperature: 0.7, Seed: 3}, func() []float64 { return logSoftmax(f64(raw), 0.7) }},
		{"top-k 3", Params{Temperature: 1.3, TopK: 3, Seed: 4}, func() []float64 {
			idx := make([]int, len(raw))
			for i := range idx {
				idx[i] = i
			}
			slices.SortStableFunc(idx, func(a, b int) int { return -cmpF(raw[a], raw[b]) })
			kept := make([]float64, 3)
			for j := range kept {
				kept[j] = float64(raw[idx[j]])
			}
			ls := logSoftmax(kept, 1.3)
			out := make([]float64, len(raw))
			for i := range out {
				out[i] = math.Inf(-1)
			}
			for j, i := range idx[:3] {
				out[i] = ls[j]
			}
			return out
		}},
		{"bias", Params{Temperature: 1, LogitBias: map[int32]float32{7: 10}, Seed: 5}, func() []float64 {
			b := f64(raw)
			b[7] += 10
			return logSoftmax(b, 1)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref := c.ref()
			s, err := NewFor(c.p, len(raw), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for range 20 {
				tok := s.Sample(raw)
				lp, alts := s.Logprobs(top, nil)
				if lp > 0 || math.Abs(float64(lp)-ref[tok]) > 1e-4 {
					t.Fatalf("token %d logprob %v, want %v", tok, lp, ref[tok])
				}
				mass := 0.0
				for j, a := range alts {
					if a.Logprob > 0 || math.Abs(float64(a.Logprob)-ref[a.ID]) > 1e-4 {
						t.Fatalf("alternative %d (token %d) logprob %v, want %v", j, a.ID, a.Logprob, ref[a.ID])
					}
					if j > 0 && a.Logprob > alts[j-1].Logprob {
						t.Fatalf("alternatives out of order: %v", alts)
					}
					mass += math.Exp(float64(a.Logprob))
				}
				if mass > 1+1e-5 {
					t.Fatalf("alternatives hold probability %v > 1", mass)
				}
				// The alternatives are the reference's most likely tokens.
				best := slices.Clone(ref)
				slices.SortFunc(best, func(a, b float64) int { return -cmpF(float32(a), float32(b)) })
				want := min(top, len(best))
				for want > 0 && math.IsInf(best[want-1], -1) {
					want--
				}
				if len(alts) != want || math.Abs(float64(alts[0].Logprob)-best[0]) > 1e-4 {
					t.Fatalf("%d alternatives, best %v; want %d, best %v", len(alts), alts, want, best[0])
				}
			}
		})
	}
}

func cmpF(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestMinP: with probabilities 0.5, 0.3, 0.15, 0.05 and min-p 0.5 only
// tokens of probability >= 0.25 remain, renormalised over 0.8.
func TestMinP(t *testing.T) {
	probs := []float64{0.5, 0.3, 0.15, 0.05}
	logits := make([]float32, len(probs))
	for i, p := range probs {
		logits[i] = float32(math.Log(p))
	}
	s, err := NewFor(Params{Temperature: 1, MinP: 0.5, Seed: 9}, len(logits), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int32]int{}
	for range 400 {
		tok := s.Sample(logits)
		seen[tok]++
		lp, alts := s.Logprobs(4, nil)
		if want := math.Log(probs[tok] / 0.8); math.Abs(float64(lp)-want) > 1e-5 {
			t.Fatalf("token %d logprob %v, want %v", tok, lp, want)
		}
		if len(alts) != 2 {
			t.Fatalf("alternatives %v, want the 2 kept tokens", alts)
		}
	}
	if seen[2] > 0 || seen[3] > 0 || seen[0] == 0 || seen[1] == 0 {
		t.Fatalf("draws %v: want only tokens 0 and 1, both", seen)
	}
}

// TestStreams: stream 0 is New's; another stream of the same seed differs.
func TestStreams(t *testing.T) {
	logits := make([]float32, 64)
	p := Params{Temperature: 1, Seed: 11}
	draw := func(s *Sampler) []int32 {
		var out []int32
		for range 32 {
			out = append(out, s.Sample(logits))
		}
		return out
	}
	a, _ := New(p)
	b, _ := NewFor(p, len(logits), nil, 0)
	c, _ := NewFor(p, len(logits), nil, 1)
	x, y, z := draw(a), draw(b), draw(c)
	if !slices.Equal(x, y) || slices.Equal(x, z) {
		t.Fatalf("stream 0 %v, New %v, stream 1 %v", y, x, z)
	}
}

func TestPenaltiesAllocateNothing(t *testing.T) {
	logits := make([]float32, 32000)
	for i := range logits {
		logits[i] = float32(i%97) / 10
	}
	p := Params{Temperature: 0.8, TopP: 0.9, MinP: 0.01, FrequencyPenalty: 0.5, PresencePenalty: 0.1,
		RepetitionPenalty: 1.2, LogitBias: map[int32]float32{5: 3}}
	s, err := NewFor(p, len(logits), []int32{1, 2, 3}, 0)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]TokenLogprob, 0, 20)
	if n := testing.AllocsPerRun(20, func() { s.Sample(logits); s.Logprobs(20, dst[:0]) }); n != 0 {
		t.Errorf("%v allocations per Sample and Logprobs", n)
	}
}

// BenchmarkSampleWithPenaltiesAndLogprobs is BenchmarkSample's row with
// every rewrite of the logits and 5 alternatives per token.
func BenchmarkSampleWithPenaltiesAndLogprobs(b *testing.B) {
	logits := make([]float32, 32000)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)))
	}
	p := Params{Temperature: 0.8, TopK: 40, TopP: 0.95, FrequencyPenalty: 0.5, PresencePenalty: 0.2,
		RepetitionPenalty: 1.1, LogitBias: map[int32]float32{7: 2}, Seed: 1}
	s, err := NewFor(p, len(logits), []int32{1, 2, 3}, 0)
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]TokenLogprob, 0, 5)
	b.ReportAllocs()
	for b.Loop() {
		s.Sample(logits)
		s.Logprobs(5, dst[:0])
	}
}
