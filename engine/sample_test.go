package engine

import (
	"math"
	"testing"
)

func TestGreedyPicksLowestMax(t *testing.T) {
	s, _ := newSampler(Sampling{}, 4)
	if got := s.sample([]float32{1, 3, 3, 2}); got != 1 {
		t.Fatalf("greedy = %d, want 1 (first of the tied maxima)", got)
	}
}

// frequencies draws n tokens and returns how often each came up.
func frequencies(t *testing.T, p Sampling, logits []float32, n int) []float64 {
	t.Helper()
	s, err := newSampler(p, len(logits))
	if err != nil {
		t.Fatal(err)
	}
	f := make([]float64, len(logits))
	for range n {
		f[s.sample(logits)]++
	}
	for i := range f {
		f[i] /= float64(n)
	}
	return f
}

func TestSamplingDistributions(t *testing.T) {
	logits := []float32{2, 1, 0, -1, 0.5}
	softmax := func(temp float64, keep []int) []float64 {
		out := make([]float64, len(logits))
		sum := 0.0
		for _, i := range keep {
			out[i] = math.Exp(float64(logits[i]) / temp)
			sum += out[i]
		}
		for i := range out {
			out[i] /= sum
		}
		return out
	}
	all := []int{0, 1, 2, 3, 4}
	for _, tc := range []struct {
		name string
		p    Sampling
		want []float64
	}{
		{"temperature 1", Sampling{Temperature: 1, Seed: 1}, softmax(1, all)},
		{"temperature 0.5", Sampling{Temperature: 0.5, Seed: 2}, softmax(0.5, all)},
		{"top-k 2", Sampling{Temperature: 1, TopK: 2, Seed: 3}, softmax(1, []int{0, 1})},
		// softmax(1) is .563 .207 .076 .028 .126: top-p 0.7 keeps tokens 0
		// and 1 (.770), and top-p 0.8 adds token 4 (.896).
		{"top-p 0.7", Sampling{Temperature: 1, TopP: 0.7, Seed: 4}, softmax(1, []int{0, 1})},
		{"top-p 0.8", Sampling{Temperature: 1, TopP: 0.8, Seed: 6}, softmax(1, []int{0, 1, 4})},
		// Top-p applies within the top-k set: token 0 alone is .628 of {0,1,4}.
		{"top-k 3 and top-p 0.5", Sampling{Temperature: 1, TopK: 3, TopP: 0.5, Seed: 5}, softmax(1, []int{0})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := frequencies(t, tc.p, logits, 40000)
			for i := range got {
				if math.Abs(got[i]-tc.want[i]) > 0.015 {
					t.Fatalf("token %d: frequency %.3f, want %.3f (all %v)", i, got[i], tc.want[i], got)
				}
			}
		})
	}
}

func TestSameSeedSameTokens(t *testing.T) {
	logits := []float32{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}
	a := frequencies(t, Sampling{Temperature: 1, Seed: 42}, logits, 50)
	b := frequencies(t, Sampling{Temperature: 1, Seed: 42}, logits, 50)
	c := frequencies(t, Sampling{Temperature: 1, Seed: 43}, logits, 50)
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("same seed gave different draws")
		}
	}
	same := true
	for i := range a {
		same = same && a[i] == c[i]
	}
	if same {
		t.Fatal("different seeds gave identical draws")
	}
}

func TestSamplingDoesNotAllocate(t *testing.T) {
	logits := make([]float32, 300)
	for i := range logits {
		logits[i] = float32(i%17) / 3
	}
	s, _ := newSampler(Sampling{Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 1}, len(logits))
	s.sample(logits)
	if n := testing.AllocsPerRun(100, func() { s.sample(logits) }); n != 0 {
		t.Fatalf("sample allocates %.1f times", n)
	}
}
