package sample

import "testing"

// TestGreedy checks which parameters let a caller replace Sample by an
// argmax computed elsewhere, and that for those Sample is Argmax.
func TestGreedy(t *testing.T) {
	logits := []float32{0.5, 2, -1, 2, 1.5}
	for _, c := range []struct {
		name string
		p    Params
		want bool
	}{
		{"zero", Params{}, true},
		{"seeded top-k", Params{Seed: 3, TopK: 2, TopP: 0.5}, true}, // filters do nothing at temperature 0
		{"temperature", Params{Temperature: 0.7}, false},
		{"bias", Params{LogitBias: map[int32]float32{4: 1}}, false},
		{"frequency", Params{FrequencyPenalty: 0.5}, false},
		{"presence", Params{PresencePenalty: -0.5}, false},
		{"repetition", Params{RepetitionPenalty: 1.3}, false},
		{"repetition 1", Params{RepetitionPenalty: 1}, true},
	} {
		s, err := NewFor(c.p, len(logits), []int32{1}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Greedy(); got != c.want {
			t.Errorf("%s: Greedy %v, want %v", c.name, got, c.want)
		}
		if c.want {
			for range 2 {
				if tok := s.Sample(logits); tok != Argmax(logits) {
					t.Errorf("%s: Sample %d, Argmax %d", c.name, tok, Argmax(logits))
				}
			}
		}
	}
}
