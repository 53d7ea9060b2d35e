package engine

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/sample"
)

// collect drains every stream and returns the results, checking that each
// streamed what its Result holds.
func collect(t *testing.T, streams []*Stream) []Result {
	t.Helper()
	var out []Result
	for i, st := range streams {
		var ids []int32
		var lps []float32
		for tok := range st.Tokens {
			ids = append(ids, tok.ID)
			lps = append(lps, tok.Logprob)
		}
		res := st.Result()
		if !slices.Equal(ids, res.Tokens) {
			t.Fatalf("choice %d streamed %v, result %v", i, ids, res.Tokens)
		}
		for j, lp := range res.Logprobs {
			if lps[j] != lp.Logprob {
				t.Fatalf("choice %d token %d streamed logprob %v, result %v", i, j, lps[j], lp.Logprob)
			}
		}
		out = append(out, res)
	}
	return out
}

// TestChoicesShareThePrompt: n = 3 prefills the prompt once, its choices
// share its blocks, and each choice's tokens are what an independent
// sampler of its PRNG stream draws from the model's true logits (which a
// slip in the forked block tables would change).
func TestChoicesShareThePrompt(t *testing.T) {
	const n, maxTokens, promptLen = 3, 20, 400 // 100 prompt blocks of 4
	m := newHashModel(testVocab, 1024)
	m.dense = true
	obs := &peakBlocks{}
	e := newTestEngine(t, m, func(c *Config) { c.Observer = obs; c.NumBlocks = 1024; c.PrefillChunk = 64 })
	obs.e = e
	p := prompt(3, promptLen)
	params := Sampling{Temperature: 1, Seed: 5}
	streams, err := e.SubmitN(context.Background(), Request{Prompt: p, MaxTokens: maxTokens, N: n, Sampling: params})
	if err != nil {
		t.Fatal(err)
	}
	res := collect(t, streams)
	if len(res) != n {
		t.Fatalf("%d results, want %d", len(res), n)
	}
	prefill := 0
	for i, r := range res {
		if r.Finish != FinishLength || len(r.Tokens) != maxTokens || r.Usage.PromptTokens != promptLen {
			t.Fatalf("choice %d: %s, %d tokens, usage %+v", i, r.Finish, len(r.Tokens), r.Usage)
		}
		prefill += r.Usage.PrefillTokens
		smp, err := sample.NewFor(params, testVocab, p, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		seq := slices.Clone(p)
		logits := make([]float32, testVocab)
		for j, tok := range r.Tokens {
			denseLogits(logits, chainHash(seq))
			if want := smp.Sample(logits); tok != want {
				t.Fatalf("choice %d token %d is %d, an independent sampler draws %d", i, j, tok, want)
			}
			seq = append(seq, tok)
		}
	}
	if slices.Equal(res[0].Tokens, res[1].Tokens) && slices.Equal(res[1].Tokens, res[2].Tokens) {
		t.Fatalf("three choices drew the same tokens %v", res[0].Tokens)
	}
	// The prompt is computed once; each choice computes its own outputs
	// but the last, which is sampled, never fed.
	if prefill != promptLen || m.positions != promptLen+n*(maxTokens-1) {
		t.Fatalf("prefill tokens %d, positions computed %d; want %d and %d",
			prefill, m.positions, promptLen, promptLen+n*(maxTokens-1))
	}
	// Each choice owns its output blocks plus one copied partial block;
	// copying the prompt would need 3 x 100 blocks.
	if limit := promptLen/4 + n*(maxTokens/4+2); obs.peak > limit || obs.peak < promptLen/4 {
		t.Fatalf("peak %d blocks in use, want between %d and %d", obs.peak, promptLen/4, limit)
	}
	checkDrained(t, e)
}

// TestChoicesCancel: a cancel before the prompt is done ends every choice,
// and one after the fork ends the running choices; no block leaks.
func TestChoicesCancel(t *testing.T) {
	for _, fork := range []bool{false, true} {
		m := newHashModel(testVocab, 4096)
		m.gate = make(chan struct{})
		e := newTestEngine(t, m, nil)
		ctx, cancel := context.WithCancel(context.Background())
		// 40 prompt tokens take 3 passes of PrefillChunk 16.
		streams, err := e.SubmitN(ctx, Request{Prompt: prompt(1, 40), MaxTokens: 200, IgnoreEOS: true, N: 3})
		if err != nil {
			t.Fatal(err)
		}
		m.gate <- struct{}{}
		if fork {
			m.gate <- struct{}{}
			m.gate <- struct{}{}
			for _, st := range streams {
				<-st.Tokens
			}
		}
		cancel()
		stop, fed := make(chan struct{}), make(chan struct{})
		go func() { // passes already under way may complete
			defer close(fed)
			for {
				select {
				case m.gate <- struct{}{}:
				case <-stop:
					return
				}
			}
		}()
		for i, st := range streams {
			if r := st.Result(); r.Finish != FinishCancelled {
				t.Fatalf("fork %v: choice %d finished %q, want cancelled", fork, i, r.Finish)
			}
		}
		close(stop)
		<-fed
		close(m.gate)
		checkDrained(t, e)
	}
}

// TestLogprobsMatchTheModel: greedy decoding with logprobs reports each
// token's float64 log-softmax under the model's logits, the token itself
// as the best alternative, and alternatives in order.
func TestLogprobsMatchTheModel(t *testing.T) {
	m := newHashModel(testVocab, 512)
	m.dense = true
	e := newTestEngine(t, m, nil)
	p := prompt(4, 10)
	streams, err := e.SubmitN(context.Background(), Request{Prompt: p, MaxTokens: 12, Logprobs: true, TopLogprobs: 3})
	if err != nil {
		t.Fatal(err)
	}
	r := collect(t, streams)[0]
	if len(r.Logprobs) != len(r.Tokens) {
		t.Fatalf("%d logprobs for %d tokens", len(r.Logprobs), len(r.Tokens))
	}
	seq := slices.Clone(p)
	logits := make([]float32, testVocab)
	for j, tok := range r.Tokens {
		denseLogits(logits, chainHash(seq))
		lse := 0.0
		for _, l := range logits {
			lse += math.Exp(float64(l))
		}
		want := float64(logits[tok]) - math.Log(lse)
		lp := r.Logprobs[j]
		if lp.Logprob > 0 || math.Abs(float64(lp.Logprob)-want) > 1e-5 {
			t.Fatalf("token %d logprob %v, want %v", j, lp.Logprob, want)
		}
		if len(lp.Top) != 3 || lp.Top[0].ID != tok || lp.Top[0].Logprob != lp.Logprob ||
			lp.Top[1].Logprob > lp.Top[0].Logprob || lp.Top[2].Logprob > lp.Top[1].Logprob {
			t.Fatalf("token %d (%d) alternatives %v", j, tok, lp.Top)
		}
		seq = append(seq, tok)
	}
	checkDrained(t, e)
}

// TestPenaltiesReachTheModel: a frequency penalty changes greedy output as
// a hand-written loop over the model's logits says it must.
func TestPenaltiesReachTheModel(t *testing.T) {
	m := newHashModel(testVocab, 512)
	m.dense = true
	e := newTestEngine(t, m, nil)
	p := prompt(6, 10)
	const pen = 1.5
	r := run(t, e, Request{Prompt: p, MaxTokens: 30, Sampling: Sampling{FrequencyPenalty: pen}})
	plain := run(t, e, Request{Prompt: p, MaxTokens: 30})
	seq := slices.Clone(p)
	counts := map[int32]int{}
	logits := make([]float32, testVocab)
	var want []int32
	for range 30 {
		denseLogits(logits, chainHash(seq))
		best, bestV := int32(0), math.Inf(-1)
		for i, l := range logits {
			if v := float64(l) - pen*float64(counts[int32(i)]); v > bestV {
				best, bestV = int32(i), v
			}
		}
		want = append(want, best)
		counts[best]++
		seq = append(seq, best)
	}
	if !slices.Equal(r.Tokens, want) {
		t.Fatalf("penalised output %v, want %v", r.Tokens, want)
	}
	if slices.Equal(r.Tokens, plain.Tokens) {
		t.Fatalf("the penalty changed nothing: %v", r.Tokens)
	}
	checkDrained(t, e)
}
