package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prefixd/prefixd/blockstore"
)

const testVocab = 97

type modeCase struct {
	name string
	mod  func(*Config)
}

// cacheOff reports whether the mode disables the prefix cache.
func (mc modeCase) cacheOff() bool {
	var c Config
	mc.mod(&c)
	return c.DisablePrefixCache
}

// sharedModelPath returns a test model in ../shared/models, skipping the
// test if that folder is absent.
func sharedModelPath(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join("..", "..", "shared", "models", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("test model %s not available: %v", name, err)
	}
	return p
}

var modes = []modeCase{
	{"continuous/paged/cache", func(*Config) {}},
	{"continuous/paged/nocache", func(c *Config) { c.DisablePrefixCache = true }},
	{"continuous/contiguous/cache", func(c *Config) { c.KVAlloc = Contiguous }},
	{"static/paged/cache", func(c *Config) { c.Batching = Static }},
	{"static/contiguous/nocache", func(c *Config) { c.Batching = Static; c.KVAlloc = Contiguous; c.DisablePrefixCache = true }},
	{"continuous/cached-first", func(c *Config) { c.CachedFirst = true }},
}

func newTestEngine(t testing.TB, m Model, mod func(*Config)) *Engine {
	t.Helper()
	cfg := Config{
		Model: m, EOS: -1, NumBlocks: 256, BlockSize: 4,
		MaxRunning: 8, MaxBatchTokens: 64, PrefillChunk: 16,
	}
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// checkDrained asserts that with nothing running, every block is free or
// held by the prefix cache alone, and that a flush frees them all.
func checkDrained(t testing.TB, e *Engine) {
	t.Helper()
	var err error
	if e.do(func() {
		if err = e.cache.Check(); err != nil {
			return
		}
		if s := e.pool.Stats(); s.InUse != 0 {
			err = fmt.Errorf("after draining, %d blocks still in use: %+v", s.InUse, s)
			return
		}
		e.cache.Flush("", true)
		if s := e.pool.Stats(); s.Free != s.Total {
			err = fmt.Errorf("after a flush, %d of %d blocks free", s.Free, s.Total)
		}
	}) != nil {
		t.Fatal("engine closed")
	}
	if err != nil {
		t.Fatal(err)
	}
}

// submitAll submits reqs from the scheduler goroutine, so that they all
// arrive, in order, before its next iteration, and returns their streams.
func submitAll(t testing.TB, e *Engine, reqs []Request) []*Stream {
	t.Helper()
	var streams []*Stream
	var err error
	e.do(func() {
		for _, r := range reqs {
			var st *Stream
			if st, err = e.Submit(context.Background(), r); err != nil {
				return
			}
			streams = append(streams, st)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return streams
}

func prompt(seed, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((seed*31 + i*7) % testVocab)
	}
	return p
}

func run(t testing.TB, e *Engine, req Request) Result {
	t.Helper()
	st, err := e.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var streamed []int32
	for tok := range st.Tokens {
		streamed = append(streamed, tok.ID)
	}
	res := st.Result()
	if req.Beam.Width <= 1 && !slices.Equal(streamed, res.Tokens) {
		t.Fatalf("streamed %v, result %v", streamed, res.Tokens)
	}
	return res
}

func TestGreedyOutputsInEveryMode(t *testing.T) {
	system := prompt(1, 37)
	var reqs []Request
	for i := range 12 {
		p := append(slices.Clone(system), prompt(100+i, 3+i%5)...)
		if i%3 == 0 {
			p = prompt(200+i, 2+i) // unrelated prompts too
		}
		reqs = append(reqs, Request{Namespace: "t", Prompt: p, MaxTokens: 5 + (i*13)%40, IgnoreEOS: true})
	}
	for _, mc := range modes {
		t.Run(mc.name, func(t *testing.T) {
			e := newTestEngine(t, newHashModel(testVocab, 512), mc.mod)
			var wg sync.WaitGroup
			for i, req := range reqs {
				wg.Go(func() {
					res := run(t, e, req)
					want := expectGreedy(testVocab, req.Prompt, req.MaxTokens, -1)
					if !slices.Equal(res.Tokens, want) || res.Finish != FinishLength {
						t.Errorf("request %d: got %v (%s), want %v", i, res.Tokens, res.Finish, want)
					}
				})
			}
			wg.Wait()
			checkDrained(t, e)
		})
	}
}

func TestPrefixReuseSkipsPrefill(t *testing.T) {
	m := newHashModel(testVocab, 512)
	e := newTestEngine(t, m, nil)
	p := prompt(3, 50) // 12 whole blocks of 4, and 2 tokens
	first := run(t, e, Request{Namespace: "a", Prompt: p, MaxTokens: 3, IgnoreEOS: true})
	if first.Usage.CachedTokens != 0 || first.Usage.PrefillTokens != 50 {
		t.Fatalf("first request usage %+v", first.Usage)
	}
	second := run(t, e, Request{Namespace: "a", Prompt: p, MaxTokens: 3, IgnoreEOS: true})
	if second.Usage.CachedTokens != 48 || second.Usage.PrefillTokens != 2 {
		t.Fatalf("second request usage %+v, want 48 cached and 2 computed", second.Usage)
	}
	if !slices.Equal(first.Tokens, second.Tokens) {
		t.Fatalf("cached run %v differs from cold run %v", second.Tokens, first.Tokens)
	}
	other := run(t, e, Request{Namespace: "b", Prompt: p, MaxTokens: 3, IgnoreEOS: true})
	if other.Usage.CachedTokens != 0 {
		t.Fatalf("namespace b reused a's prefix: %+v", other.Usage)
	}
	off := run(t, e, Request{Namespace: "a", Prompt: p, MaxTokens: 3, IgnoreEOS: true, Cache: Cache{Disabled: true}})
	if off.Usage.CachedTokens != 0 || !slices.Equal(off.Tokens, first.Tokens) {
		t.Fatalf("cache-disabled request: %+v %v", off.Usage, off.Tokens)
	}
	s := e.Stats()
	// Computed: 50 (cold) + 2 (cached) + 50 (namespace b) + 50 (cache off).
	if s.CacheHitDevice != 48 || s.PrefillTokens != 152 {
		t.Fatalf("stats: hit %d prefill %d", s.CacheHitDevice, s.PrefillTokens)
	}
	checkDrained(t, e)
}

// stepLog records each forward pass's rows.
type stepLog struct {
	mu    sync.Mutex
	steps []int
}

func (l *stepLog) Step(rows, tokens int, _ time.Duration) {
	l.mu.Lock()
	l.steps = append(l.steps, tokens)
	l.mu.Unlock()
}
func (l *stepLog) Finished(*Result) {}

func TestChunkedPrefillNeverStallsDecodes(t *testing.T) {
	m := newHashModel(testVocab, 1024)
	log := &stepLog{}
	e := newTestEngine(t, m, func(c *Config) { c.Observer = log; c.MaxBatchTokens = 20; c.PrefillChunk = 8 })
	short, err := e.Submit(context.Background(), Request{Prompt: prompt(1, 3), MaxTokens: 60, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	long := run(t, e, Request{Prompt: prompt(2, 400), MaxTokens: 2, IgnoreEOS: true})
	res := short.Result()
	if want := expectGreedy(testVocab, prompt(1, 3), 60, -1); !slices.Equal(res.Tokens, want) {
		t.Fatal("short request output wrong")
	}
	if want := expectGreedy(testVocab, prompt(2, 400), 2, -1); !slices.Equal(long.Tokens, want) {
		t.Fatal("long request output wrong")
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for i, n := range log.steps {
		if n > 20 {
			t.Fatalf("step %d computed %d tokens, budget 20", i, n)
		}
	}
	// 400 prompt tokens in chunks of at most 8 while the short one decodes
	// a token per step: the long prompt took >= 50 steps and the short
	// request's 60 tokens were not held back behind it.
	if res.Timing.Total > 0 && len(res.Timing.InterTokens) != 59 {
		t.Fatalf("short request has %d inter-token gaps", len(res.Timing.InterTokens))
	}
}

func TestPreemptionUnderPressure(t *testing.T) {
	m := newHashModel(testVocab, 512)
	// 24 blocks of 4: six requests growing to ~60 tokens each cannot all fit.
	e := newTestEngine(t, m, func(c *Config) { c.NumBlocks = 24; c.MaxRunning = 6; c.MaxBatchTokens = 64 })
	var reqs []Request
	for i := range 6 {
		reqs = append(reqs, Request{Prompt: prompt(10+i, 10), MaxTokens: 50, IgnoreEOS: true})
	}
	for i, st := range submitAll(t, e, reqs) { // all six arrive together
		if want := expectGreedy(testVocab, reqs[i].Prompt, 50, -1); !slices.Equal(st.Result().Tokens, want) {
			t.Errorf("request %d after preemption: wrong output", i)
		}
	}
	if e.Stats().Preemptions == 0 {
		t.Fatal("expected preemptions with a 24-block pool")
	}
	// Each prompt is its own: a preempted request admitted again finds
	// what it cached before, and still counts one hit.
	top, err := e.Prefixes(1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range top {
		if p.Hits != 1 {
			t.Errorf("a %d-token prefix used by one request has %d hits", len(p.Tokens), p.Hits)
		}
	}
	checkDrained(t, e)
}

func TestSubmitRejects(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 64), func(c *Config) { c.NumBlocks = 8; c.MaxWaiting = 1 })
	for _, tc := range []struct {
		name string
		req  Request
	}{
		{"empty prompt", Request{MaxTokens: 1}},
		{"zero max tokens", Request{Prompt: []int32{1}}},
		{"negative max tokens", Request{Prompt: []int32{1}, MaxTokens: -2}},
		{"beyond model length", Request{Prompt: prompt(1, 60), MaxTokens: 5}},
		{"beyond pool", Request{Prompt: prompt(1, 30), MaxTokens: 5}},
		{"token outside vocab", Request{Prompt: []int32{1, testVocab}, MaxTokens: 1}},
		{"negative token", Request{Prompt: []int32{-1}, MaxTokens: 1}},
		{"temperature", Request{Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{Temperature: 3}}},
		{"top_p", Request{Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{TopP: 1.5}}},
		{"top_k", Request{Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{TopK: -1}}},
		{"beam too wide", Request{Prompt: []int32{1}, MaxTokens: 1, Beam: Beam{Width: 99}}},
		{"stop token outside vocab", Request{Prompt: []int32{1}, MaxTokens: 1, StopTokens: []int32{500}}},
		{"empty stop string", Request{Prompt: []int32{1}, MaxTokens: 1, StopStrings: []string{""}}},
		{"negative ttl", Request{Prompt: []int32{1}, MaxTokens: 1, Cache: Cache{TTL: -time.Second}}},
		{"ttl over max", Request{Prompt: []int32{1}, MaxTokens: 1, Cache: Cache{TTL: 100 * time.Hour}}},
		{"max tokens overflowing the length check", Request{Prompt: []int32{1, 2}, MaxTokens: math.MaxInt}},
		{"NaN temperature", Request{Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{Temperature: float32(math.NaN())}}},
		{"NaN top_p", Request{Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{TopP: float32(math.NaN())}}},
		{"NaN length penalty", Request{Prompt: []int32{1}, MaxTokens: 1, Beam: Beam{Width: 2, LengthPenalty: float32(math.NaN())}}},
		{"n through Submit", Request{Prompt: []int32{1}, MaxTokens: 1, N: 2}},
		{"n too large", Request{Prompt: []int32{1}, MaxTokens: 1, N: 99}},
		{"n with beams", Request{Prompt: []int32{1}, MaxTokens: 1, N: 2, Beam: Beam{Width: 2}}},
		{"logprobs with beams", Request{Prompt: []int32{1}, MaxTokens: 1, Logprobs: true, Beam: Beam{Width: 2}}},
		{"penalty with beams", Request{Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{PresencePenalty: 1}, Beam: Beam{Width: 2}}},
		{"top_logprobs too many", Request{Prompt: []int32{1}, MaxTokens: 1, Logprobs: true, TopLogprobs: 21}},
		{"top_logprobs without logprobs", Request{Prompt: []int32{1}, MaxTokens: 1, TopLogprobs: 2}},
		{"frequency penalty", Request{Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{FrequencyPenalty: 3}}},
		{"min_p", Request{Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{MinP: 2}}},
		{"logit bias outside vocab", Request{Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{LogitBias: map[int32]float32{testVocab: 1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.Submit(context.Background(), tc.req); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Submit: %v, want ErrInvalid", err)
			}
		})
	}
}

func TestQueueFull(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 512), func(c *Config) { c.MaxWaiting = 2; c.MaxRunning = 1; c.MaxBatchTokens = 8 })
	var streams []*Stream
	full := false
	for range 50 {
		st, err := e.Submit(context.Background(), Request{Prompt: prompt(1, 5), MaxTokens: 200, IgnoreEOS: true})
		if errors.Is(err, ErrQueueFull) {
			full = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	if !full {
		t.Fatal("never saw ErrQueueFull with MaxWaiting 2")
	}
	for _, st := range streams {
		st.Result()
	}
	checkDrained(t, e)
}

func TestCancellationFreesBlocks(t *testing.T) {
	m := newHashModel(testVocab, 4096)
	m.gate = make(chan struct{})
	e := newTestEngine(t, m, nil)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := e.Submit(ctx, Request{Prompt: prompt(1, 9), MaxTokens: 900, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	m.gate <- struct{}{} // one forward pass: the prompt, and a first token
	<-st.Tokens
	cancel()
	// A pass already under way (blocked at the gate) may complete; the
	// next iteration must see the cancel and run nothing more for it. The
	// scheduler may also see the cancel before it starts another pass, so
	// that pass is waited for only while the stream is not done.
	for passes := 0; ; passes++ {
		select {
		case <-st.Done():
		case m.gate <- struct{}{}:
			if passes == 1 {
				close(m.gate)
				t.Fatal("the engine ran another pass for a cancelled request")
			}
			continue
		}
		break
	}
	close(m.gate)
	res := st.Result()
	if res.Finish != FinishCancelled {
		t.Fatalf("finish %q, want cancelled", res.Finish)
	}
	// A request whose caller is already gone is refused.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := e.Submit(ctx2, Request{Prompt: prompt(2, 9), MaxTokens: 10}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Submit with a cancelled context: %v", err)
	}
	checkDrained(t, e)
}

func TestStopTokensAndEOS(t *testing.T) {
	p := prompt(5, 6)
	full := expectGreedy(testVocab, p, 30, -1)
	stopAt := 7
	e := newTestEngine(t, newHashModel(testVocab, 512), func(c *Config) { c.EOS = full[stopAt] })
	res := run(t, e, Request{Prompt: p, MaxTokens: 30})
	if res.Finish != FinishStop || !slices.Equal(res.Tokens, full[:stopAt]) {
		t.Fatalf("EOS: got %v (%s), want %v (stop)", res.Tokens, res.Finish, full[:stopAt])
	}
	res = run(t, e, Request{Prompt: p, MaxTokens: 30, IgnoreEOS: true, StopTokens: []int32{full[3]}})
	if res.Finish != FinishStop || !slices.Equal(res.Tokens, full[:3]) {
		t.Fatalf("stop token: got %v (%s), want %v", res.Tokens, res.Finish, full[:3])
	}
}

// byteTokenizer decodes token t as the letter 'a'+t%26.
type byteTokenizer struct{}

func (byteTokenizer) AppendPiece(dst []byte, id int32) []byte { return append(dst, byte('a'+id%26)) }

func (bt byteTokenizer) Decode(ids []int32) string {
	var b []byte
	for _, t := range ids {
		b = bt.AppendPiece(b, t)
	}
	return string(b)
}

func TestStopStrings(t *testing.T) {
	p := prompt(8, 6)
	full := expectGreedy(testVocab, p, 30, -1)
	text := byteTokenizer{}.Decode(full)
	stop := text[10:12]
	cut := len(text[:10])
	if i := index(text, stop); i < cut {
		cut = i
	}
	e := newTestEngine(t, newHashModel(testVocab, 512), func(c *Config) { c.Tokenizer = byteTokenizer{} })
	res := run(t, e, Request{Prompt: p, MaxTokens: 30, StopStrings: []string{stop}})
	if res.Finish != FinishStop || res.Text != text[:cut] {
		t.Fatalf("stop string %q: text %q (%s), want %q", stop, res.Text, res.Finish, text[:cut])
	}
}

func index(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return len(s)
}

func TestConcurrentSubmitAndCancel(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 512), func(c *Config) { c.NumBlocks = 64 })
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := Request{Namespace: fmt.Sprint("ns", i%3), Prompt: prompt(i%5, 10+i%7), MaxTokens: 20 + i%30, IgnoreEOS: true}
			st, err := e.Submit(ctx, req)
			if errors.Is(err, ErrQueueFull) {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			if i%4 == 0 {
				<-st.Tokens
				cancel()
			}
			res := st.Result()
			if res.Finish == FinishLength && !slices.Equal(res.Tokens, expectGreedy(testVocab, req.Prompt, req.MaxTokens, -1)) {
				t.Errorf("request %d: wrong output", i)
			}
		})
	}
	wg.Wait()
	checkDrained(t, e)
}

func TestStaticBatchWaitsForLongest(t *testing.T) {
	for _, b := range []Batching{Continuous, Static} {
		m := newHashModel(testVocab, 512)
		e := newTestEngine(t, m, func(c *Config) { c.Batching = b; c.MaxRunning = 2; c.MaxBatchTokens = 64 })
		var reqs []Request
		for i, n := range []int{40, 5, 5, 5} {
			reqs = append(reqs, Request{Prompt: prompt(i, 4), MaxTokens: n, IgnoreEOS: true})
		}
		for _, st := range submitAll(t, e, reqs) { // together and in order
			st.Result()
		}
		steps := m.forwards
		// Continuous: the three short requests share the slot beside the
		// long one, so about 40 steps. Static: the first batch (40, 5) runs
		// 40 steps before (5, 5) can start.
		if b == Continuous && steps > 44 || b == Static && steps < 45 {
			t.Errorf("batching %d took %d forward passes", b, steps)
		}
	}
}

func TestBlockAccountingAfterEveryWorkload(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 512), nil)
	run(t, e, Request{Namespace: "x", Prompt: prompt(1, 33), MaxTokens: 7, IgnoreEOS: true})
	var st blockstore.Stats
	e.do(func() { st = e.pool.Stats() })
	// 33 prompt + 7 generated = 40 tokens, but the last token's K/V is
	// never computed: 39 positions, 9 whole blocks cached.
	if st.CachedOnly != 9 || st.InUse != 0 {
		t.Fatalf("after one request: %+v, want 9 cached blocks", st)
	}
	checkDrained(t, e)
}
