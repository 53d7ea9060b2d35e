package engine

import (
	"context"
	"errors"
	"math"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/prefixd/prefixd/sample"
)

// TestLoweredMaxTTLAppliesToRunningRequests lowers the maximum TTL below
// what running and waiting requests asked for: they finish normally (their
// further uses are cut to the new maximum; deadlines already set stand).
func TestLoweredMaxTTLAppliesToRunningRequests(t *testing.T) {
	m := newHashModel(testVocab, 4096)
	m.gate = make(chan struct{})
	e := newTestEngine(t, m, func(c *Config) { c.MaxRunning = 1; c.MaxBatchTokens = 16 })
	req := Request{Prompt: prompt(4, 9), MaxTokens: 12, Cache: Cache{TTL: time.Hour}}
	a, err := e.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Submit(context.Background(), req) // waits: one runs at a time
	if err != nil {
		t.Fatal(err)
	}
	m.gate <- struct{}{} // a is running
	lowered := make(chan error)
	go func() { lowered <- e.SetTTLs(time.Second, 2*time.Second) }()
	for {
		select {
		case err := <-lowered:
			if err != nil {
				t.Fatal(err)
			}
			close(m.gate)
			for _, st := range []*Stream{a, b} {
				if res := st.Result(); res.Finish != FinishLength {
					t.Fatalf("finish %q (%v), want length", res.Finish, res.Err)
				}
			}
			checkDrained(t, e)
			return
		case m.gate <- struct{}{}:
		}
	}
}

// TestPinsNeverStrandARequest pins most of a small pool: a request that
// could fit the pool when accepted but not next to the pins fails with
// ErrNoRoom instead of waiting forever, and one that can never fit now is
// refused at submission.
func TestPinsNeverStrandARequest(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 4096), func(c *Config) {
		c.NumBlocks, c.MaxPinnedFraction = 16, 0.75
	})
	sys := prompt(6, 48) // 12 blocks of 4
	run(t, e, Request{Prompt: append(sys, 1), MaxTokens: 1})
	big := Request{Prompt: prompt(7, 8), MaxTokens: 40} // 12 blocks
	if err := e.Validate(&big); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	hm := e.cfg.Model.(*hashModel)
	hm.gate = gate
	st, err := e.Submit(context.Background(), big)
	if err != nil {
		t.Fatal(err)
	}
	pinned := make(chan error, 1)
	go func() {
		_, err := e.Pin("", sys)
		pinned <- err
	}()
	// Forward passes are let through only once the pin is queued for the
	// scheduler, which then runs it after at most one. Let through while
	// the pinning goroutine still waits for a CPU (a busy machine), they
	// would let big grow into the cached prefix, evicting it, or even run
	// to its end before the pin: then there would be nothing to pin.
	deadline := time.Now().Add(time.Minute) // bounds a hang only
	for done := false; !done; {
		if time.Now().After(deadline) {
			t.Fatal("the pin never ran")
		}
		if !e.callQueued() {
			select {
			case err := <-pinned:
				if err != nil {
					t.Fatal(err)
				}
				done = true
			default:
				runtime.Gosched()
			}
			continue
		}
		select {
		case err := <-pinned:
			if err != nil {
				t.Fatal(err)
			}
			done = true
		case gate <- struct{}{}:
		}
	}
	close(gate)
	// Pinned, the prefix leaves big 4 blocks of the 12 it needs.
	if res := st.Result(); res.Finish != FinishError || !errors.Is(res.Err, ErrNoRoom) {
		t.Fatalf("finish %q, error %v; want ErrNoRoom", res.Finish, res.Err)
	}
	if _, err := e.Submit(context.Background(), big); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a request needing more than the unpinned pool was accepted: %v", err)
	}
	if _, err := e.Flush("", true); err != nil {
		t.Fatal(err)
	}
	checkDrained(t, e)
}

