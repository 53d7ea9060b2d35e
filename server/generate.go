package server

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
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
		maxTTL:       time.Duration(s.maxTTL.Load()),
		bos:          -1,
	}
	if s.cfg.Tokenizer != nil {
		lim.haveTokenizer = true
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
	CompletionTokens int `json:"completion_tokens"`
	PrefillTokens    int `json:"prefill_tokens"`
	Preemptions      int `json:"preemptions"`
}

func toUsage(u engine.Usage) usageJSON {
	return usageJSON{u.PromptTokens, u.CachedTokens, u.HostCachedTokens, u.CompletionTokens, u.PrefillTokens, u.Preemptions}
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
	req, err := g.toEngine(s.encoder(), s.limits())
	req.Namespace = namespace(ctx)
	return req, err
}

// submit queues req under a context that outlives the RequestCtx: the
// caller must call cancel once it no longer wants the result.
func (s *Server) submit(req engine.Request) (*engine.Stream, context.CancelFunc, error) {
	rctx, cancel := context.WithCancel(s.base)
	st, err := s.eng.Submit(rctx, req)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	s.trace.record(&req, st)
	return st, cancel, nil
}

// result waits for a non-streaming request's result and, if it failed,
// answers with its error. ok is false when there is nothing more to write:
// the request failed, or its client hung up.
func (s *Server) result(ctx *fasthttp.RequestCtx, st *engine.Stream, cancel context.CancelFunc) (res engine.Result, ok bool) {
	res, gone := s.await(ctx, st, cancel)
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

// await waits for a non-streaming request's result. fasthttp tells a
// handler nothing when its client disconnects, so await peeks at the
// connection every hangupPoll and cancels the request once the client has
// hung up (gone); the engine then frees its blocks at its next iteration.
func (s *Server) await(ctx *fasthttp.RequestCtx, st *engine.Stream, cancel context.CancelFunc) (res engine.Result, gone bool) {
	tick := time.NewTicker(hangupPoll)
	defer tick.Stop()
	for {
		select {
		case <-st.Done():
			return st.Result(), false
		case <-tick.C:
			if hungUp(ctx.Conn()) {
				cancel()
				s.log.Debug("client hung up; request cancelled", "path", string(ctx.Path()))
				return st.Result(), true
			}
		}
	}
}

// resultError is the error a finished request reports, if any.
func resultError(res *engine.Result) *apiError {
	switch res.Finish {
	case engine.FinishError:
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
// leaves while its request is queued is noticed too.
func (s *Server) streamSSE(ctx *fasthttp.RequestCtx, id string, st *engine.Stream, cancel context.CancelFunc, f sseFormat) {
	ctx.SetStatusCode(200)
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.Response.Header.Set("X-Accel-Buffering", "no")
	ctx.Response.Header.Set("X-Request-Id", id)
	keepAlive, log := s.cfg.KeepAlive, s.log
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer cancel()
		// An opening comment sends the headers at once, before the first
		// token (fasthttp writes them with the first chunk).
		w.WriteString(": stream " + id + "\n\n")
		if w.Flush() != nil {
			return
		}
		sent := 0 // bytes of text streamed
		tick := time.NewTicker(keepAlive)
		defer tick.Stop()
		for {
			select {
			case t, ok := <-st.Tokens:
				if !ok {
					res := st.Result()
					if writeEvent(w, f.final(&res, res.Text[min(sent, len(res.Text)):])) != nil {
						return
					}
					w.WriteString("data: [DONE]\n\n")
					w.Flush()
					return
				}
				sent += len(t.Text)
				if ev := f.token(t.ID, t.Text); ev != nil {
					if writeEvent(w, ev) != nil {
						log.Debug("stream client gone", "id", id)
						return
					}
				}
				// Flush only when caught up: a burst of tokens (a beam
				// result, or a slow reader) goes out in one write.
				if len(st.Tokens) == 0 && w.Flush() != nil {
					log.Debug("stream client gone", "id", id)
					return
				}
			case <-tick.C:
				w.WriteString(": keep-alive\n\n")
				if w.Flush() != nil {
					log.Debug("stream client gone", "id", id)
					return
				}
			}
		}
	})
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
