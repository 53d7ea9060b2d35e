package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/prefixd/prefixd/grammar"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/speculate"
)

// testSpec is a test Speculator: its drafters propose the continuation of
// the first known sequence that the sequence so far is a prefix of (with
// every wrongEvery-th position of the sequence drafted wrong), or, with
// garbage, pseudo-random tokens; a request's prediction, where it reaches,
// comes first. Verification is what the tests check: drafts are only
// proposals.
type testSpec struct {
	vocab      int32
	known      [][]int32
	wrongEvery int
	garbage    bool

	mu       sync.Mutex
	finished map[string][][]int32
}

type testDrafter struct {
	sp         *testSpec
	seq        []int32
	nPrompt    int
	prediction []int32
	rng        uint64
}

func (sp *testSpec) NewDrafter(ns string, prompt, prediction []int32) Drafter {
	return &testDrafter{sp: sp, seq: slices.Clone(prompt), nPrompt: len(prompt), prediction: prediction, rng: uint64(len(prompt))}
}

func (sp *testSpec) Finished(ns string, tokens []int32) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.finished == nil {
		sp.finished = map[string][][]int32{}
	}
	sp.finished[ns] = append(sp.finished[ns], tokens)
}

func (d *testDrafter) Accept(tokens []int32) { d.seq = append(d.seq, tokens...) }

func (d *testDrafter) Draft(dst []int32, k int) ([]int32, bool) {
	sp := d.sp
	if out := len(d.seq) - d.nPrompt; out < len(d.prediction) {
		return append(dst, d.prediction[out:min(out+k, len(d.prediction))]...), true
	}
	if sp.garbage {
		for range k {
			d.rng = d.rng*6364136223846793005 + 1442695040888963407
			dst = append(dst, int32(d.rng>>33)%sp.vocab)
		}
		return dst, false
	}
	for _, kn := range sp.known {
		n := len(d.seq)
		if len(kn) <= n || !slices.Equal(kn[:n], d.seq) {
			continue
		}
		for i := n; i < min(n+k, len(kn)); i++ {
			t := kn[i]
			if sp.wrongEvery > 0 && i%sp.wrongEvery == 0 {
				t = (t + 1) % sp.vocab
			}
			dst = append(dst, t)
		}
		break
	}
	return dst, false
}

