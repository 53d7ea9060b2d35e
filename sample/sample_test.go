package sample

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestValidate(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		name string
		p    Params
		ok   bool
	}{
		{"greedy zero value", Params{}, true},
		{"full", Params{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 7}, true},
		{"top-p one", Params{Temperature: 1, TopP: 1}, true},
		{"negative temperature", Params{Temperature: -1}, false},
		{"NaN temperature", Params{Temperature: nan}, false},
		{"infinite temperature", Params{Temperature: float32(math.Inf(1))}, false},
		{"negative top-k", Params{Temperature: 1, TopK: -1}, false},
		{"top-p above one", Params{Temperature: 1, TopP: 1.5}, false},
		{"negative top-p", Params{Temperature: 1, TopP: -0.1}, false},
		{"NaN top-p", Params{Temperature: 1, TopP: nan}, false},
		{"penalties", Params{MinP: 0.1, FrequencyPenalty: -2, PresencePenalty: 2, RepetitionPenalty: 1.1, LogitBias: map[int32]float32{3: -100}}, true},
		{"min-p above one", Params{MinP: 1.1}, false},
		{"frequency penalty above two", Params{FrequencyPenalty: 2.5}, false},
		{"NaN presence penalty", Params{PresencePenalty: nan}, false},
		{"negative repetition penalty", Params{RepetitionPenalty: -1}, false},
		{"denormal repetition penalty", Params{RepetitionPenalty: 1e-45}, false},
		{"repetition penalty below the minimum", Params{RepetitionPenalty: 0.009}, false},
		{"smallest repetition penalty", Params{RepetitionPenalty: MinRepetitionPenalty}, true},
		{"bias out of range", Params{LogitBias: map[int32]float32{3: 101}}, false},
		{"bias of a negative token", Params{LogitBias: map[int32]float32{-1: 1}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.p)
			if (err == nil) != c.ok {
				t.Fatalf("New(%+v) error %v, want ok=%v", c.p, err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrParams) {
				t.Fatalf("error %v does not wrap ErrParams", err)
			}
		})
	}
}

// TestTinyTemperatureIsGreedy: a temperature whose inverse overflows
// float32 still samples the most likely token, not NaN's last one.
func TestTinyTemperatureIsGreedy(t *testing.T) {
	logits := []float32{0.5, 3, -1, 2.9}
	for _, temp := range []float32{1e-40, 1e-20, math.SmallestNonzeroFloat32} {
		s, err := New(Params{Temperature: temp, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			if got := s.Sample(logits); got != 1 {
				t.Fatalf("temperature %g sampled %d, want 1", temp, got)
			}
		}
	}
}

func TestArgmax(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		name string
		x    []float32
		want int32
	}{
		{"single", []float32{3}, 0},
		{"max last", []float32{1, 2, 3}, 2},
		{"tie lowest index", []float32{1, 5, 5, 2}, 1},
		{"negative", []float32{-3, -1, -2}, 1},
		{"NaN skipped", []float32{nan, 1, 2}, 2},
		{"all NaN", []float32{nan, nan}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Argmax(c.x); got != c.want {
				t.Fatalf("Argmax(%v) = %d, want %d", c.x, got, c.want)
			}
		})
	}
}

// logitsOf returns logits whose softmax is probs.
func logitsOf(probs ...float64) []float32 {
	l := make([]float32, len(probs))
	for i, p := range probs {
		l[i] = float32(math.Log(p))
	}
	return l
}

