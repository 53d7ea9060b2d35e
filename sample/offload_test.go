package sample

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// drawRef makes d on logits as a device would, written plainly from
// Draw's description: the entries' biases and penalties, the softmax
// numerators, min-p, then top-k and top-p over the tokens most likely
// first (lower ID first on ties), and the walk to U times the kept mass,
// most likely first when top-k or top-p applies, else in token order.
func drawRef(d *Draw, logits []float32) int32 {
	row := slices.Clone(logits)
	for _, e := range d.Entries {
		l := row[e.Token] + e.Bias
		if r := d.Repetition; r != 0 && r != 1 && (e.Count > 0 || e.InPrompt) {
			if l > 0 {
				l /= r
			} else {
				l *= r
			}
		}
		if e.Count > 0 {
			l -= d.Frequency*float32(e.Count) + d.Presence
		}
		row[e.Token] = l
	}
	if d.Temperature == 0 {
		return Argmax(row)
	}
	hi := float64(row[Argmax(row)])
	var c []cand
	for i, l := range row {
		p := float32(math.Exp((float64(l) - hi) / float64(d.Temperature)))
		if p >= d.MinP {
			c = append(c, cand{p, int32(i)})
		}
	}
	total := sum(c) // in token order, as Sample sums
	topK := d.TopK > 0 && d.TopK < len(c)
	if topK || d.TopP > 0 && d.TopP < 1 {
		slices.SortStableFunc(c, func(a, b cand) int { return cmp.Compare(b.p, a.p) })
	}
	if topK {
		c = c[:d.TopK]
		total = sum(c)
	}
	if p := float64(d.TopP); p > 0 && p < 1 {
		cum := 0.0
		for i, x := range c {
			if cum += float64(x.p); cum >= p*total {
				c = c[:i+1]
				break
			}
		}
		total = cum
	}
	u := d.U * total
	for _, x := range c {
		if u -= float64(x.p); u < 0 {
			return x.id
		}
	}
	return c[len(c)-1].id
}

// TestOffload runs two Samplers of the same parameters side by side over
// steps of random logits: one samples, the other hands its draws to
// drawRef through Offload and takes the token back with Accept (every
// other step, sampling itself in between): the tokens must agree, so the
// Draw carries the PRNG's next number and the whole bias and penalty
// state, Offload moves nothing and Accept moves the Sampler as Sample
// does.
func TestOffload(t *testing.T) {
	const vocab, steps = 300, 40
	prompt := []int32{3, 17, 17, 250, 299}
	for _, c := range []struct {
		name string
		p    Params
	}{
		{"greedy", Params{Seed: 1}},
		{"temperature", Params{Temperature: 0.8, Seed: 2}},
		{"min-p", Params{Temperature: 1.3, MinP: 0.05, Seed: 3}},
		{"top-p", Params{Temperature: 0.9, TopP: 0.9, Seed: 4}},
		{"top-k and top-p", Params{Temperature: 1.1, TopK: 40, TopP: 0.8, Seed: 5}},
		{"top-k", Params{Temperature: 0.9, TopK: 30, Seed: 8}},
		{"top-k of more than min-p keeps", Params{Temperature: 0.5, TopK: 200, MinP: 0.01, Seed: 9}},
		{"penalties and biases", Params{Temperature: 0.7, FrequencyPenalty: 0.5, PresencePenalty: 1.5,
			RepetitionPenalty: 1.3, LogitBias: map[int32]float32{5: 3, 17: -2, 250: 10}, Seed: 6}},
		{"greedy with penalties", Params{RepetitionPenalty: 1.5, FrequencyPenalty: 1, PresencePenalty: 2,
			LogitBias: map[int32]float32{17: 2.5}, Seed: 7}},
	} {
		a, err := NewFor(c.p, vocab, prompt, 3)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := NewFor(c.p, vocab, prompt, 3)
		rng := rand.New(rand.NewPCG(uint64(len(c.name)), 9))
		var d Draw
		for step := range steps {
			logits := make([]float32, vocab)
			for i := range logits {
				logits[i] = float32(rng.NormFloat64() * 3)
			}
			for _, tok := range append(slices.Clone(prompt), b.seen...) {
				logits[tok] += 5 // where the penalties move the draw
			}
			want := a.Sample(logits)
			if step%2 == 1 {
				if got := b.Sample(logits); got != want {
					t.Fatalf("%s step %d: Sample %d, want %d", c.name, step, got, want)
				}
				continue
			}
			if !b.Offload(&d) {
				t.Fatalf("%s: Offload refused", c.name)
			}
			u := d.U
			if b.Offload(&d); d.U != u {
				t.Fatalf("%s: a second Offload drew %v after %v", c.name, d.U, u)
			}
			got := drawRef(&d, logits)
			b.Accept(got)
			if got != want {
				t.Fatalf("%s step %d: the offloaded draw gave %d, want %d", c.name, step, got, want)
			}
		}
	}
}