// runBatch submits reqs at once (so they share steps) and returns each
// request's results, one per choice.
func runBatch(t testing.TB, e *Engine, reqs []Request) [][]Result {
	t.Helper()
	var streams [][]*Stream
	var err error
	e.do(func() {
		for _, r := range reqs {
			var st []*Stream
			if st, err = e.SubmitN(context.Background(), r); err != nil {
				return
			}
			streams = append(streams, st)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]Result, len(streams))
	for i, sts := range streams {
		for _, st := range sts {
			out[i] = append(out[i], st.Result())
		}
	}
	return out
}

// sameResults fails unless got and want have the same tokens, finish,
// text and log-probabilities, choice by choice.
func sameResults(t testing.TB, what string, got, want [][]Result) {
	t.Helper()
	for i := range want {
		for c := range want[i] {
			g, w := got[i][c], want[i][c]
			if !slices.Equal(g.Tokens, w.Tokens) || g.Finish != w.Finish || g.Text != w.Text || g.Err != nil {
				t.Fatalf("%s: request %d choice %d: %v %s %q (err %v), want %v %s %q", what, i, c, g.Tokens, g.Finish, g.Text, g.Err, w.Tokens, w.Finish, w.Text)
			}
			if len(g.Logprobs) != len(w.Logprobs) {
				t.Fatalf("%s: request %d choice %d: %d logprobs, want %d", what, i, c, len(g.Logprobs), len(w.Logprobs))
			}
			for j := range w.Logprobs {
				if math.Abs(float64(g.Logprobs[j].Logprob-w.Logprobs[j].Logprob)) > 1e-4 || !slices.EqualFunc(g.Logprobs[j].Top, w.Logprobs[j].Top,
					func(a, b Logprob) bool { return a.ID == b.ID && math.Abs(float64(a.Logprob-b.Logprob)) <= 1e-4 }) {
					t.Fatalf("%s: request %d choice %d token %d: logprobs %+v, want %+v", what, i, c, j, g.Logprobs[j], w.Logprobs[j])
				}
			}
		}
	}
}

// known returns every choice's prompt + output, for an oracle drafter.
func known(reqs []Request, res [][]Result) [][]int32 {
	var out [][]int32
	for i := range res {
		for _, r := range res[i] {
			out = append(out, slices.Concat(reqs[i].Prompt, r.Tokens))
		}
	}
	return out
}

// specRequests exercises what a draft can run into: EOS, a stop token
// and a stop string inside it, max_tokens ending inside it, n choices,
// penalties, logprobs and seeded sampling. want are their results without
// speculation, from which stopAt picks the stop token and string.
func specRequests(want func([]Request) [][]Result) []Request {
	base := []Request{
		{Namespace: "a", Prompt: prompt(1, 9), MaxTokens: 40, IgnoreEOS: true},
		{Namespace: "a", Prompt: prompt(2, 14), MaxTokens: 3, IgnoreEOS: true},
		{Namespace: "b", Prompt: prompt(3, 5), MaxTokens: 30, IgnoreEOS: true, N: 3, Sampling: Sampling{Temperature: 0.9, TopP: 0.95, Seed: 5}},
		{Namespace: "b", Prompt: prompt(4, 7), MaxTokens: 30, IgnoreEOS: true, Sampling: Sampling{FrequencyPenalty: 0.7, RepetitionPenalty: 1.3}},
		{Namespace: "a", Prompt: prompt(5, 11), MaxTokens: 25, IgnoreEOS: true, Logprobs: true, TopLogprobs: 3},
		{Namespace: "c", Prompt: prompt(6, 6), MaxTokens: 30, IgnoreEOS: true},
		{Namespace: "c", Prompt: prompt(7, 8), MaxTokens: 30, IgnoreEOS: true},
		{Namespace: "a", Prompt: prompt(8, 10), MaxTokens: 30},
	}
	ref := want(base)
	// Request 5 stops at the token its output has at position 9, request
	// 6 at the text of its tokens 7 to 9, and request 7 at EOS, the
	// engine's (see specEngine) being request 7's token 12.
	base[5].StopTokens = []int32{ref[5][0].Tokens[9]}
	base[6].StopStrings = []string{byteTokenizer{}.Decode(ref[6][0].Tokens[7:10])}
	return base
}

// specEOS is the EOS token of the engines specRequests run on.
func specEOS(t testing.TB, off *Engine) int32 {
	res := run(t, off, Request{Namespace: "a", Prompt: prompt(8, 10), MaxTokens: 30, IgnoreEOS: true})
	return res.Tokens[12]
}

// TestSpeculationKeepsOutput runs the same requests, at once, without
// speculation and with drafters that are always right, right but every
// third position, and always wrong, in every batching, allocation and
// cache mode, with a pool small enough to preempt and with prefill chunks
// of 3 tokens: every output (tokens, finish reason, text, logprobs, the
// seeded samples of n choices) must be the same, every block accounted
// for (the invariant checker runs after every step under -tags
// invariants, which also checks that rejected drafts were rolled back),
// and the acceptance counts must fit the drafter.
func TestSpeculationKeepsOutput(t *testing.T) {
	m := &hashModel{vocab: testVocab, maxLen: 512, dense: true}
	newEngine := func(t *testing.T, mod func(*Config), spec Speculator, eos int32) *Engine {
		return newTestEngine(t, m, func(c *Config) {
			c.Tokenizer, c.EOS = byteTokenizer{}, eos
			c.MaxRunning = 10
			if spec != nil {
				c.Speculator, c.SpecTokens, c.SpecMaxRows = spec, 5, -1
			}
			mod(c)
		})
	}
	cases := append(slices.Clone(modes),
		modeCase{"preempting", func(c *Config) { c.NumBlocks = 40 }},
		modeCase{"chunked", func(c *Config) { c.PrefillChunk = 3 }},
	)
	for _, mc := range cases {
		t.Run(mc.name, func(t *testing.T) {
			eos := specEOS(t, newEngine(t, mc.mod, nil, -1))
			off := newEngine(t, mc.mod, nil, eos)
			reqs := specRequests(func(r []Request) [][]Result { return runBatch(t, off, r) })
			want := runBatch(t, off, reqs)
			for _, tc := range []struct {
				name string
				spec *testSpec
			}{
				{"oracle", &testSpec{vocab: testVocab, known: known(reqs, want)}},
				{"every-third-wrong", &testSpec{vocab: testVocab, known: known(reqs, want), wrongEvery: 3}},
				{"garbage", &testSpec{vocab: testVocab, garbage: true}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					e := newEngine(t, mc.mod, tc.spec, eos)
					sameResults(t, tc.name, runBatch(t, e, reqs), want)
					st := e.Stats()
					if st.SpecDraftTokens == 0 {
						t.Fatal("nothing was drafted")
					}
					perPos := uint64(0)
					for _, n := range st.SpecAcceptedPerPos {
						perPos += n
					}
					if perPos != st.SpecAcceptedTokens || st.SpecAcceptedTokens > st.SpecDraftTokens {
						t.Fatalf("stats %+v: accepted by position sum to %d", st, perPos)
					}
					switch rate := float64(st.SpecAcceptedTokens) / float64(st.SpecDraftTokens); tc.name {
					case "oracle":
						// Only the sampled choices' drafts can miss (the
						// oracle knows one sample of each).
						if rate < 0.7 {
							t.Fatalf("an oracle's drafts: %.2f accepted (%+v)", rate, st)
						}
					case "garbage":
						if rate > 0.2 {
							t.Fatalf("random drafts: %.2f accepted", rate)
						}
					}
					if mc.name == "preempting" && st.Preemptions == 0 {
						t.Fatal("no preemption")
					}
					checkDrained(t, e)
				})
			}
		})
	}
}