// TestDistribution draws many tokens with a fixed seed and checks each
// token's frequency against the probability the parameters imply.
func TestDistribution(t *testing.T) {
	base := logitsOf(0.4, 0.3, 0.2, 0.1)
	cases := []struct {
		name string
		p    Params
		want []float64
	}{
		{"temperature 1", Params{Temperature: 1}, []float64{0.4, 0.3, 0.2, 0.1}},
		{"temperature 2 flattens", Params{Temperature: 2}, norm(math.Sqrt(0.4), math.Sqrt(0.3), math.Sqrt(0.2), math.Sqrt(0.1))},
		{"temperature 0.5 sharpens", Params{Temperature: 0.5}, norm(0.16, 0.09, 0.04, 0.01)},
		{"top-k 2", Params{Temperature: 1, TopK: 2}, []float64{0.4 / 0.7, 0.3 / 0.7, 0, 0}},
		{"top-k above vocab", Params{Temperature: 1, TopK: 10}, []float64{0.4, 0.3, 0.2, 0.1}},
		{"top-p 0.65 keeps two", Params{Temperature: 1, TopP: 0.65}, []float64{0.4 / 0.7, 0.3 / 0.7, 0, 0}},
		{"top-p 0.85 keeps three", Params{Temperature: 1, TopP: 0.85}, []float64{0.4 / 0.9, 0.3 / 0.9, 0.2 / 0.9, 0}},
		{"top-k 3 then top-p 0.6", Params{Temperature: 1, TopK: 3, TopP: 0.6}, []float64{0.4 / 0.7, 0.3 / 0.7, 0, 0}},
	}
	const draws = 40000
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.p.Seed = 12345
			s, err := New(c.p)
			if err != nil {
				t.Fatal(err)
			}
			counts := make([]float64, len(base))
			for range draws {
				counts[s.Sample(base)]++
			}
			for i, w := range c.want {
				got := counts[i] / draws
				// 5 standard deviations of a binomial proportion, at least 0.005.
				tol := max(0.005, 5*math.Sqrt(w*(1-w)/draws))
				if w == 0 && got != 0 || math.Abs(got-w) > tol {
					t.Errorf("token %d: frequency %.4f, want %.4f ± %.4f", i, got, w, tol)
				}
			}
		})
	}
}

func norm(x ...float64) []float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	for i := range x {
		x[i] /= s
	}
	return x
}

func TestGreedyIgnoresSeedAndTies(t *testing.T) {
	s, err := New(Params{Seed: 99})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if got := s.Sample([]float32{0, 7, 7, 1}); got != 1 {
			t.Fatalf("greedy chose %d, want 1", got)
		}
	}
}

func TestSameSeedSameTokens(t *testing.T) {
	logits := make([]float32, 300)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)))
	}
	run := func(seed uint64) []int32 {
		s, err := New(Params{Temperature: 0.9, TopK: 50, TopP: 0.9, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int32, 64)
		for i := range out {
			out[i] = s.Sample(logits)
		}
		return out
	}
	a, b, c := run(1), run(1), run(2)
	same := func(x, y []int32) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Fatalf("seed 1 gave %v then %v", a, b)
	}
	if same(a, c) {
		t.Fatalf("seeds 1 and 2 gave the same 64 tokens %v", a)
	}
}

func TestSampleAllocatesNothingAfterWarmUp(t *testing.T) {
	logits := make([]float32, 32000)
	for i := range logits {
		logits[i] = float32(i%97) / 10
	}
	for _, p := range []Params{{}, {Temperature: 1}, {Temperature: 0.7, TopK: 40, TopP: 0.9}} {
		s, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		s.Sample(logits)
		if n := testing.AllocsPerRun(20, func() { s.Sample(logits) }); n != 0 {
			t.Errorf("%+v: %v allocations per Sample", p, n)
		}
	}
}

func BenchmarkSample(b *testing.B) {
	logits := make([]float32, 32000)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)))
	}
	s, err := New(Params{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	s.Sample(logits) // warm-up: grow the scratch buffer
	b.ReportAllocs()
	for b.Loop() {
		s.Sample(logits)
	}
}

// BenchmarkSampleTopK draws under top-k alone from 32,000 logits, k of
// them kept and sorted (most likely first, the walk's order).
func BenchmarkSampleTopK(b *testing.B) {
	logits := make([]float32, 32000)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)))
	}
	for _, k := range []int{40, 4000} {
		b.Run(fmt.Sprint("k=", k), func(b *testing.B) {
			s, err := New(Params{Temperature: 0.8, TopK: k, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			s.Sample(logits)
			b.ReportAllocs()
			for b.Loop() {
				s.Sample(logits)
			}
		})
	}
}

// TestSelectTop checks quickselect against a full sort on inputs with many
// ties, for every k.
func TestSelectTop(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 7, 64, 200} {
		for k := 1; k <= n; k++ {
			c := make([]cand, n)
			for i := range c {
				c[i] = cand{float32(rng.IntN(5)), int32(i)}
			}
			rng.Shuffle(n, func(i, j int) { c[i], c[j] = c[j], c[i] })
			want := slices.Clone(c)
			slices.SortFunc(want, func(a, b cand) int {
				if before(a, b) {
					return -1
				}
				return 1
			})
			selectTop(c, k)
			got := slices.Clone(c[:k])
			slices.SortFunc(got, func(a, b cand) int {
				if before(a, b) {
					return -1
				}
				return 1
			})
			if !slices.Equal(got, want[:k]) {
				t.Fatalf("n=%d k=%d: top %v, want %v", n, k, got, want[:k])
			}
		}
	}
}

