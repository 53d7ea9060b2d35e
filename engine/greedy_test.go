package engine

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/sample"
)

// greedyModel is a hashModel that answers ForwardGreedy as a GPU would:
// the rows marked greedy come back as their argmax, their logits poisoned
// with NaN, so that a token sampled from them instead shows.
type greedyModel struct {
	*hashModel
	flagged, unflagged int // rows ForwardGreedy saw marked and not
}

func (m *greedyModel) ForwardGreedy(rows []Row, greedy []bool) ([]float32, []int32, error) {
	logits, err := m.Forward(rows)
	if err != nil {
		return nil, nil, err
	}
	ids := make([]int32, len(greedy))
	v := m.vocab
	for i, g := range greedy {
		if !g {
			m.unflagged++
			continue
		}
		m.flagged++
		row := logits[i*v : (i+1)*v]
		ids[i] = sample.Argmax(row)
		for j := range row {
			row[j] = float32(math.NaN())
		}
	}
	return logits, ids, nil
}

// runTogether submits reqs to a new engine on m in one scheduler call, so
// that they run in the same steps, and returns every choice's Result in
// order.
func runTogether(t *testing.T, m Model, reqs []Request) []Result {
	t.Helper()
	e := newTestEngine(t, m, nil)
	var all [][]*Stream
	var err error
	e.do(func() {
		for _, r := range reqs {
			var streams []*Stream
			if streams, err = e.SubmitN(context.Background(), r); err != nil {
				return
			}
			all = append(all, streams)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []Result
	for _, streams := range all {
		out = append(out, collect(t, streams)...)
	}
	return out
}

// TestForwardGreedy runs a mix of requests on a GreedyModel and on the
// same model without the capability: greedy requests take the model's
// argmax (their logits rows are NaN, so a Sample from them would differ),
// while requests that sample, ask for log-probabilities, apply a penalty,
// fork choices or search beams get full logits rows, and every token
// and log-probability matches the plain model's.
func TestForwardGreedy(t *testing.T) {
	reqs := []Request{
		{Prompt: prompt(1, 9), MaxTokens: 7},
		{Prompt: prompt(2, 5), MaxTokens: 6, Sampling: Sampling{TopK: 3}}, // still greedy at temperature 0
		{Prompt: prompt(3, 11), MaxTokens: 5, Logprobs: true, TopLogprobs: 2},
		{Prompt: prompt(4, 6), MaxTokens: 8, Sampling: Sampling{Temperature: 0.8, Seed: 9}},
		{Prompt: prompt(5, 7), MaxTokens: 6, Sampling: Sampling{PresencePenalty: 1.5}},
		{Prompt: prompt(6, 8), MaxTokens: 4, N: 2, Sampling: Sampling{Temperature: 1, Seed: 2}},
		{Prompt: prompt(7, 5), MaxTokens: 5, Beam: Beam{Width: 2}},
	}
	plain := newHashModel(testVocab, 256)
	plain.dense = true
	gm := &greedyModel{hashModel: newHashModel(testVocab, 256)}
	gm.dense = true
	want, got := runTogether(t, plain, reqs), runTogether(t, gm, reqs)
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Err != nil || !slices.Equal(got[i].Tokens, want[i].Tokens) {
			t.Errorf("result %d: %v %v, without ForwardGreedy %v", i, got[i].Err, got[i].Tokens, want[i].Tokens)
		}
		if !slices.EqualFunc(got[i].Logprobs, want[i].Logprobs, func(a, b TokenLogprobs) bool {
			return a.Logprob == b.Logprob && slices.Equal(a.Top, b.Top)
		}) {
			t.Errorf("result %d: log-probabilities differ", i)
		}
	}
	// The two greedy requests' 13 tokens, each one row asking for logits,
	// in steps shared with the others' rows.
	if gm.flagged != 13 || gm.unflagged == 0 {
		t.Errorf("%d rows came back as argmax ids (want 13), %d as logits", gm.flagged, gm.unflagged)
	}
}

// samplingModel is a greedyModel that also makes draws, as a GPU would:
// those without top-k or top-p it makes from the row (drawRow) and
// poisons the row with NaN; the others it declines (-1), so the engine
// samples their logits itself.
type samplingModel struct {
	greedyModel
	drawn, declined int
}

func (m *samplingModel) Draws() bool { return true }

func (m *samplingModel) ForwardSample(rows []Row, greedy []bool, draws []*sample.Draw) ([]float32, []int32, error) {
	logits, ids, err := m.ForwardGreedy(rows, greedy)
	if err != nil {
		return nil, nil, err
	}
	v := m.vocab
	for i, d := range draws {
		switch {
		case d == nil:
		case d.TopK > 0 || d.TopP > 0 && d.TopP < 1:
			m.declined++
			ids[i] = -1
		default:
			m.drawn++
			row := logits[i*v : (i+1)*v]
			ids[i] = drawRow(d, row)
			for j := range row {
				row[j] = float32(math.NaN())
			}
		}
	}
	return logits, ids, nil
}

// drawRow makes d, which has no top-k or top-p, from row as
// sample.Sampler does: biases and penalties, the softmax numerators in
// float64 rounded to float32, min-p, and the walk in token order to U
// times the kept mass.
func drawRow(d *sample.Draw, row []float32) int32 {
	row = slices.Clone(row)
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
	hi := row[sample.Argmax(row)]
	if d.Temperature == 0 {
		return sample.Argmax(row)
	}
	p := make([]float32, len(row))
	total := 0.0
	for i, l := range row {
		if p[i] = float32(math.Exp((float64(l) - float64(hi)) / float64(d.Temperature))); p[i] >= d.MinP {
			total += float64(p[i])
		} else {
			p[i] = 0
		}
	}
	u, last := d.U*total, int32(0)
	for i, x := range p {
		if x == 0 {
			continue
		}
		if last = int32(i); u-float64(x) < 0 {
			return last
		}
		u -= float64(x)
	}
	return last
}

// TestForwardSample runs requests that sample on a SamplingModel and on
// the same model without the capability: every token must be the plain
// model's. The draws without top-k or top-p come back as the model's
// tokens (their logits rows are NaN), which the samplers Accept so that
// later draws and penalties follow; a draw the model declines (top-k,
// top-p) is sampled from its logits; log-probabilities and a first token
// that several choices sample from are never offered.
func TestForwardSample(t *testing.T) {
	reqs := []Request{
		{Prompt: prompt(1, 9), MaxTokens: 7, Sampling: Sampling{Temperature: 0.8, Seed: 9}},
		{Prompt: prompt(2, 5), MaxTokens: 9, Sampling: Sampling{Temperature: 1.2, MinP: 0.1, Seed: 3,
			FrequencyPenalty: 0.5, PresencePenalty: 1, RepetitionPenalty: 1.3, LogitBias: map[int32]float32{3: 4, 7: -2}}},
		{Prompt: prompt(3, 6), MaxTokens: 6, Sampling: Sampling{PresencePenalty: 1.5}}, // greedy after a penalty
		{Prompt: prompt(4, 7), MaxTokens: 5, Sampling: Sampling{Temperature: 0.9, TopP: 0.8, Seed: 4}},
		{Prompt: prompt(5, 8), MaxTokens: 5, Sampling: Sampling{Temperature: 0.9, TopK: 4, Seed: 5}},
		{Prompt: prompt(6, 5), MaxTokens: 4, Logprobs: true, Sampling: Sampling{Temperature: 0.7, Seed: 6}},
		{Prompt: prompt(7, 6), MaxTokens: 4, N: 2, Sampling: Sampling{Temperature: 1, Seed: 2}},
		{Prompt: prompt(8, 9), MaxTokens: 6},
	}
	plain := newHashModel(testVocab, 256)
	plain.dense = true
	sm := &samplingModel{greedyModel: greedyModel{hashModel: newHashModel(testVocab, 256)}}
	sm.dense = true
	want, got := runTogether(t, plain, reqs), runTogether(t, sm, reqs)
	for i := range want {
		if got[i].Err != nil || !slices.Equal(got[i].Tokens, want[i].Tokens) {
			t.Errorf("result %d: %v %v, without ForwardSample %v", i, got[i].Err, got[i].Tokens, want[i].Tokens)
		}
	}
	// Drawn: the first three requests' 22 tokens and the two choices'
	// 3 after the first, which both sample from one row; declined:
	// top-p's 5 and top-k's 5; greedy: the last request's 6.
	if sm.drawn != 28 || sm.declined != 10 || sm.flagged != 6 {
		t.Errorf("%d rows drawn by the model (want 28), %d declined (want 10), %d greedy (want 6)", sm.drawn, sm.declined, sm.flagged)
	}
}