// TestSpeculationOnRealModels: greedy output of stories260K, the built-in
// model and random ones with Q8_0 and Q4_K matrices is the same with
// drafts right, partly right and wrong, including under a grammar (a
// draft the grammar refuses is rejected) and with logprobs. That needs a
// verify pass's rows to get the bits a single row gets: kernels/quant's
// Q8_0 and K-quant products and kernels/cpu's attention are
// batch-invariant (the Q8_0 case failed before they were, and the Q4_K
// case with PREFIXD_CPU=avx2 before its kernels were).
func TestSpeculationOnRealModels(t *testing.T) {
	bt := model.ByteTokenizer{}
	g, err := grammar.CompileSchema([]byte(validitySchemas[0]), grammar.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	con := grammar.NewConstraint(g, grammar.NewVocab(bt, []int32{model.ByteEOS}))
	for _, mc := range []struct {
		name string
		load func(t *testing.T) *model.Model
		reqs []Request
	}{
		{"builtin", func(*testing.T) *model.Model { return model.Builtin() }, []Request{
			{Prompt: bt.Encode("Once upon a time"), MaxTokens: 40, IgnoreEOS: true},
			{Prompt: bt.Encode("Answer in JSON:"), MaxTokens: 60, Constraint: con},
			{Prompt: bt.Encode("Once upon a time"), MaxTokens: 20, IgnoreEOS: true, Logprobs: true, TopLogprobs: 2},
		}},
		{"q8_0", func(t *testing.T) *model.Model { return quantModel(t, kernels.Q8_0, 128, 352) }, []Request{
			{Prompt: []int32{1}, MaxTokens: 120, IgnoreEOS: true},
			{Prompt: []int32{1, 403, 407, 261, 378}, MaxTokens: 80, IgnoreEOS: true},
		}},
		{"q4_k", func(t *testing.T) *model.Model { return quantModel(t, kernels.Q4_K, 256, 512) }, []Request{
			{Prompt: []int32{1}, MaxTokens: 120, IgnoreEOS: true},
			{Prompt: []int32{1, 403, 407, 261, 378}, MaxTokens: 80, IgnoreEOS: true},
		}},
		{"stories260K", func(t *testing.T) *model.Model {
			m, err := model.Load(sharedModelPath(t, "stories260K.bin"))
			if err != nil {
				t.Fatal(err)
			}
			return m
		}, []Request{
			{Prompt: []int32{1}, MaxTokens: 120, IgnoreEOS: true},
			{Prompt: []int32{1, 403, 407, 261, 378}, MaxTokens: 80, IgnoreEOS: true},
		}},
	} {
		t.Run(mc.name, func(t *testing.T) {
			m := mc.load(t)
			eos := int32(-1)
			if mc.name == "builtin" {
				eos = model.ByteEOS
			}
			mod := func(spec Speculator) func(*Config) {
				return func(c *Config) {
					c.EOS = eos
					if spec != nil {
						c.Speculator, c.SpecTokens = spec, 6
					}
				}
			}
			want := runBatch(t, realEngine(t, m, mod(nil)), mc.reqs)
			vocab := int32(m.Config.Vocab)
			for _, tc := range []struct {
				name string
				spec *testSpec
			}{
				{"oracle", &testSpec{vocab: vocab, known: known(mc.reqs, want)}},
				{"every-fourth-wrong", &testSpec{vocab: vocab, known: known(mc.reqs, want), wrongEvery: 4}},
				{"garbage", &testSpec{vocab: vocab, garbage: true}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					e := realEngine(t, m, mod(tc.spec))
					sameResults(t, tc.name, runBatch(t, e, mc.reqs), want)
					if st := e.Stats(); tc.name == "oracle" && st.SpecAcceptedTokens < st.SpecDraftTokens*9/10 {
						t.Fatalf("an oracle's drafts: %d of %d accepted", st.SpecAcceptedTokens, st.SpecDraftTokens)
					}
					checkDrained(t, e)
				})
			}
		})
	}
}

