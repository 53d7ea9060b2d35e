package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// HTTP workload names: the suite's generators, driven over the network.
const (
	HTTPSharedPrefix = "shared-prefix"
	HTTPSkew         = "skew"
	HTTPChat         = "chat"
	HTTPBeam         = "beam"
)

// HTTPWorkloads lists the workloads RunHTTP can send.
var HTTPWorkloads = []string{HTTPSharedPrefix, HTTPSkew, HTTPChat, HTTPBeam}

// Bounds that keep an HTTP run finite whatever it is given.
const (
	// MaxSoak is the longest --soak.
	MaxSoak = time.Hour
	// DefaultMaxRequests bounds the requests of a run.
	DefaultMaxRequests = 1 << 20
	// DefaultMaxInFlight bounds the requests open at once; an arrival
	// beyond it waits for one to finish (and counts as delayed).
	DefaultMaxInFlight = 512
	// DefaultRequestTimeout bounds one request, streaming included.
	DefaultRequestTimeout = 5 * time.Minute
	// drainCheckTimeout bounds the wait for the server to go idle before
	// its blocks are counted.
	drainCheckTimeout = time.Minute
)

// HTTPConfig configures RunHTTP. Zero values take the documented
// defaults.
type HTTPConfig struct {
	// URL is the base URL of a running `prefixd serve`, e.g.
	// http://127.0.0.1:8080. Its host must be a loopback address or
	// localhost (see CheckLoopback).
	URL string
	// APIKey is sent as the bearer token of generation requests.
	APIKey string
	// AdminToken, if set, is used after the run to read the server's block
	// accounting (GET /v1/cache) once it is idle; Result.Blocks is then
	// filled in and a block still in use is a leak.
	AdminToken string
	// Workload is one of HTTPWorkloads; default shared-prefix.
	Workload string
	// Size picks the suite's sizes (Default or Tiny).
	Size Size
	// Seed seeds the generators; each soak round k uses Seed+k, so rounds
	// send fresh prompts.
	Seed uint64
	// Rate is the open-loop arrival rate per second (Poisson; chat:
	// conversations started per second). 0 keeps the workload's own
	// arrivals (shared-prefix: 24/s, tiny 1000/s; skew and chat: all at
	// once). A soak needs a positive Rate.
	Rate float64
	// Soak, if positive, repeats the workload as one arrival process until
	// Soak has passed (at most MaxSoak), then waits for what is in flight.
	Soak time.Duration
	// MaxRequests bounds the requests sent; default DefaultMaxRequests.
	MaxRequests int
	// MaxInFlight bounds the requests open at once; default
	// DefaultMaxInFlight.
	MaxInFlight int
	// RequestTimeout bounds each request; default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// ChatAPI sends the chat workload's conversations as OpenAI messages
	// to /v1/chat/completions (the server's chat template renders them)
	// instead of token IDs to /generate_stream; only for chat.
	ChatAPI bool
}

// HTTPResult is what a client of the server measured. Durations are in
// milliseconds, rates per second of wall time from the first request sent
// to the last one finished.
type HTTPResult struct {
	URL      string  `json:"url"`
	Workload string  `json:"workload"`
	Rate     float64 `json:"rate"`
	Soak     float64 `json:"soak_seconds"`
	Seconds  float64 `json:"seconds"`

	Sent      int            `json:"sent"`
	Completed int            `json:"completed"`
	Failed    int            `json:"failed"`
	Errors    map[string]int `json:"errors"` // by HTTP status, "stream: <type>" or "transport"
	// Delayed counts arrivals that waited for a free in-flight slot: the
	// load was no longer open-loop for them.
	Delayed int `json:"delayed"`

	PromptTokens    int     `json:"prompt_tokens"`
	CachedTokens    int     `json:"cached_tokens"`
	GeneratedTokens int     `json:"generated_tokens"`
	TokensPerSec    float64 `json:"tokens_per_sec"`
	RequestsPerSec  float64 `json:"requests_per_sec"`
	TTFTp50         float64 `json:"ttft_p50_ms"`
	TTFTp99         float64 `json:"ttft_p99_ms"`
	ITLp50          float64 `json:"itl_p50_ms"`
	ITLp99          float64 `json:"itl_p99_ms"`
	HitRate         float64 `json:"hit_rate"` // usage.cached_tokens / prompt tokens

	// ChatAPI tells that the chat workload went through
	// /v1/chat/completions.
	ChatAPI bool `json:"chat_api,omitempty"`
	// Turns are the chat workload's completed requests by turn: turn k
	// after the first reuses turns before it, so its hit rate shows the
	// prefix cache at work.
	Turns []TurnUsage `json:"turns,omitempty"`

	// Blocks is the server's block accounting once idle after the run;
	// nil without an admin token.
	Blocks *ServerBlocks `json:"blocks,omitempty"`
	// Server is what the server's own figures (GET /v1/cache, sampled
	// while the run lasts) say of it; nil without an admin token.
	Server *ServerFigures `json:"server,omitempty"`
}

