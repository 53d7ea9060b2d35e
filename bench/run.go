package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prefixd/prefixd/engine"
)

// Mode is one engine configuration a workload runs under.
type Mode struct {
	Name     string
	Batching engine.Batching
	KVAlloc  engine.KVAlloc
	Cache    bool          // the prefix cache
	TTL      time.Duration // the cache's default TTL; 0: the engine's
	Width    int           // MaxRunning (the batch width); 0: the workload's
	// CachedFirst admits waiting requests with the longest cached prefix
	// first (engine.Config.CachedFirst).
	CachedFirst bool
}

// EngineShape is the part of engine.Config a workload fixes for all its
// modes.
type EngineShape struct {
	NumBlocks      int // KV pool size in blocks
	BlockSize      int // default 16
	MaxRunning     int // default 64
	MaxBatchTokens int // default 2048
	PrefillChunk   int // default 512
}

// Workload is a named set of requests and the modes to compare it under.
type Workload struct {
	Name   string
	Params string // the generator's parameters, for the report
	Shape  EngineShape
	Modes  []Mode

	Requests []Request      // open loop: each submitted at its Arrival
	Chats    []Conversation // closed loop: each turn after the previous reply
	Think    time.Duration  // chat: pause between a reply and the next turn

	// Scripted ends each request after its Request.Output tokens by
	// forcing EOS (see script); the modes must turn the prefix cache off.
	Scripted bool
}

// Result is the measurement of one workload under one mode. Durations are
// in milliseconds, rates per second of wall time from the first arrival to
// the last completion.
type Result struct {
	Workload string `json:"workload"`
	Mode     string `json:"mode"`
	Width    int    `json:"width"`

	Requests        int     `json:"requests"`
	Failed          int     `json:"failed"`
	Seconds         float64 `json:"seconds"`
	PromptTokens    int     `json:"prompt_tokens"`
	GeneratedTokens int     `json:"generated_tokens"`
	CachedTokens    int     `json:"cached_tokens"`
	PrefillTokens   int     `json:"prefill_tokens"` // prompt tokens computed
	TokensPerSec    float64 `json:"tokens_per_sec"` // generated
	RequestsPerSec  float64 `json:"requests_per_sec"`
	TTFTp50         float64 `json:"ttft_p50_ms"`
	TTFTp99         float64 `json:"ttft_p99_ms"`
	ITLp50          float64 `json:"itl_p50_ms"`
	ITLp99          float64 `json:"itl_p99_ms"`
	HitRate         float64 `json:"hit_rate"`      // cached / prompt tokens
	KVEfficiency    float64 `json:"kv_efficiency"` // slots used / allocated, mean over steps
	PeakRunning     int     `json:"peak_running"`  // most sequences running at once (beams count each)
	PeakBlocks      int     `json:"peak_blocks"`   // most blocks held by block tables at once
	SlotUtil        float64 `json:"slot_util"`     // generated tokens / (width x steps)
	// SlotUtilLoaded is SlotUtil over the steps taken while requests were
	// waiting: a loaded server's utilisation, without the final drain.
	SlotUtilLoaded float64 `json:"slot_util_loaded"`
	Steps          int     `json:"steps"`
	Preemptions    int     `json:"preemptions"`
	LeakedBlocks   int     `json:"leaked_blocks"` // blocks not free after the run and a cache flush
}

// probe is the engine's Observer: it samples the engine's snapshot after
// every forward pass. Its fields are written on the scheduler goroutine and
// read only after the engine has closed.
type probe struct {
	e           *engine.Engine
	skip        int // forward passes not to count (the gate's)
	steps       int
	effSum      float64
	peakRunning int
	peakBlocks  int

	prev                     engine.Stats
	loadedSteps, loadedToken uint64
}

func (p *probe) Step(rows, tokens int, d time.Duration) {
	if p.skip > 0 {
		p.skip--
		return
	}
	p.steps++
	s := p.e.Stats() // as of the previous iteration's end
	if b := s.Blocks; b.SlotsAllocated > 0 {
		p.effSum += float64(b.SlotsUsed) / float64(b.SlotsAllocated)
	} else {
		p.effSum++
	}
	p.peakRunning = max(p.peakRunning, s.Running)
	p.peakBlocks = max(p.peakBlocks, s.Blocks.InUse)
	// The snapshot lags one iteration: its token count grew by what the
	// previous pass generated, which ran while the snapshot before it
	// reported the queue.
	if p.steps > 1 && p.prev.Waiting > 0 {
		p.loadedSteps++
		p.loadedToken += s.GeneratedTokens - p.prev.GeneratedTokens
	}
	p.prev = s
}

func (p *probe) Finished(*engine.Result) {}

// outcome is one request's measurement.
type outcome struct {
	submitted time.Time
	res       engine.Result
	err       error
}

