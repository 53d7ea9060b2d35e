// Package engine runs prefixd's continuous (iteration-level) batching: one
// scheduler goroutine owns every sequence, the block pool, the prefix tree
// and the eviction manager. Each iteration retires finished and cancelled
// sequences, admits waiting requests (reusing their cached prefixes), runs
// one forward pass over a batch of decode rows and prefill chunks under a
// token budget, samples, and appends; blocks that fill are inserted into the
// prefix cache at once. With a Speculator, decode rows also verify drafted
// tokens (speculative decoding, see speculative.go).
package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prefixd/prefixd/batch"
	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/radix"
)

// Row is one sequence's part of a forward pass (see batch.Row).
type Row = batch.Row

// Model is what the engine needs from a model.
type Model interface {
	// VocabSize is the number of logits per row.
	VocabSize() int
	// MaxSeqLen is the longest sequence the model supports.
	MaxSeqLen() int
	// NewKV allocates the K/V storage of a pool of numBlocks blocks; every
	// later Forward reads and writes it. It may return nil for a model that
	// keeps no K/V (scheduler benchmarks).
	NewKV(numBlocks, blockSize int) (blockstore.Storage, error)
	// Forward runs one batch and returns VocabSize logits per row that asks
	// for them, in row order. The engine does not retain rows; the returned
	// slice is valid until the next call.
	Forward(rows []Row) ([]float32, error)
}

// Tokenizer turns generated tokens into text, for streaming, stop strings
// and Result.Text. model.Tokenizer implements it.
type Tokenizer interface {
	// AppendPiece appends the bytes token id adds to a text that follows
	// other tokens; a piece may be part of a UTF-8 sequence.
	AppendPiece(dst []byte, id int32) []byte
}

// Batching selects the scheduling policy.
type Batching int

// Batching policies. Static is the baseline: a batch forms when the engine
// is idle and runs until its longest member ends.
const (
	Continuous Batching = iota
	Static
)

// KVAlloc selects how sequences get KV blocks.
type KVAlloc int

// KV allocation modes. Contiguous is the baseline: a sequence reserves
// blocks for prompt + max tokens when admitted.
const (
	Paged KVAlloc = iota
	Contiguous
)

// Config configures an Engine. Zero values take the documented defaults.
type Config struct {
	Model     Model     // required
	Tokenizer Tokenizer // optional; needed for stop strings
	EOS       int32     // end-of-sequence token; negative for none

	// NumBlocks is the KV pool size in blocks; required unless KVBytes is
	// set. Any positive size serves: Submit refuses, naming the pool size,
	// a request whose prompt + max tokens need more blocks than the pool
	// minus operator pins, and every request it accepts runs unless pins
	// added later take its room (ErrNoRoom). One block serves requests of
	// up to BlockSize tokens in all.
	NumBlocks      int
	KVBytes        int64 // KV pool size in bytes, when NumBlocks is 0: as many blocks as fit
	BlockSize      int   // token slots per block; default 16
	MaxRunning     int   // sequences in the running batch; default 256
	MaxBatchTokens int   // tokens per forward pass (decodes + prefill chunks); default 2048
	PrefillChunk   int   // most prompt tokens of one sequence per pass; default 512
	MaxWaiting     int   // queued requests before ErrQueueFull; default 1024
	MaxModelLen    int   // longest prompt + output; default and cap: the model's
	MaxBeamWidth   int   // default 8 (at most MaxRunning)

	Batching           Batching
	KVAlloc            KVAlloc
	DisablePrefixCache bool
	// CachedFirst admits, among the first 32 waiting requests, the one
	// with the longest cached prefix first; a request passed over 16 times
	// is admitted next regardless, so none starves.
	CachedFirst bool

	// Cache policy (see package eviction); zero values take its defaults.
	DefaultTTL, MaxTTL time.Duration
	MaxPinnedFraction  float64
	HostTierBytes      int64 // 0 disables the host tier
	// NamespaceCacheShare, in (0, 1], is each namespace's share of the
	// pool: under pressure a namespace beyond it loses its own blocks
	// first (see eviction.Config.NamespaceShare); 0 disables shares.
	NamespaceCacheShare float64
	// DiskTier, if set, is the tier below the host tier (or below the
	// device pool, without one): it receives what they drop, Close saves
	// the whole cache into it, and requests' prefixes are promoted from
	// it. The caller closes it, after the engine.
	DiskTier DiskTier
	// RemoteTier, if set, is the tier replicas share, below the others:
	// blocks are written through to it as they are computed, and a waiting
	// request's prefix is fetched from it before admission (see
	// scheduler.awaitsFetch). The caller closes it, after the engine.
	RemoteTier RemoteTier

	// Speculator, if set, drafts tokens that decode steps verify
	// (speculative decoding, see speculative.go); nil: none, and requests'
	// Prediction only counts as rejected in their usage.
	Speculator Speculator
	// SpecTokens (K) is the most tokens a sequence drafts per step; default
	// 7 with a Speculator, at most MaxSpecTokens.
	SpecTokens int
	// SpecMaxRows is the most decode rows a step may have and still
	// draft: beyond it a step is bound by compute, where verifying drafts
	// costs about what it saves. Default 4 (see defaultSpecMaxRows);
	// negative: no limit.
	SpecMaxRows int

	Clock    clock.Clock // default: the system clock
	Observer Observer    // optional
	Samples  kvcache.Samples
	// CacheEvents, if set, observes every change of the cached blocks
	// (KV events for routers); nil costs nothing.
	CacheEvents CacheEvents
}