// TurnUsage sums the usage of the chat turns of one index.
type TurnUsage struct {
	Requests     int `json:"requests"`
	PromptTokens int `json:"prompt_tokens"`
	CachedTokens int `json:"cached_tokens"`
}

// HitRate returns the share of the turns' prompt tokens that were cached.
func (t TurnUsage) HitRate() float64 {
	if t.PromptTokens == 0 {
		return 0
	}
	return float64(t.CachedTokens) / float64(t.PromptTokens)
}

// ServerFigures are server-side figures of a run: the prompt tokens the
// server computed (prefill) during it, the most sequences it ran at once,
// and its KV memory efficiency (slots used / allocated) averaged over the
// samples taken while it ran something.
type ServerFigures struct {
	PrefillTokens uint64  `json:"prefill_tokens"`
	PeakRunning   int     `json:"peak_running"`
	KVEfficiency  float64 `json:"kv_efficiency"`
	Samples       int     `json:"samples"`
}

// ServerBlocks is the server's KV block accounting (GET /v1/cache).
type ServerBlocks struct {
	Total      int `json:"total"`
	Free       int `json:"free"`
	InUse      int `json:"in_use"`
	CachedIdle int `json:"cached_idle"`
}

// Leaked returns the blocks still held by sequences after the run: 0
// unless the server leaks (or another client was using it).
func (r *HTTPResult) Leaked() int {
	if r.Blocks == nil {
		return 0
	}
	return r.Blocks.InUse
}

// ErrNotLoopback is returned for a target that is not on this machine.
var ErrNotLoopback = errors.New("bench: only loopback targets are allowed (127.0.0.0/8, ::1 or localhost)")

// CheckLoopback parses rawURL and returns it if it is an http(s) URL whose
// host is localhost or a loopback IP address; names are not resolved.
func CheckLoopback(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("bench: target URL %q: %w", rawURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("bench: target URL %q: want an http:// URL", rawURL)
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return u, nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%w: %q has host %q", ErrNotLoopback, rawURL, host)
	}
	return u, nil
}

// loopbackOnly refuses, at connect time, any address that is not loopback,
// so that a name like localhost cannot lead elsewhere.
func loopbackOnly(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%w: refusing to connect to %s", ErrNotLoopback, address)
	}
	return nil
}

// httpItem is one arrival: a request, or a conversation to run.
type httpItem struct {
	at        time.Duration
	prompt    []int32
	maxTokens int
	beam      int // beam width; 0 for sampling
	chat      *Conversation
}

