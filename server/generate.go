package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/prefixd/prefixd/engine"
)

// Limits on what one request may list.
const (
	maxStopStrings = 16
	maxStopBytes   = 256
	maxStopIDs     = 64
)

// limits returns the request limits now in force.
func (s *Server) limits() limits {
	lim := limits{
		vocab:        s.ecfg.Model.VocabSize(),
		maxModelLen:  s.ecfg.MaxModelLen,
		maxPrompt:    s.cfg.MaxPromptTokens,
		maxTokens:    s.cfg.MaxTokens,
		defaultMax:   s.cfg.DefaultMaxTokens,
		maxBeam:      s.ecfg.MaxBeamWidth,
		maxStops:     maxStopStrings,
		maxStopBytes: maxStopBytes,
		maxStopIDs:   maxStopIDs,
		maxLogprobs:  s.cfg.MaxLogprobEntries,
		maxTTL:       time.Duration(s.maxTTL.Load()),
		bos:          -1,
	}
	if s.cfg.Tokenizer != nil {
		lim.haveTokenizer, lim.tokenizer = true, s.cfg.Tokenizer
		lim.grammars = s.grammars
		lim.bos = s.cfg.Tokenizer.BOS()
		if a, ok := s.cfg.Tokenizer.(bosAdder); ok && !a.AddBOS() {
			lim.bos = -1 // GPT-2's BOS is its EOS: prompts do not start with it
		}
	}
	return lim
}

// encoder returns the tokenizer as an Encoder of text prompts, nil when
// there is none. Text that spells a control token (<|im_start|>) becomes
// that token, as Hugging Face tokenizers (and so vLLM) encode prompts by
// default, where the tokenizer has control tokens.
func (s *Server) encoder() Encoder {
	if s.cfg.Tokenizer == nil {
		return nil
	}
	if se, ok := s.cfg.Tokenizer.(specialEncoder); ok {
		return specialAsEncoder{se}
	}
	return s.cfg.Tokenizer
}

// specialAsEncoder encodes with EncodeSpecial.
type specialAsEncoder struct{ specialEncoder }

// Encode implements Encoder.
func (e specialAsEncoder) Encode(text string) []int32 { return e.EncodeSpecial(text) }

// usageJSON is the native API's usage object.
type usageJSON struct {
	PromptTokens     int `json:"prompt_tokens"`
	CachedTokens     int `json:"cached_tokens"`
	HostCachedTokens int `json:"host_cached_tokens"`
	CacheWriteTokens int `json:"cache_write_tokens"` // prompt tokens this request added to the cache
	CompletionTokens int `json:"completion_tokens"`
	PrefillTokens    int `json:"prefill_tokens"`
	Preemptions      int `json:"preemptions"`
}

func toUsage(u engine.Usage) usageJSON {
	return usageJSON{u.PromptTokens, u.CachedTokens, u.HostCachedTokens, u.CacheWriteTokens, u.CompletionTokens, u.PrefillTokens, u.Preemptions}
}