// Run runs w under mode on model m (whose EOS token is eos) and measures
// it. It builds a fresh engine, so modes never share a cache.
func Run(ctx context.Context, m engine.Model, eos int32, w *Workload, mode Mode) (Result, error) {
	t, err := newTrial(ctx, m, eos, w, mode)
	if err != nil {
		return Result{}, err
	}
	defer t.e.Close(context.Background())
	// The gate request holds the first forward pass while everything that
	// arrives at time 0 is queued behind it.
	gateStream, err := t.e.Submit(ctx, engine.Request{Prompt: []int32{lowToken}, MaxTokens: 1, IgnoreEOS: true, Cache: engine.Cache{Disabled: true}})
	if err != nil {
		return Result{}, err
	}
	later, start, err := t.queueFirst(w)
	if err != nil {
		t.gate.open()
		return Result{}, err
	}
	t0 := time.Now()
	t.gate.open()
	close(start)
	gateStream.Result()
	t.submitLater(later, t0)
	t.wg.Wait()
	return t.measure(w, mode, t0)
}

// trial is one Run in progress: the engine under test, its gate and
// probe, and the outcomes of the requests sent to it.
type trial struct {
	ctx   context.Context
	e     *engine.Engine
	gate  *gate
	probe *probe
	width int

	mu   sync.Mutex
	outs []outcome
	wg   sync.WaitGroup // one per request or conversation in flight
}

// newTrial builds the engine of w under mode, its model behind a closed
// gate.
func newTrial(ctx context.Context, m engine.Model, eos int32, w *Workload, mode Mode) (*trial, error) {
	sh := w.Shape
	width := cmp0(mode.Width, cmp0(sh.MaxRunning, 64))
	var model engine.Model = m
	if w.Scripted {
		if mode.Cache {
			return nil, errors.New("bench: a scripted workload needs the prefix cache off")
		}
		model = newScripted(m, eos)
	}
	gm, g := newGated(model)
	p := &probe{skip: 1}
	e, err := engine.New(engine.Config{
		Model: gm, EOS: eos,
		NumBlocks: sh.NumBlocks, BlockSize: sh.BlockSize, MaxRunning: width,
		MaxBatchTokens: max(cmp0(sh.MaxBatchTokens, 2048), width), PrefillChunk: sh.PrefillChunk,
		MaxWaiting: 1 << 16, Batching: mode.Batching, KVAlloc: mode.KVAlloc,
		DisablePrefixCache: !mode.Cache, CachedFirst: mode.CachedFirst, DefaultTTL: mode.TTL, MaxTTL: max(mode.TTL, time.Hour),
		Observer: p,
	})
	if err != nil {
		return nil, err
	}
	p.e = e
	return &trial{ctx: ctx, e: e, gate: g, probe: p, width: width}, nil
}

// submit sends r to the engine and returns its stream and when it was
// sent.
func (t *trial) submit(r *Request) (*engine.Stream, time.Time, error) {
	req := engine.Request{Namespace: r.Namespace, Prompt: r.Prompt, MaxTokens: r.MaxTokens, IgnoreEOS: r.Output == 0}
	if r.Beam > 1 {
		req.Beam = engine.Beam{Width: r.Beam}
	}
	at := time.Now()
	st, err := t.e.Submit(t.ctx, req)
	return st, at, err
}

func (t *trial) record(o outcome) {
	t.mu.Lock()
	t.outs = append(t.outs, o)
	t.mu.Unlock()
}

// wait records the outcome of the request sent at at; it is one of wg's.
func (t *trial) wait(st *engine.Stream, at time.Time) {
	defer t.wg.Done()
	res := st.Result()
	o := outcome{submitted: at, res: res}
	if res.Finish == engine.FinishError || res.Finish == engine.FinishCancelled {
		o.err = fmt.Errorf("request %s: %v", res.Finish, res.Err)
	}
	t.record(o)
}

// queueFirst submits, behind the closed gate, the requests that arrive at
// time 0 and every conversation's first turn, and returns the requests
// that arrive later. The conversations go on, each turn after the reply
// to the one before, once start is closed.
func (t *trial) queueFirst(w *Workload) (later []*Request, start chan struct{}, err error) {
	for i := range w.Requests {
		r := &w.Requests[i]
		if r.Arrival > 0 {
			later = append(later, r)
			continue
		}
		st, at, err := t.submit(r)
		if err != nil {
			return nil, nil, err
		}
		t.wg.Add(1)
		go t.wait(st, at)
	}
	start = make(chan struct{})
	for ci := range w.Chats {
		t.wg.Add(1)
		ready := make(chan struct{})
		go t.chat(&w.Chats[ci], w.Think, ready, start)
		<-ready
	}
	return later, start, nil
}