// httpRound returns round k of the workload, arrivals counted from the
// round's start (the first at 0), and the think time of its chats.
func httpRound(c *HTTPConfig, k int) ([]httpItem, time.Duration, error) {
	tiny := c.Size == Tiny
	pick := func(def, t int) int {
		if tiny {
			return t
		}
		return def
	}
	seed := c.Seed + uint64(k)
	var items []httpItem
	var think time.Duration
	switch c.Workload {
	case HTTPSharedPrefix:
		rate := c.Rate
		if rate == 0 {
			rate = float64(pick(24, 1000))
		}
		reqs, err := SharedPrefix(SharedPrefixConfig{Groups: pick(4, 2), PerGroup: pick(16, 4), System: pick(576, 144),
			Question: pick(64, 16), Output: pick(16, 4), Rate: rate, Seed: seed})
		if err != nil {
			return nil, 0, err
		}
		for _, r := range reqs {
			items = append(items, httpItem{at: r.Arrival, prompt: r.Prompt, maxTokens: r.MaxTokens})
		}
	case HTTPSkew:
		reqs, err := Skew(SkewConfig{Requests: pick(256, 16), Prompt: 16, Seed: seed})
		if err != nil {
			return nil, 0, err
		}
		for _, r := range reqs {
			n := r.MaxTokens
			if tiny {
				n = max(1, n/8)
			}
			items = append(items, httpItem{prompt: r.Prompt, maxTokens: n})
		}
	case HTTPChat:
		chats, err := Chat(ChatConfig{Conversations: pick(8, 3), Turns: pick(4, 3), System: pick(128, 32),
			Message: pick(48, 16), Reply: pick(32, 8), Seed: seed})
		if err != nil {
			return nil, 0, err
		}
		think = 250 * time.Millisecond
		if tiny {
			think = 0
		}
		for i := range chats {
			items = append(items, httpItem{chat: &chats[i]})
		}
	case HTTPBeam:
		reqs, err := Beam(BeamConfig{Requests: pick(8, 2), Shared: pick(384, 64), Unique: pick(32, 8), Output: pick(32, 4), Seed: seed})
		if err != nil {
			return nil, 0, err
		}
		for _, r := range reqs {
			items = append(items, httpItem{prompt: r.Prompt, maxTokens: r.MaxTokens, beam: r.Beam})
		}
	default:
		return nil, 0, fmt.Errorf("bench: unknown HTTP workload %q (have %s)", c.Workload, strings.Join(HTTPWorkloads, ", "))
	}
	// Workloads without arrivals of their own get Poisson ones at Rate.
	if c.Workload != HTTPSharedPrefix && c.Rate > 0 {
		r := rand.New(rand.NewPCG(seed, 0x68747470))
		var at time.Duration
		for i := range items {
			if i > 0 {
				at += time.Duration(r.ExpFloat64() / c.Rate * float64(time.Second))
			}
			items[i].at = at
		}
	}
	return items, think, nil
}

// httpRun is one RunHTTP's state.
type httpRun struct {
	c      HTTPConfig
	base   string
	client *http.Client
	slots  chan struct{}
	wg     sync.WaitGroup

	mu        sync.Mutex
	res       HTTPResult
	ttft, itl []float64
	first     time.Time // first request sent
	last      time.Time // last request finished
}