// quantModel returns a random model of small dims (the 110M model's shape
// scaled down to dim and hidden) whose matrices are quantized to typ.
func quantModel(t *testing.T, typ kernels.DType, dim, hidden int) *model.Model {
	c := model.Config{Dim: dim, Hidden: hidden, Layers: 3, Heads: 4, KVHeads: 4, Vocab: 2048, MaxSeqLen: 512,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1}
	m := model.Random(c, 29)
	ws := []*kernels.Tensor{&m.Classifier}
	for i := range m.Layers {
		l := &m.Layers[i]
		ws = append(ws, &l.Wq, &l.Wk, &l.Wv, &l.Wo, &l.W1, &l.W2, &l.W3)
	}
	for _, w := range ws {
		var err error
		if *w, err = w.Convert(typ); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// TestSpeculationSampledDistribution checks that verification leaves the
// distribution of sampled output unchanged: on a model of 6 tokens whose
// logits are known, 6000 seeded runs at temperature 1 whose drafter
// always proposes the most likely token; the pairs of their first two
// tokens (the second verified against a draft) must follow the model's
// probabilities: a chi-square test over the 36 pairs, 35 degrees of
// freedom, at significance 0.001 (critical value 66.62). Accepting every
// draft, or never, or drawing the replacement from the full distribution,
// would be far off. The same seeds give the same tokens without drafts.
func TestSpeculationSampledDistribution(t *testing.T) {
	const vocab, runs = 6, 6000
	m := &hashModel{vocab: vocab, maxLen: 64, dense: true}
	p := []int32{1, 2, 3}
	// The most likely token after each first token: the draft.
	probs := func(h uint64) []float64 {
		l := make([]float32, vocab)
		denseLogits(l, h)
		out := make([]float64, vocab)
		z := 0.0
		for i, x := range l {
			out[i] = math.Exp(float64(x))
			z += out[i]
		}
		for i := range out {
			out[i] /= z
		}
		return out
	}
	h0 := chainHash(p)
	first := probs(h0)
	var known [][]int32
	for a := range int32(vocab) {
		second := probs(mix(h0, a, len(p)))
		best := int32(0)
		for i, q := range second {
			if q > second[best] {
				best = int32(i)
			}
		}
		known = append(known, append(slices.Clone(p), a, best))
	}
	reqs := make([]Request, runs)
	for i := range reqs {
		reqs[i] = Request{Prompt: p, MaxTokens: 3, Sampling: Sampling{Temperature: 1, Seed: uint64(i)}}
	}
	run := func(spec Speculator) [][]Result {
		e := newTestEngine(t, m, func(c *Config) {
			c.MaxRunning, c.MaxBatchTokens, c.NumBlocks, c.MaxWaiting = 64, 512, 512, runs
			if spec != nil {
				c.Speculator, c.SpecTokens, c.SpecMaxRows = spec, 1, -1
			}
		})
		return runBatch(t, e, reqs)
	}
	spec := &testSpec{vocab: vocab, known: known}
	got := run(spec)
	sameResults(t, "seeded", got, run(nil))
	var counts [vocab][vocab]int
	for _, r := range got {
		counts[r[0].Tokens[0]][r[0].Tokens[1]]++
	}
	chi := 0.0
	for a := range vocab {
		second := probs(mix(h0, int32(a), len(p)))
		for b := range vocab {
			exp := runs * first[a] * second[b]
			d := float64(counts[a][b]) - exp
			chi += d * d / exp
		}
	}
	t.Logf("chi-square %.1f over %d pairs", chi, vocab*vocab)
	if chi > 66.62 {
		t.Fatalf("chi-square %.1f > 66.62: the sampled pairs do not follow the model (counts %v)", chi, counts)
	}
}

// TestSpeculationPrediction: a request's prediction (its output with a
// few tokens changed) is drafted from first; the output is the same as
// without it, and usage counts the prediction's accepted and rejected
// tokens.
func TestSpeculationPrediction(t *testing.T) {
	m := newHashModel(testVocab, 512)
	req := Request{Prompt: prompt(9, 12), MaxTokens: 50, IgnoreEOS: true}
	want := run(t, newTestEngine(t, m, nil), req).Tokens
	pred := slices.Clone(want)
	pred[10], pred[30] = pred[10]+1, pred[30]+1
	req.Prediction = pred
	e := newTestEngine(t, m, func(c *Config) { c.Speculator = &testSpec{vocab: testVocab} })
	res := run(t, e, req)
	if !slices.Equal(res.Tokens, want) {
		t.Fatalf("with a prediction %v, want %v", res.Tokens, want)
	}
	u := res.Usage
	if u.AcceptedPredictionTokens < 20 || u.AcceptedPredictionTokens+u.RejectedPredictionTokens != len(pred) {
		t.Fatalf("usage %+v: want most of the %d predicted tokens accepted, the rest rejected", u, len(pred))
	}
	if st := e.Stats(); st.Steps > 30 {
		t.Fatalf("%d steps for 50 tokens mostly predicted", st.Steps)
	}
	// Without a Speculator nothing is drafted: the prediction is all rejected.
	res = run(t, newTestEngine(t, m, nil), req)
	if u := res.Usage; u.AcceptedPredictionTokens != 0 || u.RejectedPredictionTokens != len(pred) {
		t.Fatalf("without a Speculator: usage %+v", u)
	}
	if _, err := e.Submit(context.Background(), Request{Prompt: []int32{1}, MaxTokens: 1, Prediction: []int32{testVocab}}); err == nil {
		t.Fatal("a prediction token outside the vocabulary was accepted")
	}
}

// TestSpeculationBacksOff: a sequence whose drafts keep failing stops
// drafting for a while (probing again later), and a step with more decode
// rows than SpecMaxRows drafts nothing. The Speculator learns of every
// sequence that ended, in its namespace, prompt then output.
func TestSpeculationBacksOff(t *testing.T) {
	m := newHashModel(testVocab, 1024)
	spec := &testSpec{vocab: testVocab, garbage: true}
	e := newTestEngine(t, m, func(c *Config) { c.Speculator, c.SpecTokens = spec, 4 })
	res := run(t, e, Request{Namespace: "ns", Prompt: prompt(3, 5), MaxTokens: 300, IgnoreEOS: true})
	st := e.Stats()
	if st.SpecDrafts == 0 || st.SpecDrafts > 60 {
		t.Fatalf("%d of 300 steps drafted from a drafter that is always wrong", st.SpecDrafts)
	}
	spec.mu.Lock()
	got := spec.finished["ns"]
	spec.mu.Unlock()
	if len(got) != 1 || !slices.Equal(got[0], slices.Concat(prompt(3, 5), res.Tokens)) {
		t.Fatalf("Finished got %v", got)
	}

	for _, rows := range []int{3, 4} {
		t.Run(fmt.Sprint("max rows ", rows), func(t *testing.T) {
			var reqs []Request
			for i := range 4 {
				reqs = append(reqs, Request{Prompt: prompt(i, 8), MaxTokens: 20, IgnoreEOS: true})
			}
			off := runBatch(t, newTestEngine(t, m, nil), reqs)
			e := newTestEngine(t, m, func(c *Config) {
				c.Speculator, c.SpecMaxRows = &testSpec{vocab: testVocab, known: known(reqs, off)}, rows
			})
			sameResults(t, "back-off", runBatch(t, e, reqs), off)
			if d := e.Stats().SpecDrafts; (rows == 3) != (d == 0) {
				t.Fatalf("SpecMaxRows %d, 4 decoding together: %d drafts", rows, d)
			}
		})
	}
}

// package speculate's Speculator is the engine's.
var _ Speculator = (*speculate.Speculator)(nil)

// TestSpeculateDraftersOnStories260K runs package speculate's drafters
// (ngram and suffix) on stories260K, the trained model, from BOS: the
// output is the same as without speculation, and the log gives each
// mode's acceptance on the model's own text (suffix on a second request,
// after the first has finished in its namespace). A third request, in
// another namespace, must draft exactly as the first did: nothing of
// namespace a's history reaches it.
func TestSpeculateDraftersOnStories260K(t *testing.T) {
	m, err := model.Load(sharedModelPath(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Namespace: "a", Prompt: []int32{1}, MaxTokens: 200, IgnoreEOS: true}
	want := run(t, realEngine(t, m, nil), req).Tokens
	for _, mode := range []speculate.Mode{speculate.Ngram, speculate.Suffix} {
		t.Run(mode.String(), func(t *testing.T) {
			spec, err := speculate.New(speculate.Config{Mode: mode, K: 4})
			if err != nil {
				t.Fatal(err)
			}
			e := realEngine(t, m, func(c *Config) { c.Speculator, c.SpecTokens = spec, 4 })
			var first [2]uint64
			for i, ns := range []string{"a", "a", "b"} {
				before := e.Stats()
				r := req
				r.Namespace = ns
				if got := run(t, e, r).Tokens; !slices.Equal(got, want) {
					t.Fatalf("request %d: %v, want %v", i, got, want)
				}
				st := e.Stats()
				drafted, accepted := st.SpecDraftTokens-before.SpecDraftTokens, st.SpecAcceptedTokens-before.SpecAcceptedTokens
				t.Logf("%s, request %d (namespace %s): %d drafted, %d accepted (%.2f), %d steps for %d tokens",
					mode, i, ns, drafted, accepted, float64(accepted)/max(1, float64(drafted)), st.Steps-before.Steps, len(want))
				switch {
				case i == 0:
					first = [2]uint64{drafted, accepted}
				case mode == speculate.Suffix && i == 1 && accepted < uint64(len(want))/2:
					t.Fatalf("suffix on a repeated request: %d of %d tokens accepted", accepted, len(want))
				case i == 2 && first != [2]uint64{drafted, accepted}:
					t.Fatalf("namespace b drafted %d and had %d accepted; namespace a's first request %v", drafted, accepted, first)
				}
			}
			checkDrained(t, e)
		})
	}
}