// TestOffloadRefuses checks the draws a device cannot make as Sample
// does: any draw under a Constraint.
func TestOffloadRefuses(t *testing.T) {
	var d Draw
	s, _ := NewFor(Params{}, 10, nil, 0)
	s.Constrain(&setConstraint{allowed: map[int32]bool{3: true}}, false)
	if s.Offload(&d) {
		t.Error("Offload accepted a constrained draw")
	}
}

// TestOffloadAllocatesNothing pins that describing a draw and accepting
// its token allocate nothing once the Draw's entries have their room and
// every token has been seen (the list of tokens seen grows, amortized,
// until then).
func TestOffloadAllocatesNothing(t *testing.T) {
	p := Params{Temperature: 0.9, TopP: 0.9, FrequencyPenalty: 0.5, RepetitionPenalty: 1.2,
		LogitBias: map[int32]float32{4: 1}, Seed: 1}
	s, err := NewFor(p, 50, []int32{1, 2, 3}, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := Draw{Entries: make([]Entry, 0, 64)}
	for tok := range int32(50) {
		s.Accept(tok)
	}
	tok := int32(0)
	allocs := testing.AllocsPerRun(40, func() {
		s.Offload(&d)
		s.Accept(tok % 50)
		tok += 7
	})
	if allocs != 0 {
		t.Errorf("%v allocations an Offload and Accept", allocs)
	}
}

// FuzzOffload is TestOffload over fuzzed parameters (no top-k, whose
// kept mass Sample sums in its quickselect's order, another rounding) and
// logits: a Sampler and its twin through Offload, drawRef and Accept
// agree on every token.
func FuzzOffload(f *testing.F) {
	f.Add(uint64(1), float32(0.8), float32(0), float32(0), float32(0), float32(0), float32(0), int32(3), float32(1))
	f.Add(uint64(2), float32(1.3), float32(0.9), float32(0.05), float32(0.5), float32(1.5), float32(1.3), int32(250), float32(10))
	f.Add(uint64(3), float32(0), float32(0), float32(0), float32(1), float32(2), float32(1.5), int32(17), float32(2.5))
	f.Fuzz(func(t *testing.T, seed uint64, temp, topP, minP, freq, pres, rep float32, biasTok int32, bias float32) {
		p := Params{Temperature: temp, TopP: topP, MinP: minP, FrequencyPenalty: freq, PresencePenalty: pres,
			RepetitionPenalty: rep, LogitBias: map[int32]float32{biasTok: bias}, Seed: seed}
		const vocab = 64
		prompt := []int32{1, 5, 5, 40}
		a, err := NewFor(p, vocab, prompt, 0)
		if err != nil || biasTok >= vocab {
			return // parameters Validate refuses, or a bias the engine would refuse
		}
		b, _ := NewFor(p, vocab, prompt, 0)
		rng := rand.New(rand.NewPCG(seed, 1))
		var d Draw
		for step := range 8 {
			logits := make([]float32, vocab)
			for i := range logits {
				logits[i] = float32(rng.NormFloat64() * 2)
			}
			want, err := a.Next(logits)
			if err != nil {
				return
			}
			if !b.Offload(&d) {
				t.Fatal("Offload refused a draw without top-k or a constraint")
			}
			got := drawRef(&d, logits)
			b.Accept(got)
			if got != want {
				t.Fatalf("step %d: the offloaded draw gave %d, want %d", step, got, want)
			}
		}
	})
}