func TestBeamWidthBoundedByMaxRunning(t *testing.T) {
	_, err := New(Config{Model: newHashModel(testVocab, 64), NumBlocks: 8, MaxRunning: 2, MaxBatchTokens: 8, MaxBeamWidth: 4})
	if err == nil {
		t.Fatal("MaxBeamWidth above MaxRunning accepted")
	}
	e := newTestEngine(t, newHashModel(testVocab, 64), func(c *Config) { c.MaxRunning = 2 })
	if got := e.Config().MaxBeamWidth; got != 2 {
		t.Fatalf("default MaxBeamWidth with MaxRunning 2 = %d", got)
	}
	if _, err := e.Submit(context.Background(), Request{Prompt: []int32{1}, MaxTokens: 2, Beam: Beam{Width: 3}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("beam wider than the running set: %v", err)
	}
}

// TestFollowerWaitsForLeaderPrefill submits requests sharing a long prompt
// in one iteration: the first prefills it chunk by chunk and the others
// adopt its blocks, so the shared part is computed once, not once each.
func TestFollowerWaitsForLeaderPrefill(t *testing.T) {
	m := newHashModel(testVocab, 4096)
	e := newTestEngine(t, m, func(c *Config) { c.PrefillChunk = 8; c.MaxBatchTokens = 24 })
	shared := prompt(11, 64) // 16 blocks of 4
	var reqs []Request
	for i := range 3 {
		reqs = append(reqs, Request{Prompt: append(slices.Clone(shared), int32(i), int32(i+1)), MaxTokens: 4, IgnoreEOS: true})
	}
	for i, st := range submitAll(t, e, reqs) {
		res := st.Result()
		if want := expectGreedy(testVocab, reqs[i].Prompt, 4, -1); !slices.Equal(res.Tokens, want) {
			t.Fatalf("request %d: %v, want %v", i, res.Tokens, want)
		}
		if i > 0 && res.Usage.CachedTokens != len(shared) {
			t.Fatalf("follower %d: %d cached tokens, want the %d shared", i, res.Usage.CachedTokens, len(shared))
		}
	}
	if got, want := e.Stats().PrefillTokens, uint64(len(shared)+3*2); got != want {
		t.Fatalf("prefilled %d prompt tokens, want %d (the shared part once)", got, want)
	}
	checkDrained(t, e)
}

// TestHostTierThroughTheEngine evicts a cached prompt under pressure into
// the host tier and runs it again: its blocks come back from host memory
// (counted as host-cached tokens) and, since the model's outputs depend on
// every K/V byte, the output matches a cold run exactly.
func TestHostTierThroughTheEngine(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 512), func(c *Config) {
		c.NumBlocks, c.HostTierBytes = 24, 1<<20
	})
	p := prompt(21, 41) // 10 whole blocks
	cold := run(t, e, Request{Prompt: p, MaxTokens: 3, IgnoreEOS: true})
	pushToHost(t, e, 57)
	warm := run(t, e, Request{Prompt: p, MaxTokens: 3, IgnoreEOS: true})
	if warm.Usage.HostCachedTokens == 0 || warm.Usage.CachedTokens < warm.Usage.HostCachedTokens {
		t.Fatalf("usage %+v: want tokens promoted from the host tier", warm.Usage)
	}
	if !slices.Equal(warm.Tokens, cold.Tokens) {
		t.Fatalf("after promotion %v, cold %v", warm.Tokens, cold.Tokens)
	}
	if s := e.Stats(); s.CacheHitHost != uint64(warm.Usage.HostCachedTokens) || s.Cache.Promoted == 0 {
		t.Fatalf("stats: host hits %d, promoted %d", s.CacheHitHost, s.Cache.Promoted)
	}
	checkDrained(t, e)
}

// TestRequestPriorityGuidesEviction caches a high- and a low-priority
// prompt, then needs room: the low-priority one is evicted first, though
// it was used more recently.
func TestRequestPriorityGuidesEviction(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 512), func(c *Config) { c.NumBlocks = 24 })
	hi, lo := prompt(41, 33), prompt(42, 33) // 8 whole blocks each
	run(t, e, Request{Prompt: hi, MaxTokens: 1, Cache: Cache{Priority: 5}})
	run(t, e, Request{Prompt: lo, MaxTokens: 1})
	run(t, e, Request{Prompt: prompt(43, 30), MaxTokens: 10, Cache: Cache{Disabled: true}}) // needs 10
	var hiCached, loCached int
	e.do(func() { hiCached, loCached = e.cache.Cached("", hi), e.cache.Cached("", lo) })
	if hiCached != 32 || loCached == 32 {
		t.Fatalf("after pressure: high priority %d tokens cached, low %d", hiCached, loCached)
	}
	checkDrained(t, e)
}

// finishLog records finished requests' prompt lengths in finishing order.
type finishLog struct{ prompts []int }

func (l *finishLog) Step(int, int, time.Duration) {}
func (l *finishLog) Finished(r *Result)           { l.prompts = append(l.prompts, r.Usage.PromptTokens) }

// TestCachedFirstDoesNotStarve queues an uncached request ahead of many
// whose prompts are cached: CachedFirst admits those first, but passes the
// uncached one over at most 16 times. One runs at a time, so finishing
// order is admission order.
func TestCachedFirstDoesNotStarve(t *testing.T) {
	log := &finishLog{}
	e := newTestEngine(t, newHashModel(testVocab, 512), func(c *Config) {
		c.CachedFirst, c.MaxRunning, c.MaxBatchTokens, c.Observer = true, 1, 32, log
	})
	warm := prompt(51, 40)
	run(t, e, Request{Prompt: warm, MaxTokens: 1})
	reqs := []Request{{Prompt: prompt(52, 40), MaxTokens: 2}} // uncached, first in line
	for i := 1; i < 30; i++ {
		reqs = append(reqs, Request{Prompt: append(slices.Clone(warm), int32(i)), MaxTokens: 2}) // 41 tokens
	}
	for _, st := range submitAll(t, e, reqs) {
		st.Result()
	}
	var order []int
	e.do(func() { order = slices.Clone(log.prompts[1:]) }) // after the warm-up
	rank := slices.Index(order, 40)
	if rank != 16 {
		t.Fatalf("the uncached request was admitted after %d cached ones, want 16 (order %v)", rank, order)
	}
	checkDrained(t, e)
}