// Observer receives measurements for metrics. Calls come from the
// scheduler goroutine and must return quickly.
type Observer interface {
	// Step reports one forward pass: rows, tokens computed, wall time.
	Step(rows, tokens int, d time.Duration)
	// Finished reports a finished request.
	Finished(res *Result)
}

func (c *Config) fill() error {
	if c.Model == nil {
		return errors.New("engine: Config.Model is required")
	}
	if c.NumBlocks < 0 || c.NumBlocks == 0 && c.KVBytes <= 0 {
		return fmt.Errorf("engine: Config.NumBlocks (%d) or Config.KVBytes (%d) must be positive", c.NumBlocks, c.KVBytes)
	}
	def := func(v *int, d int, name string) error {
		if *v == 0 {
			*v = d
		}
		if *v < 0 {
			return fmt.Errorf("engine: Config.%s must be positive, got %d", name, *v)
		}
		return nil
	}
	maxLen := c.Model.MaxSeqLen()
	for _, f := range []struct {
		v    *int
		d    int
		name string
	}{
		{&c.BlockSize, blockstore.DefaultBlockSize, "BlockSize"},
		{&c.MaxRunning, 256, "MaxRunning"},
		{&c.MaxBatchTokens, 2048, "MaxBatchTokens"},
		{&c.PrefillChunk, 512, "PrefillChunk"},
		{&c.MaxWaiting, 1024, "MaxWaiting"},
		{&c.MaxModelLen, maxLen, "MaxModelLen"},
	} {
		if err := def(f.v, f.d, f.name); err != nil {
			return err
		}
	}
	if err := def(&c.MaxBeamWidth, min(8, c.MaxRunning), "MaxBeamWidth"); err != nil {
		return err
	}
	if c.MaxModelLen > maxLen {
		return fmt.Errorf("engine: Config.MaxModelLen %d exceeds the model's %d", c.MaxModelLen, maxLen)
	}
	if c.MaxBeamWidth > c.MaxRunning {
		return fmt.Errorf("engine: Config.MaxBeamWidth %d exceeds MaxRunning %d: a beam group runs all its beams at once",
			c.MaxBeamWidth, c.MaxRunning)
	}
	if c.MaxBatchTokens < c.MaxRunning {
		return fmt.Errorf("engine: Config.MaxBatchTokens (%d) must cover a decode row per running sequence (%d)",
			c.MaxBatchTokens, c.MaxRunning)
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	switch {
	case c.SpecTokens < 0 || c.SpecTokens > MaxSpecTokens:
		return fmt.Errorf("engine: Config.SpecTokens must be in [0, %d], got %d", MaxSpecTokens, c.SpecTokens)
	case c.SpecTokens == 0 && c.Speculator != nil:
		c.SpecTokens = defaultSpecTokens
	}
	switch {
	case c.SpecMaxRows == 0:
		c.SpecMaxRows = defaultSpecMaxRows
	case c.SpecMaxRows < 0:
		c.SpecMaxRows = c.MaxRunning
	}
	return nil
}

// Engine schedules requests onto a model. It is safe for concurrent use:
// Submit and the admin methods may be called from any goroutine.
type Engine struct {
	cfg     Config
	pool    *blockstore.Pool
	tree    *radix.Tree
	cache   *eviction.Manager
	host    *eviction.HostTier
	disk    DiskTier
	reads   chan struct{} // a slot per prefetch running; see prefetch
	fetches chan struct{} // a slot per remote fetch running; see awaitsFetch

	mu     sync.Mutex
	inbox  []*seq
	calls  []func()
	closed bool
	queued int // requests submitted and not yet finished or admitted

	wake chan struct{}
	done chan struct{}

	statsMu sync.Mutex
	stats   Stats // published by the scheduler after each iteration

	sched      scheduler
	stopped    atomic.Bool
	closeTiers sync.Once    // the first Close's wait for background reads and tiers' close
	maxTTL     atomic.Int64 // the cache's maximum TTL, for Submit's check
	pinned     atomic.Int64 // blocks held by operator pins, for Submit's check
}

// New starts an engine's scheduler goroutine. Close stops it.
func New(cfg Config) (*Engine, error) {
	e, err := build(cfg)
	if err != nil {
		return nil, err
	}
	go e.loop()
	return e, nil
}

// build assembles an engine without starting its goroutine.
func build(cfg Config) (*Engine, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if cfg.NumBlocks == 0 {
		probe, err := cfg.Model.NewKV(1, cfg.BlockSize)
		if err != nil || probe == nil {
			return nil, fmt.Errorf("engine: Config.KVBytes needs a model with K/V storage (%v); set NumBlocks", err)
		}
		if cfg.NumBlocks = int(cfg.KVBytes / int64(probe.BlockBytes())); cfg.NumBlocks == 0 {
			return nil, fmt.Errorf("engine: Config.KVBytes %d is less than one block (%d bytes)", cfg.KVBytes, probe.BlockBytes())
		}
	}
	st, err := cfg.Model.NewKV(cfg.NumBlocks, cfg.BlockSize)
	if err != nil {
		return nil, fmt.Errorf("engine: allocating KV storage: %w", err)
	}
	pool, err := blockstore.New(blockstore.Config{NumBlocks: cfg.NumBlocks, BlockSize: cfg.BlockSize, Storage: st})
	if err != nil {
		return nil, err
	}
	tree, err := radix.New(cfg.BlockSize)
	if err != nil {
		return nil, err
	}
	tree.SetObserver(cfg.CacheEvents)
	e := &Engine{cfg: cfg, pool: pool, tree: tree, disk: cfg.DiskTier, wake: make(chan struct{}, 1), done: make(chan struct{}),
		reads: make(chan struct{}, maxPrefetches), fetches: make(chan struct{}, maxRemoteFetches)}
	if (cfg.HostTierBytes > 0 || cfg.DiskTier != nil || cfg.RemoteTier != nil) && st == nil {
		return nil, errors.New("engine: a host, disk or remote tier needs a model with K/V storage")
	}
	if cfg.HostTierBytes > 0 {
		hc := eviction.HostTierConfig{CapacityBytes: cfg.HostTierBytes, BlockBytes: st.BlockBytes()}
		if cfg.DiskTier != nil {
			hc.Next = cfg.DiskTier
		}
		if e.host, err = eviction.NewHostTier(hc); err != nil {
			return nil, err
		}
	}
	e.cache, err = eviction.New(eviction.Config{
		Tree: tree, Pool: pool, Clock: cfg.Clock,
		DefaultTTL: cfg.DefaultTTL, MaxTTL: cfg.MaxTTL, MaxPinnedFraction: cfg.MaxPinnedFraction,
		Tiers: e.tiers(), Samples: cfg.Samples, Observer: cfg.CacheEvents, NamespaceShare: cfg.NamespaceCacheShare,
	})
	if err != nil {
		return nil, err
	}
	_, maxTTL := e.cache.TTLs()
	e.maxTTL.Store(int64(maxTTL))
	e.sched.init(e)
	e.publish()
	return e, nil
}

// tiers returns the cache tiers below the device pool, fastest first.
func (e *Engine) tiers() []eviction.Tier {
	var out []eviction.Tier
	if e.host != nil {
		out = append(out, e.host)
	}
	if e.disk != nil {
		out = append(out, e.disk)
	}
	if e.cfg.RemoteTier != nil {
		out = append(out, e.cfg.RemoteTier)
	}
	return out
}

// Token is one generated token on a Stream.
type Token struct {
	ID int32
	// Text is the output text this token releases, if the engine has a
	// tokenizer. Text that may begin a stop string, or that ends inside a
	// UTF-8 sequence, is held back for a later token; the Texts streamed
	// always concatenate to a prefix of Result.Text, and to all of it unless
	// generation ended at EOS or a stop token while text was held back.
	Text string
	// Logprob and Top are the token's log-probability and the most likely
	// alternatives, if the request asked (Request.Logprobs).
	Logprob float32
	Top     []Logprob
}

// Stream delivers a request's tokens as they are generated, then its
// Result. Beam search delivers the winning hypothesis's tokens at the end.
type Stream struct {
	// Tokens carries each generated token; it is closed when the request
	// finishes. It is buffered for the whole output, so a slow reader never
	// stalls the engine.
	Tokens <-chan Token
	tokens chan Token
	done   chan struct{}
	result Result
	stop   func() bool // detaches the context watcher
}

// Done is closed when the request has finished and Result is ready.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Result waits for the request to finish and returns its outcome.
func (s *Stream) Result() Result {
	<-s.done
	return s.result
}

// Submit validates req, a request of one choice (N at most 1; SubmitN
// takes any), and queues it. The request is cancelled when ctx ends: its
// blocks are freed at the next iteration and its Result says
// FinishCancelled. Errors wrap ErrInvalid, or are ErrQueueFull, ErrClosed
// or ctx's own error.
func (e *Engine) Submit(ctx context.Context, req Request) (*Stream, error) {
	if req.N > 1 {
		return nil, fmt.Errorf("%w: Submit takes one choice, not n = %d: use SubmitN", ErrInvalid, req.N)
	}
	streams, err := e.SubmitN(ctx, req)
	if err != nil {
		return nil, err
	}
	return streams[0], nil
}

// SubmitN is Submit for a request of req.N choices: it returns one Stream
// per choice. The request takes one place in the waiting queue and is
// prefilled once; its choices then run as sequences of their own, sharing
// the prompt's blocks. A cancel ends every choice.
func (e *Engine) SubmitN(ctx context.Context, req Request) ([]*Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := e.Validate(&req); err != nil {
		return nil, err
	}
	now := e.cfg.Clock.Now()
	s, err := newSeq(e, &req, 0, now)
	if err != nil {
		return nil, err
	}
	streams := []*Stream{s.stream}
	for i := 1; i < req.N; i++ {
		c, err := newSeq(e, &req, i, now)
		if err != nil {
			return nil, err
		}
		c.choiceOf = s
		s.choices = append(s.choices, c)
		streams = append(streams, c.stream)
	}
	// The scheduler checks callerGone on every iteration, so a cancel is
	// seen at the next one; the watcher only wakes an idle scheduler. It is
	// set before the scheduler can see the request, which then owns
	// stream.stop.
	s.callerGone = ctx.Done()
	s.stream.stop = context.AfterFunc(ctx, e.poke)
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		s.stream.stop()
		return nil, ErrClosed
	case e.queued >= e.cfg.MaxWaiting:
		e.mu.Unlock()
		s.stream.stop()
		return nil, ErrQueueFull
	}
	e.queued++
	e.inbox = append(e.inbox, s)
	e.mu.Unlock()
	e.poke()
	return streams, nil
}