// RunHTTP drives a running `prefixd serve` with c's workload over
// /generate_stream (chat with ChatAPI: /v1/chat/completions) and measures it from the client side. It returns once
// every request it sent has finished; progress, if not nil, gets a line
// per soak round. A leak is reported in the result (HTTPResult.Leaked),
// not as an error.
func RunHTTP(ctx context.Context, c HTTPConfig, progress io.Writer) (*HTTPResult, error) {
	u, err := CheckLoopback(c.URL)
	if err != nil {
		return nil, err
	}
	if c.Workload == "" {
		c.Workload = HTTPSharedPrefix
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = DefaultMaxRequests
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	switch {
	case c.Rate < 0 || c.Soak < 0 || c.MaxRequests < 0 || c.MaxInFlight < 0 || c.RequestTimeout < 0:
		return nil, fmt.Errorf("bench: negative setting in %+v", c)
	case c.Soak > MaxSoak:
		return nil, fmt.Errorf("bench: a soak of %v is longer than the limit of %v", c.Soak, MaxSoak)
	case c.Soak > 0 && c.Rate == 0:
		return nil, errors.New("bench: a soak needs a positive arrival rate")
	case c.ChatAPI && c.Workload != HTTPChat:
		return nil, fmt.Errorf("bench: the chat API carries only the %s workload, not %s", HTTPChat, c.Workload)
	}
	if _, _, err := httpRound(&c, 0); err != nil {
		return nil, err
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: loopbackOnly}
	r := &httpRun{
		c:    c,
		base: strings.TrimSuffix(u.String(), "/"),
		client: &http.Client{
			Transport: &http.Transport{
				DialContext:         dialer.DialContext,
				MaxIdleConnsPerHost: c.MaxInFlight,
				DisableCompression:  true,
				Proxy:               nil, // never through a proxy: the target is this machine
			},
			// A redirect could lead off this machine.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		slots: make(chan struct{}, c.MaxInFlight),
	}
	defer r.client.CloseIdleConnections()
	r.res = HTTPResult{URL: r.base, Workload: c.Workload, Rate: c.Rate, Soak: c.Soak.Seconds(), ChatAPI: c.ChatAPI, Errors: map[string]int{}}
	if err := r.ping(ctx); err != nil {
		return nil, err
	}

	var sampled chan *ServerFigures
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	if c.AdminToken != "" {
		first, err := r.cacheStats(ctx) // before the first request
		if err != nil {
			return nil, err
		}
		sampled = make(chan *ServerFigures, 1)
		go func() { sampled <- r.sampleServer(sampleCtx, first) }()
	}

	// soakCtx ends new arrivals and chat turns when the soak does; it
	// lasts until every chat is done.
	soakCtx, stop := context.WithCancel(ctx)
	t0 := time.Now()
	if c.Soak > 0 {
		soakCtx, stop = context.WithDeadline(ctx, t0.Add(c.Soak))
	}
	r.arrive(ctx, soakCtx, t0, progress)
	r.wg.Wait()
	stop()
	stopSampling()

	res := &r.res
	if !r.first.IsZero() && r.last.After(r.first) {
		res.Seconds = r.last.Sub(r.first).Seconds()
		res.TokensPerSec = float64(res.GeneratedTokens) / res.Seconds
		res.RequestsPerSec = float64(res.Completed) / res.Seconds
	}
	if res.PromptTokens > 0 {
		res.HitRate = float64(res.CachedTokens) / float64(res.PromptTokens)
	}
	res.TTFTp50, res.TTFTp99 = percentile(r.ttft, 50), percentile(r.ttft, 99)
	res.ITLp50, res.ITLp99 = percentile(r.itl, 50), percentile(r.itl, 99)
	if c.AdminToken != "" {
		res.Server = <-sampled
		if res.Blocks, err = r.idleBlocks(ctx); err != nil {
			return res, err
		}
	}
	return res, ctx.Err()
}

// serverSamplePeriod is how often a run samples the server's figures.
const serverSamplePeriod = 100 * time.Millisecond

// sampleServer reads GET /v1/cache every serverSamplePeriod until ctx
// ends, and once more then, and returns what it saw since first. A failed
// read is skipped.
func (r *httpRun) sampleServer(ctx context.Context, first *cacheStats) *ServerFigures {
	read := func() *cacheStats {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		st, _ := r.cacheStats(rctx)
		return st
	}
	f := &ServerFigures{}
	var eff float64
	tick := time.NewTicker(serverSamplePeriod)
	defer tick.Stop()
	last := first
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
		}
		st := read()
		if st == nil {
			continue
		}
		last = st
		f.PeakRunning = max(f.PeakRunning, st.Running)
		if st.Running > 0 {
			eff += st.KVEfficiency
			f.Samples++
		}
	}
	f.PrefillTokens = last.PrefillTokens - first.PrefillTokens
	if f.Samples > 0 {
		f.KVEfficiency = eff / float64(f.Samples)
	}
	return f
}

// ping checks that a prefixd answers at the base URL.
func (r *httpRun) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", r.base+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("bench: no server at %s: %w", r.base, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("bench: %s/healthz answered %s", r.base, resp.Status)
	}
	return nil
}

