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