// timingJSON is a request's latency, in milliseconds.
type timingJSON struct {
	QueueMs   float64 `json:"queue_ms"`
	TTFTMs    float64 `json:"ttft_ms"`
	TotalMs   float64 `json:"total_ms"`
	ITLMsMean float64 `json:"itl_ms_mean"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func toTiming(t engine.Timing) timingJSON {
	var sum time.Duration
	for _, d := range t.InterTokens {
		sum += d
	}
	var mean time.Duration
	if n := len(t.InterTokens); n > 0 {
		mean = sum / time.Duration(n)
	}
	return timingJSON{ms(t.Queue), ms(t.FirstToken), ms(t.Total), ms(mean)}
}

// generateResponse is the body of a /generate response.
type generateResponse struct {
	ID           string     `json:"id"`
	Text         string     `json:"text"`
	IDs          []int32    `json:"ids"`
	FinishReason string     `json:"finish_reason"`
	Usage        usageJSON  `json:"usage"`
	Timing       timingJSON `json:"timing"`
}

// tokenEvent is one token of a /generate_stream response.
type tokenEvent struct {
	ID   int32  `json:"id"`
	Text string `json:"text"`
}

// finalEvent ends a /generate_stream response. Text is whatever was held
// back from the token events (the tail of a possible stop string or of a
// UTF-8 sequence).
type finalEvent struct {
	Text         string     `json:"text"`
	FinishReason string     `json:"finish_reason"`
	Usage        usageJSON  `json:"usage"`
	Timing       timingJSON `json:"timing"`
	Error        *apiError  `json:"error,omitempty"`
}

// parseGenerate decodes and validates a /generate body.
func (s *Server) parseGenerate(ctx *fasthttp.RequestCtx) (engine.Request, *apiError) {
	var g generateRequest
	if err := decodeStrict(ctx.PostBody(), &g); err != nil {
		return engine.Request{}, err
	}
	lim, err := s.requestLimits(ctx)
	if err != nil {
		return engine.Request{}, err
	}
	req, err := g.toEngine(s.encoder(), lim)
	req.Namespace = namespace(ctx)
	return req, err
}

// submit queues req under a context that outlives the RequestCtx: the
// caller must call cancel once it no longer wants the result.
func (s *Server) submit(req engine.Request) (*engine.Stream, context.CancelFunc, error) {
	streams, cancel, err := s.submitChoices(req)
	if err != nil {
		return nil, nil, err
	}
	return streams[0], cancel, nil
}

// result waits for a non-streaming request's result and, if it failed,
// answers with its error. ok is false when there is nothing more to write:
// the request failed, or its client hung up.
func (s *Server) result(ctx *fasthttp.RequestCtx, st *engine.Stream, cancel context.CancelFunc) (res engine.Result, ok bool) {
	res, gone := s.await(ctx, st, cancel)
	accessOf(ctx).result = &res
	if gone {
		return res, false // nobody to answer
	}
	if e := resultError(&res); e != nil {
		s.writeError(ctx, e)
		return res, false
	}
	return res, true
}

// hangupPoll is how often a non-streaming request checks that its client
// is still connected.
const hangupPoll = 100 * time.Millisecond

// continueProbe is the interim response await writes to a client that
// sent FIN: any HTTP/1.1 client reads past a 1xx response to the final one
// (RFC 9110, section 15.2), and a client that has closed its socket
// answers the bytes with a reset.
const continueProbe = "HTTP/1.1 100 Continue\r\n\r\n"

// await waits for a non-streaming request's result. fasthttp tells a
// handler nothing when its client disconnects, so await peeks at the
// connection every hangupPoll and cancels the request once the client has
// hung up (gone); the engine then frees its blocks at its next iteration.
// For HTTP/1.1, only a reset or a failed write is a hang-up: a client may
// shut down its sending side once its request is out (curl scripts, some
// proxies) and still read the answer. On FIN, await writes continueProbe
// once, which a closed socket resets; the connection's earlier answers
// have all been flushed (serveHTTP sees to it), so the probe never lands
// inside one. An HTTP/1.0 client may not be sent a 1xx response (RFC 9110,
// section 15.2), so for it a FIN is the hang-up.
func (s *Server) await(ctx *fasthttp.RequestCtx, st *engine.Stream, cancel context.CancelFunc) (res engine.Result, gone bool) {
	tick := time.NewTicker(hangupPoll)
	defer tick.Stop()
	w := hangupWatch{conn: ctx.Conn(), finIsHangup: !ctx.Request.Header.IsHTTP11()}
	for {
		select {
		case <-st.Done():
			return st.Result(), false
		case <-tick.C:
			if w.hungUp() {
				cancel()
				s.metrics.hangups.Inc()
				s.log.Debug("client hung up; request cancelled", "path", string(ctx.Path()))
				return st.Result(), true
			}
		}
	}
}

// hangupWatch looks for one request's client hanging up.
type hangupWatch struct {
	conn        net.Conn
	finIsHangup bool // a FIN alone is a hang-up (HTTP/1.0)
	probed      bool // continueProbe has been written
}

// hungUp reports whether the client has closed its connection. On the
// first FIN it sees it writes continueProbe and looks again at once: a
// client on the same host has usually reset before the write returns, any
// other is seen at the next look.
func (w *hangupWatch) hungUp() bool {
	reset, eof := peek(w.conn)
	if eof && w.finIsHangup {
		return true
	}
	if eof && !w.probed {
		w.probed = true
		if _, err := io.WriteString(w.conn, continueProbe); err != nil {
			return true
		}
		reset, _ = peek(w.conn)
	}
	return reset
}

// resultError is the error a finished request reports, if any.
func resultError(res *engine.Result) *apiError {
	switch res.Finish {
	case engine.FinishError:
		if errors.Is(res.Err, engine.ErrNoRoom) {
			// Operator pins took the room the request was admitted with:
			// the server's state, not the request, and it passes with an
			// unpin or an expiry, so the client may retry.
			return &apiError{Status: 503, Type: typeUnavailable, Message: "the request was accepted but cannot run now: " + res.Err.Error()}
		}
		if errors.Is(res.Err, engine.ErrNonFinite) {
			// The model's fault, not the request's: its weights hold NaN
			// or Inf, or its activations overflowed.
			return &apiError{Status: 500, Type: typeServer, Message: "generation failed: the model's output is not a number " +
				"(NaN or an infinity), so no token could be drawn; the model file may be corrupt: " + res.Err.Error()}
		}
		msg := "generation failed"
		if res.Err != nil {
			msg += ": " + res.Err.Error()
		}
		return &apiError{Status: 500, Type: typeServer, Message: msg}
	case engine.FinishCancelled:
		// The server's own context only ends when a drain runs out of time.
		return &apiError{Status: 503, Type: typeUnavailable, Message: "the request was cancelled: the server is shutting down"}
	}
	return nil
}

// startGenerate parses and submits a /generate or /generate_stream
// request. If it fails it has answered, and ok is false.
func (s *Server) startGenerate(ctx *fasthttp.RequestCtx) (st *engine.Stream, cancel context.CancelFunc, ok bool) {
	req, aerr := s.parseGenerate(ctx)
	if aerr != nil {
		s.writeError(ctx, aerr)
		return nil, nil, false
	}
	st, cancel, err := s.submit(req)
	if err != nil {
		s.writeSubmitError(ctx, err)
		return nil, nil, false
	}
	return st, cancel, true
}

func (s *Server) handleGenerate(ctx *fasthttp.RequestCtx) {
	st, cancel, ok := s.startGenerate(ctx)
	if !ok {
		return
	}
	defer cancel()
	res, ok := s.result(ctx, st, cancel)
	if !ok {
		return
	}
	id := newID("gen-")
	ctx.Response.Header.Set("X-Request-Id", id)
	s.writeJSON(ctx, 200, generateResponse{
		ID:           id,
		Text:         res.Text,
		IDs:          nonNil(res.Tokens),
		FinishReason: string(res.Finish),
		Usage:        toUsage(res.Usage),
		Timing:       toTiming(res.Timing),
	})
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

func (s *Server) handleGenerateStream(ctx *fasthttp.RequestCtx) {
	st, cancel, ok := s.startGenerate(ctx)
	if !ok {
		return
	}
	id := newID("gen-")
	s.streamSSE(ctx, id, st, cancel, sseFormat{
		token: func(tok int32, text string) any { return tokenEvent{ID: tok, Text: text} },
		final: func(res *engine.Result, rest string) any {
			return finalEvent{Text: rest, FinishReason: string(res.Finish), Usage: toUsage(res.Usage),
				Timing: toTiming(res.Timing), Error: resultError(res)}
		},
	})
}

// sseFormat shapes a stream's events; token returning nil sends no event.
type sseFormat struct {
	token func(tok int32, text string) any
	final func(res *engine.Result, rest string) any
}

// streamSSE answers with server-sent events: one per token, a final one,
// then [DONE]. Each token event carries the text the engine released with
// the token; the final one carries the rest of Result.Text (text held back
// while it might begin a stop string, when generation ended at EOS), so the
// events' texts concatenate to the non-streaming text. The events are
// written by a goroutine fasthttp starts; a failed write means the client
// is gone, and cancels the request so its blocks are freed at the engine's
// next iteration. Comments are sent while no token comes, so a client that
// leaves while its request is queued is noticed too. An HTTP/1.0 client,
// which cannot read a chunked body, gets the events in a body that ends
// when the connection closes.
func (s *Server) streamSSE(ctx *fasthttp.RequestCtx, id string, st *engine.Stream, cancel context.CancelFunc, f sseFormat) {
	s.serveSSE(ctx, id, cancel, func(w *bufio.Writer) engine.Result { return s.writeEvents(w, id, st, cancel, f) })
}

// serveSSE answers with a stream of server-sent events that events writes
// (returning the request's result, for the access log), over chunked
// HTTP/1.1 or, for an HTTP/1.0 client, a body that ends when the
// connection closes.
func (s *Server) serveSSE(ctx *fasthttp.RequestCtx, id string, cancel context.CancelFunc, events func(w *bufio.Writer) engine.Result) {
	headers := [][2]string{
		{"Content-Type", "text/event-stream"},
		{"Cache-Control", "no-cache"},
		{"X-Accel-Buffering", "no"},
		{"X-Request-Id", id},
	}
	// The access-log line waits until the writer ends: the handler returns
	// first.
	a := accessOf(ctx)
	a.streamed = true
	write := func(w *bufio.Writer) {
		defer cancel()
		res := events(w)
		a.result = &res
		s.logAccess(a, 200)
	}
	if !ctx.Request.Header.IsHTTP11() {
		ctx.HijackSetNoResponse(true)
		ctx.Hijack(func(c net.Conn) {
			if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
				defer s.conns.forget(u.UnsafeConn())
			}
			w := bufio.NewWriter(c)
			w.WriteString("HTTP/1.0 200 OK\r\nServer: prefixd\r\nConnection: close\r\n")
			for _, h := range headers {
				w.WriteString(h[0] + ": " + h[1] + "\r\n")
			}
			w.WriteString("\r\n")
			write(w)
			w.Flush()
		})
		return
	}
	ctx.SetStatusCode(200)
	for _, h := range headers {
		ctx.Response.Header.Set(h[0], h[1])
	}
	ctx.SetBodyStreamWriter(write)
}

// writeEvents writes a stream's events to w until the request ends, or
// the client is gone and it cancels the request, and returns the request's
// result.
func (s *Server) writeEvents(w *bufio.Writer, id string, st *engine.Stream, cancel context.CancelFunc, f sseFormat) engine.Result {
	gone := func() engine.Result {
		s.log.Debug("stream client gone", "id", id)
		cancel()
		return st.Result()
	}
	// An opening comment sends the headers at once, before the first
	// token (fasthttp writes them with the first chunk).
	w.WriteString(": stream " + id + "\n\n")
	if w.Flush() != nil {
		return gone()
	}
	sent := 0 // bytes of text streamed
	tick := time.NewTicker(s.cfg.KeepAlive)
	defer tick.Stop()
	for {
		select {
		case t, ok := <-st.Tokens:
			if !ok {
				res := st.Result()
				if writeEvent(w, f.final(&res, res.Text[min(sent, len(res.Text)):])) != nil {
					return res
				}
				w.WriteString("data: [DONE]\n\n")
				w.Flush()
				return res
			}
			sent += len(t.Text)
			if ev := f.token(t.ID, t.Text); ev != nil {
				if writeEvent(w, ev) != nil {
					return gone()
				}
			}
			// Flush only when caught up: a burst of tokens (a beam
			// result, or a slow reader) goes out in one write.
			if len(st.Tokens) == 0 && w.Flush() != nil {
				return gone()
			}
		case <-tick.C:
			w.WriteString(": keep-alive\n\n")
			if w.Flush() != nil {
				return gone()
			}
		}
	}
}

// writeEvent writes one "data:" event.
func writeEvent(w *bufio.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.WriteString("data: ")
	w.Write(b)
	_, err = w.WriteString("\n\n")
	return err
}