// chat runs conversation c: it submits the first turn, closes ready, waits
// for start, then sends each further turn think after the reply to the
// one before. It is one of wg's.
func (t *trial) chat(c *Conversation, think time.Duration, ready, start chan struct{}) {
	defer t.wg.Done()
	var conv []int32
	for k, msg := range c.Messages {
		if k > 0 {
			select {
			case <-time.After(think):
			case <-t.ctx.Done():
				t.record(outcome{err: t.ctx.Err()})
				return
			}
		}
		conv = append(conv, msg...)
		st, at, err := t.submit(&Request{Prompt: conv, MaxTokens: c.Reply})
		if k == 0 {
			close(ready)
			<-start
		}
		if err != nil {
			t.record(outcome{err: err})
			return
		}
		res := st.Result()
		o := outcome{submitted: at, res: res}
		if res.Finish != engine.FinishLength {
			o.err = fmt.Errorf("chat turn %s: %v", res.Finish, res.Err)
		}
		t.record(o)
		conv = append(slices.Clip(conv), res.Tokens...)
	}
}

// submitLater submits each of later at its arrival time after t0 (at once
// when ctx has ended, so that each records its failure).
func (t *trial) submitLater(later []*Request, t0 time.Time) {
	for _, r := range later {
		if d := time.Until(t0.Add(r.Arrival)); d > 0 {
			select {
			case <-time.After(d):
			case <-t.ctx.Done():
			}
		}
		st, at, err := t.submit(r)
		if err != nil {
			t.record(outcome{err: err})
			continue
		}
		t.wg.Add(1)
		go t.wait(st, at)
	}
}

// measure checks the engine once every request has finished (nothing but
// the cache may hold blocks, and after a flush nothing) and sums the run
// from t0 to the last completion.
func (t *trial) measure(w *Workload, mode Mode, t0 time.Time) (Result, error) {
	end := t0
	for _, o := range t.outs {
		if done := o.submitted.Add(o.res.Timing.Total); o.err == nil && done.After(end) {
			end = done
		}
	}
	if _, err := t.e.Flush("", true); err != nil {
		return Result{}, err
	}
	if err := t.e.Check(); err != nil {
		return Result{}, fmt.Errorf("bench: engine invariants after %s/%s: %w", w.Name, mode.Name, err)
	}
	st := t.e.Stats()
	if err := t.e.Close(context.Background()); err != nil {
		return Result{}, err
	}
	p, width := t.probe, t.width
	res := summarize(t.outs, end.Sub(t0), width)
	res.Workload, res.Mode = w.Name, mode.Name
	res.Steps = p.steps
	res.Preemptions = int(st.Preemptions)
	res.LeakedBlocks = st.Blocks.Total - st.Blocks.Free
	res.PeakRunning, res.PeakBlocks = p.peakRunning, p.peakBlocks
	if p.steps > 0 {
		res.KVEfficiency = p.effSum / float64(p.steps)
		res.SlotUtil = float64(res.GeneratedTokens) / float64(width*p.steps)
	}
	if p.loadedSteps > 0 {
		res.SlotUtilLoaded = float64(p.loadedToken) / float64(uint64(width)*p.loadedSteps)
	}
	if res.Failed > 0 {
		for _, o := range t.outs {
			if o.err != nil {
				return res, fmt.Errorf("bench: %s/%s: %d of %d requests failed, first: %w", w.Name, mode.Name, res.Failed, res.Requests, o.err)
			}
		}
	}
	return res, t.ctx.Err()
}

// summarize aggregates per-request outcomes.
func summarize(outs []outcome, wall time.Duration, width int) Result {
	r := Result{Requests: len(outs), Width: width, Seconds: wall.Seconds()}
	var ttft, itl []float64
	for _, o := range outs {
		if o.err != nil {
			r.Failed++
			continue
		}
		u := o.res.Usage
		r.PromptTokens += u.PromptTokens
		r.GeneratedTokens += u.CompletionTokens
		r.CachedTokens += u.CachedTokens
		r.PrefillTokens += u.PrefillTokens
		ttft = append(ttft, ms(o.res.Timing.FirstToken))
		for _, d := range o.res.Timing.InterTokens {
			itl = append(itl, ms(d))
		}
	}
	if s := wall.Seconds(); s > 0 {
		r.TokensPerSec = float64(r.GeneratedTokens) / s
		r.RequestsPerSec = float64(r.Requests-r.Failed) / s
	}
	if r.PromptTokens > 0 {
		r.HitRate = float64(r.CachedTokens) / float64(r.PromptTokens)
	}
	r.TTFTp50, r.TTFTp99 = percentile(ttft, 50), percentile(ttft, 99)
	r.ITLp50, r.ITLp99 = percentile(itl, 50), percentile(itl, 99)
	return r
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile returns the p-th percentile of xs (nearest rank), 0 for none.
// It sorts xs.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(math.Ceil(p/100*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}
