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
	results := func(m Model) []Result {
		e := newTestEngine(t, m, nil)
		var all [][]*Stream
		var err error
		e.do(func() { // every request in the same steps
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
	plain := newHashModel(testVocab, 256)
	plain.dense = true
	gm := &greedyModel{hashModel: newHashModel(testVocab, 256)}
	gm.dense = true
	want, got := results(plain), results(gm)
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