// nucleus is the naive reference: the token IDs a Sampler with p may
// return for logits, by full sort, top-k cut and the top-p prefix (with a
// relative slack of 1e-6 on the cut for float summation order).
func nucleus(p Params, logits []float32) map[int32]bool {
	hi, inv := logits[Argmax(logits)], 1/p.Temperature
	c := make([]cand, len(logits))
	for i, l := range logits {
		c[i] = cand{float32(math.Exp(float64((l - hi) * inv))), int32(i)}
	}
	slices.SortFunc(c, func(a, b cand) int {
		if before(a, b) {
			return -1
		}
		return 1
	})
	if p.TopK > 0 && p.TopK < len(c) {
		c = c[:p.TopK]
	}
	total := sum(c)
	want := total
	if p.TopP > 0 && p.TopP < 1 {
		want = float64(p.TopP) * total * (1 + 1e-6)
	}
	set, cum := map[int32]bool{}, 0.0
	for _, x := range c {
		if cum >= want {
			break
		}
		set[x.id] = true
		cum += float64(x.p)
	}
	return set
}

// FuzzSample checks every sampled token against the naive nucleus, and
// greedy decoding against Argmax.
func FuzzSample(f *testing.F) {
	f.Add([]byte{10, 20, 30, 40, 40, 5}, uint8(10), uint8(2), uint8(90), uint64(1))
	f.Add([]byte{0, 0, 0, 0}, uint8(0), uint8(0), uint8(0), uint64(2))
	f.Add([]byte{255, 0, 128, 7, 7, 7, 7, 200}, uint8(3), uint8(0), uint8(50), uint64(3))
	f.Fuzz(func(t *testing.T, raw []byte, temp, topK, topP uint8, seed uint64) {
		if len(raw) == 0 || len(raw) > 512 {
			return
		}
		logits := make([]float32, len(raw))
		for i, b := range raw {
			logits[i] = (float32(b) - 128) / 8
		}
		p := Params{Temperature: float32(temp) / 10, TopK: int(topK % 16), TopP: float32(topP%101) / 100, Seed: seed}
		s, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		if p.Temperature == 0 {
			if got := s.Sample(logits); got != Argmax(logits) {
				t.Fatalf("greedy %d, Argmax %d", got, Argmax(logits))
			}
			return
		}
		allowed := nucleus(p, logits)
		for range 8 {
			if got := s.Sample(logits); !allowed[got] {
				t.Fatalf("%+v: sampled %d outside the nucleus %v", p, got, allowed)
			}
		}
	})
}

// TestNextRefusesNonFiniteLogits: a row holding NaN or an infinity, from
// the model or made by a penalty, is an error wrapping ErrNonFinite, not a
// token and a NaN log-probability; finite rows sample as Sample does.
func TestNextRefusesNonFiniteLogits(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	cases := []struct {
		name   string
		p      Params
		prompt []int32
		logits []float32
	}{
		{"NaN, greedy", Params{}, nil, []float32{1, nan, 0}},
		{"NaN, sampled", Params{Temperature: 0.7, Seed: 1}, nil, []float32{1, 2, nan}},
		{"+Inf", Params{Temperature: 1}, nil, []float32{inf, 1, 0}},
		{"-Inf everywhere", Params{}, nil, []float32{-inf, -inf}},
		// Dividing by the smallest penalty overflows the largest logit.
		{"penalty overflow", Params{RepetitionPenalty: MinRepetitionPenalty}, []int32{0}, []float32{math.MaxFloat32 / 2, 0}},
	}
	for _, c := range cases {
		s, err := NewFor(c.p, len(c.logits), c.prompt, 0)
		if err != nil {
			t.Fatal(err)
		}
		if tok, err := s.Next(c.logits); !errors.Is(err, ErrNonFinite) {
			t.Errorf("%s: Next = %d, %v; want an error wrapping ErrNonFinite", c.name, tok, err)
		}
	}
	a, _ := New(Params{Temperature: 0.9, Seed: 5})
	b, _ := New(Params{Temperature: 0.9, Seed: 5})
	logits := []float32{0.1, 1, -2, 0.7}
	for range 50 {
		tok, err := a.Next(logits)
		if want := b.Sample(logits); err != nil || tok != want {
			t.Fatalf("Next = %d, %v; Sample = %d", tok, err, want)
		}
	}
}