// Validate reports whether the engine could ever serve req as asked, with
// an *InvalidError (matching ErrInvalid) if not: the checks Submit makes before it
// queues a request. It is safe for concurrent use.
func (e *Engine) Validate(req *Request) error {
	if err := req.validate(e.cfg.Model.VocabSize(), e.cfg.MaxModelLen, e.cfg.MaxBeamWidth); err != nil {
		return err
	}
	if need, pinned := e.blocksToFinish(req), int(e.pinned.Load()); need > e.cfg.NumBlocks-pinned {
		held := ""
		if pinned > 0 {
			held = fmt.Sprintf(", %d of them held by operator pins", pinned)
		}
		return invalid("max_tokens", "prompt (%d tokens) + max_tokens (%d) needs %d KV blocks of %d tokens at its longest; the pool has %d%s",
			len(req.Prompt), req.MaxTokens, need, e.cfg.BlockSize, e.cfg.NumBlocks, held)
	}
	if ttl, maxTTL := req.Cache.TTL, time.Duration(e.maxTTL.Load()); ttl > maxTTL {
		return invalid("cache.ttl", "cache TTL %v is above the maximum %v", ttl, maxTTL)
	}
	if bps := req.Cache.Breakpoints; len(bps) > 0 {
		if maxTTL := time.Duration(e.maxTTL.Load()); bps[0].TTL > maxTTL {
			return invalid("cache.breakpoints", "cache breakpoint TTL %v is above the maximum %v", bps[0].TTL, maxTTL)
		}
	}
	return nil
}

