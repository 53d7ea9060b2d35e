package engine

import (
	"math"
	"slices"
	"sort"
	"testing"
	"time"
)

// bruteBeam is beam search with no KV cache at all: every hypothesis's
// logits are recomputed from its full token sequence. It follows the
// documented rules of beamGroup independently of the engine's code.
func bruteBeam(vocab int, prompt []int32, width, maxTokens int, penalty float64, eos int32) []int32 {
	type hyp struct {
		toks  []int32
		score float64
	}
	type done struct {
		toks []int32
		norm float64
	}
	logprobs := func(toks []int32) []float64 {
		l := make([]float32, vocab)
		denseLogits(l, chainHash(toks))
		lse := logSumExp(l)
		out := make([]float64, vocab)
		for i, v := range l {
			out[i] = float64(v) - lse
		}
		return out
	}
	norm := func(score float64, n int) float64 { return score / math.Pow(float64(max(n, 1)), penalty) }
	beams := []hyp{{toks: slices.Clone(prompt)}}
	var finished []done
	for gen := 0; ; gen++ {
		type cand struct {
			beam, rank int
			tok        int32
			score      float64
		}
		var cands []cand
		for b, h := range beams {
			lp := logprobs(h.toks)
			idx := make([]int, vocab)
			for i := range idx {
				idx[i] = i
			}
			sort.SliceStable(idx, func(i, j int) bool { return lp[idx[i]] > lp[idx[j]] })
			for _, t := range idx[:2*width] {
				cands = append(cands, cand{b, b, int32(t), h.score + lp[t]})
			}
		}
		sort.SliceStable(cands, func(i, j int) bool {
			a, b := cands[i], cands[j]
			if a.score != b.score {
				return a.score > b.score
			}
			if a.rank != b.rank {
				return a.rank < b.rank
			}
			return a.tok < b.tok
		})
		var next []hyp
		for i, c := range cands {
			if c.tok == eos {
				if i < width {
					finished = append(finished, done{slices.Clone(beams[c.beam].toks[len(prompt):]), norm(c.score, gen)})
				}
				continue
			}
			next = append(next, hyp{append(slices.Clone(beams[c.beam].toks), c.tok), c.score})
			if len(next) == width {
				break
			}
		}
		if gen+1 >= maxTokens {
			for _, h := range next {
				finished = append(finished, done{h.toks[len(prompt):], norm(h.score, gen+1)})
			}
			next = nil
		}
		if len(finished) >= width || len(next) == 0 {
			best := finished[0]
			for _, f := range finished[1:] {
				if f.norm > best.norm {
					best = f
				}
			}
			return best.toks
		}
		beams = next
	}
}

func TestBeamSearchMatchesBruteForce(t *testing.T) {
	const vocab = 23
	for _, tc := range []struct {
		name    string
		width   int
		max     int
		penalty float32
		eos     int32
		mod     func(*Config)
	}{
		{"width 2", 2, 12, 1, -1, nil},
		{"width 4", 4, 10, 0.6, -1, nil},
		{"width 3 with eos", 3, 15, 1, 5, nil},
		{"width 4 tiny pool", 4, 10, 1, -1, func(c *Config) { c.NumBlocks = 40 }},
		{"width 3 contiguous", 3, 8, 1, -1, func(c *Config) { c.KVAlloc = Contiguous }},
		{"width 3 no cache", 3, 8, 1, 7, func(c *Config) { c.DisablePrefixCache = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newHashModel(vocab, 512)
			m.dense = true
			e := newTestEngine(t, m, func(c *Config) {
				c.EOS = tc.eos
				if tc.mod != nil {
					tc.mod(c)
				}
			})
			for seed := range 4 {
				p := make([]int32, 5+seed*7)
				for i := range p {
					p[i] = int32((seed*13 + i*5) % vocab)
				}
				req := Request{Prompt: p, MaxTokens: tc.max, Beam: Beam{Width: tc.width, LengthPenalty: tc.penalty}}
				res := run(t, e, req)
				want := bruteBeam(vocab, p, tc.width, tc.max, float64(tc.penalty), tc.eos)
				if !slices.Equal(res.Tokens, want) {
					t.Fatalf("prompt %d: beam search %v, brute force %v", seed, res.Tokens, want)
				}
			}
			checkDrained(t, e)
		})
	}
}

// peakBlocks records the most blocks in use at the end of any step.
type peakBlocks struct {
	e    *Engine
	peak int
}

func (p *peakBlocks) Step(int, int, time.Duration) { p.peak = max(p.peak, p.e.pool.Stats().InUse) }
func (p *peakBlocks) Finished(*Result)             {}

func TestBeamsShareThePrompt(t *testing.T) {
	const width, maxTokens, promptLen = 4, 20, 400 // 100 prompt blocks of 4
	m := newHashModel(testVocab, 1024)
	m.dense = true
	obs := &peakBlocks{}
	e := newTestEngine(t, m, func(c *Config) { c.Observer = obs; c.NumBlocks = 1024; c.PrefillChunk = 64 })
	obs.e = e
	res := run(t, e, Request{Prompt: prompt(3, promptLen), MaxTokens: maxTokens, Beam: Beam{Width: width, LengthPenalty: 1}})
	if len(res.Tokens) != maxTokens {
		t.Fatalf("beam output %d tokens", len(res.Tokens))
	}
	// Each beam owns its output blocks plus one copied partial block; the
	// prompt's blocks are shared. Copying everything would need 4 x 105.
	limit := promptLen/4 + width*(maxTokens/4+2)
	if obs.peak > limit || obs.peak < promptLen/4 {
		t.Fatalf("peak %d blocks in use, want between %d and %d", obs.peak, promptLen/4, limit)
	}
	checkDrained(t, e)
}