// pushToHost runs three other prompts of n tokens through e, whose pool
// holds few more blocks than one of them, so that earlier prompts' blocks
// are demoted to the host tier, and waits for the demotions.
func pushToHost(t *testing.T, e *Engine, n int) {
	t.Helper()
	for i := range 3 {
		run(t, e, Request{Prompt: prompt(30+i, n), MaxTokens: 3, IgnoreEOS: true})
	}
	e.do(func() { e.host.Wait() })
	if e.Stats().Cache.Demoted == 0 {
		t.Fatal("nothing was demoted under pressure")
	}
}

// poisonedModel is hashModel whose logits turn non-finite (every row's
// token 3 becomes bad) from its forward pass number from on, as a model
// whose weights hold NaN, or whose activations overflow, gives them.
type poisonedModel struct {
	*hashModel
	from int
	bad  float32
}

func (m *poisonedModel) Forward(rows []Row) ([]float32, error) {
	logits, err := m.hashModel.Forward(rows)
	if m.forwards >= m.from {
		for i := 3; i < len(logits); i += m.vocab {
			logits[i] = m.bad
		}
	}
	return logits, err
}

// TestNonFiniteLogitsFailTheRequest: a request whose logits hold NaN or an
// infinity fails with ErrNonFinite (what it generated before stands),
// whatever samples it (greedy with logprobs, n choices, a penalty, beam
// search), instead of drawing a token whose log-probability is NaN; each
// is counted once, and every block is freed.
func TestNonFiniteLogitsFailTheRequest(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, bad := range []float32{float32(math.NaN()), inf, -inf} {
		m := &poisonedModel{hashModel: newHashModel(testVocab, 4096), from: 3, bad: bad}
		e := newTestEngine(t, m, func(c *Config) { c.MaxRunning = 3 })
		reqs := []Request{
			{Prompt: prompt(1, 9), MaxTokens: 20, IgnoreEOS: true, Logprobs: true, TopLogprobs: 2},
			{Prompt: prompt(2, 9), MaxTokens: 20, IgnoreEOS: true, N: 3, Sampling: Sampling{Temperature: 0.8, Seed: 1}},
			{Prompt: prompt(3, 9), MaxTokens: 20, IgnoreEOS: true, Sampling: Sampling{RepetitionPenalty: 1.3}},
			{Prompt: prompt(4, 9), MaxTokens: 20, IgnoreEOS: true, Beam: Beam{Width: 2, LengthPenalty: 1}},
		}
		for i, req := range reqs {
			m.from = m.forwards + 2 // the first token is fine, the second is not
			streams, err := e.SubmitN(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range streams {
				for range st.Tokens {
				}
				res := st.Result()
				if res.Finish != FinishError || !errors.Is(res.Err, ErrNonFinite) || !errors.Is(res.Err, sample.ErrNonFinite) {
					t.Fatalf("logit %v, request %d: finish %q, error %v; want an error wrapping ErrNonFinite", bad, i, res.Finish, res.Err)
				}
				if req.Beam.Width <= 1 && len(res.Tokens) != 1 {
					t.Errorf("logit %v, request %d: %d tokens before the bad logits, want 1", bad, i, len(res.Tokens))
				}
				for _, lp := range res.Logprobs {
					if lp.Logprob != lp.Logprob {
						t.Errorf("logit %v, request %d: a NaN log-probability was reported", bad, i)
					}
				}
			}
		}
		var n uint64
		e.do(func() { n = e.sched.totals.NonFiniteLogits })
		if n != 6 {
			t.Errorf("logit %v: %d requests counted as failed for non-finite logits, want 6 (3 choices, 3 others)", bad, n)
		}
		checkDrained(t, e)
	}
}

// TestTinyRepetitionPenaltyRefused: a repetition penalty small enough to
// overflow a logit to +Inf is refused at submission, naming the field.
func TestTinyRepetitionPenaltyRefused(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 4096), nil)
	_, err := e.Submit(context.Background(), Request{Prompt: prompt(1, 4), MaxTokens: 3, Sampling: Sampling{RepetitionPenalty: 1e-45}})
	var inv *InvalidError
	if !errors.As(err, &inv) || inv.Param != "repetition_penalty" {
		t.Fatalf("Submit: %v, want an InvalidError for repetition_penalty", err)
	}
}

// callQueued reports whether a call (Pin, Flush, ...) waits for the
// scheduler to run it.
func (e *Engine) callQueued() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.calls) > 0
}