// blocksToFinish is the most blocks a request can hold at once.
func (e *Engine) blocksToFinish(r *Request) int {
	blocks := func(tokens int) int { return blockstore.BlocksFor(tokens, e.cfg.BlockSize) }
	width := max(r.Beam.Width, r.N)
	if width <= 1 {
		return blocks(len(r.Prompt) + r.MaxTokens)
	}
	// The prompt's blocks are shared; each beam (or choice) owns its output
	// blocks plus one copied partial block. A contiguous root reserves the
	// output too, which its beams share until they write.
	need := blocks(len(r.Prompt)) + width*(blocks(r.MaxTokens)+1)
	if e.cfg.KVAlloc == Contiguous {
		need += blocks(r.MaxTokens)
	}
	return need
}

func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// do runs fn on the scheduler goroutine and waits for it.
func (e *Engine) do(fn func()) error {
	ran := make(chan struct{})
	e.mu.Lock()
	if e.stopped.Load() {
		e.mu.Unlock()
		return ErrClosed
	}
	e.calls = append(e.calls, func() {
		fn()
		e.publish() // Stats reflects what fn changed once do returns
		close(ran)
	})
	e.mu.Unlock()
	e.poke()
	select {
	case <-ran:
		return nil
	case <-e.done:
		return ErrClosed
	}
}

// Close stops accepting requests, lets running and waiting ones finish
// until ctx ends, then cancels what remains and stops the scheduler.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		e.do(func() { e.sched.cancelAll() })
	})
	defer stop()
	e.do(func() { e.sched.draining = true })
	<-e.done
	e.closeTiers.Do(func() {
		// Wait for the prefetches and remote fetches still running (the
		// scheduler starts no more): they write to the host tier, closed
		// below, and read tiers their owner closes after this returns.
		for _, slots := range []chan struct{}{e.reads, e.fetches} {
			for range cap(slots) {
				slots <- struct{}{}
			}
		}
		if e.disk != nil && !e.cfg.DisablePrefixCache {
			// The scheduler has stopped: the cache is this goroutine's now.
			e.cache.SaveAll(e.disk.Save)
		}
		if e.host != nil {
			e.host.Close()
		}
	})
	return ctx.Err()
}