// arrive sends the workload's arrivals on schedule from t0, round after
// round until soakCtx ends, and returns once the last is sent (the
// requests may still be running).
func (r *httpRun) arrive(ctx, soakCtx context.Context, t0 time.Time, progress io.Writer) {
	c := &r.c
	deadline, _ := soakCtx.Deadline()
	timer := time.NewTimer(0)
	defer timer.Stop()
	var offset time.Duration // the round's start, from t0
	sent := 0
	for k := 0; ; k++ {
		items, think, err := httpRound(c, k)
		if err != nil { // RunHTTP checked round 0; seeds do not change validity
			return
		}
		for _, it := range items {
			at := t0.Add(offset + it.at)
			if !deadline.IsZero() && at.After(deadline) {
				return
			}
			if d := time.Until(at); d > 0 {
				timer.Reset(d)
				select {
				case <-timer.C:
				case <-soakCtx.Done():
					return
				}
			}
			if sent >= c.MaxRequests || soakCtx.Err() != nil {
				return
			}
			if it.chat != nil {
				sent += len(it.chat.Messages) // at most; a soak's end may cut a chat short
				r.wg.Add(1)
				go r.runChat(ctx, soakCtx, it.chat, think)
				continue
			}
			if !r.acquire(soakCtx) {
				return
			}
			sent++
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				defer r.release()
				r.generate(ctx, it.prompt, it.maxTokens, it.beam)
			}()
		}
		if c.Soak == 0 {
			return
		}
		if progress != nil {
			r.mu.Lock()
			fmt.Fprintf(progress, "round %d sent at %.1f s: %d sent, %d completed, %d failed\n",
				k+1, time.Since(t0).Seconds(), r.res.Sent, r.res.Completed, r.res.Failed)
			r.mu.Unlock()
		}
		// The next round continues the arrival process: one more gap.
		last := time.Duration(0)
		if len(items) > 0 {
			last = items[len(items)-1].at
		}
		offset += last + time.Duration(float64(time.Second)/c.Rate)
	}
}

// acquire takes an in-flight slot, waiting (and counting a delay) if none
// is free; false if ctx ended first.
func (r *httpRun) acquire(ctx context.Context) bool {
	select {
	case r.slots <- struct{}{}:
		return true
	default:
	}
	r.mu.Lock()
	r.res.Delayed++
	r.mu.Unlock()
	select {
	case r.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *httpRun) release() { <-r.slots }

// runChat runs a conversation's turns one after another, think apart,
// until they are done or soakCtx ends between turns.
func (r *httpRun) runChat(ctx, soakCtx context.Context, conv *Conversation, think time.Duration) {
	defer r.wg.Done()
	var (
		prompt []int32       // token IDs, for /generate_stream
		msgs   []chatMessage // with ChatAPI
	)
	for k, msg := range conv.Messages {
		if k > 0 && think > 0 {
			t := time.NewTimer(think)
			select {
			case <-t.C:
			case <-soakCtx.Done():
				t.Stop()
				return
			}
		}
		if soakCtx.Err() != nil || !r.acquire(soakCtx) {
			return
		}
		var (
			usage *streamUsage
			ok    bool
		)
		if r.c.ChatAPI {
			msgs = append(msgs, chatMessage{"user", chatText(msg)})
			var reply string
			reply, usage, ok = r.chatTurn(ctx, msgs, conv.Reply)
			msgs = append(msgs, chatMessage{"assistant", reply})
		} else {
			prompt = append(prompt, msg...)
			var out []int32
			out, usage, ok = r.generate(ctx, prompt, conv.Reply, 0)
			prompt = append(prompt, out...)
		}
		r.release()
		if !ok {
			return
		}
		r.turn(k, usage)
	}
}

// turn adds a completed chat turn k's usage to the result's Turns.
func (r *httpRun) turn(k int, u *streamUsage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.res.Turns) <= k {
		r.res.Turns = append(r.res.Turns, TurnUsage{})
	}
	t := &r.res.Turns[k]
	t.Requests++
	t.PromptTokens += u.PromptTokens
	t.CachedTokens += u.CachedTokens
}
