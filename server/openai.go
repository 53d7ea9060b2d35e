package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/sample"
)

// The rule for request fields, for every endpoint: a field prefixd
// implements is honoured; a field OpenAI defines that prefixd does not
// implement is refused with a 400 naming it as unsupported; any other
// field is refused with a 400 naming it as unknown. Nothing is silently
// ignored, so a client never believes it got what it did not.
var unsupportedOpenAI = map[string]string{
	"echo":               "echo",
	"best_of":            "best_of",
	"suffix":             "suffix",
	"functions":          "function calling",
	"function_call":      "function calling",
	"audio":              "audio output",
	"modalities":         "output modalities",
	"reasoning_effort":   "reasoning effort",
	"web_search_options": "web search",
	"store":              "stored completions",
	"metadata":           "stored completions' metadata",
	"service_tier":       "service tiers",
}

// streamOptions is OpenAI's stream_options.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// openAIParams are the generation fields completions and chat share.
type openAIParams struct {
	MaxTokens           *int               `json:"max_tokens"`
	MaxCompletionTokens *int               `json:"max_completion_tokens"`
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	TopK                *int               `json:"top_k"`
	MinP                *float64           `json:"min_p"`
	FrequencyPenalty    *float64           `json:"frequency_penalty"`
	PresencePenalty     *float64           `json:"presence_penalty"`
	RepetitionPenalty   *float64           `json:"repetition_penalty"`
	LogitBias           map[string]float64 `json:"logit_bias"`
	N                   *int               `json:"n"`
	Seed                *uint64            `json:"seed"`
	Stop                stopList           `json:"stop"`
	Stream              bool               `json:"stream"`
	StreamOptions       *streamOptions     `json:"stream_options"`
	User                string             `json:"user"`
	// PromptCacheKey groups requests that share a prefix, as OpenAI's
	// routing hint: prefixd logs it in the access-log line and echoes
	// nothing else; it is never an isolation boundary (the namespace,
	// from the API key, is).
	PromptCacheKey *string `json:"prompt_cache_key"`
	// PromptCacheRetention is "in_memory" (or OpenAI's SDK spelling
	// "in-memory"): the default TTL; or "24h": the request's TTL is 24 h,
	// at most --max-ttl, kept in the lower tiers when the pool is short.
	PromptCacheRetention *string `json:"prompt_cache_retention"`
	// Structured outputs (see constrain): OpenAI's and vLLM's spellings.
	ResponseFormat    json.RawMessage `json:"response_format"`
	StructuredOutputs json.RawMessage `json:"structured_outputs"`
	// Prediction is OpenAI's Predicted Outputs (see predict).
	Prediction json.RawMessage `json:"prediction"`
}

// maxPromptCacheKey bounds prompt_cache_key's bytes: it is a label that
// goes into the access log.
const maxPromptCacheKey = 64

// extendedRetention is the TTL prompt_cache_retention "24h" asks for.
const extendedRetention = 24 * time.Hour

// maxLogitBias bounds the entries of logit_bias.
const maxLogitBias = 1024

// toGenerate validates the shared fields generateRequest has and sets
// them on g; finish sets the others once g.toEngine has built the engine
// request.
func (p *openAIParams) toGenerate(g *generateRequest) *apiError {
	switch {
	case p.StreamOptions != nil && !p.Stream:
		return badRequest("stream_options", "stream_options needs stream: true")
	case len(p.Stop) > openAIMaxStops:
		return badRequest("stop", "at most %d stop sequences, got %d", openAIMaxStops, len(p.Stop))
	}
	// max_completion_tokens replaces the deprecated max_tokens and wins
	// when both are sent, as in vLLM.
	g.MaxTokens = p.MaxTokens
	if p.MaxCompletionTokens != nil {
		g.MaxTokens = p.MaxCompletionTokens
	}
	g.Temperature, g.TopP, g.TopK, g.Seed, g.Stop = p.Temperature, p.TopP, p.TopK, p.Seed, p.Stop
	if g.Temperature == nil {
		t := float64(openAITemperature)
		g.Temperature = &t
	}
	return nil
}

// finish validates and sets the fields generateRequest lacks on req;
// topLogprobs is the number of alternatives asked per token, -1 for no
// logprobs.
func (p *openAIParams) finish(req *engine.Request, lim limits, topLogprobs int) *apiError {
	s := &req.Sampling
	for _, f := range []struct {
		v        *float64
		dst      *float32
		name     string
		lo, hi   float64
		interval string
	}{
		{p.MinP, &s.MinP, "min_p", 0, 1, "[0, 1]"},
		{p.FrequencyPenalty, &s.FrequencyPenalty, "frequency_penalty", -2, 2, "[-2, 2]"},
		{p.PresencePenalty, &s.PresencePenalty, "presence_penalty", -2, 2, "[-2, 2]"},
		// Dividing a logit by a smaller penalty could overflow it to +Inf.
		{p.RepetitionPenalty, &s.RepetitionPenalty, "repetition_penalty", sample.MinRepetitionPenalty, 10, fmt.Sprintf("[%v, 10]", sample.MinRepetitionPenalty)},
	} {
		if f.v == nil {
			continue
		}
		v := *f.v
		if !(v >= f.lo && v <= f.hi) {
			return badRequest(f.name, "%s must be in %s, got %v", f.name, f.interval, v)
		}
		*f.dst = float32(v)
	}
	if len(p.LogitBias) > maxLogitBias {
		return badRequest("logit_bias", "at most %d logit_bias entries, got %d", maxLogitBias, len(p.LogitBias))
	}
	for k, v := range p.LogitBias {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 || int(id) >= lim.vocab {
			return badRequest("logit_bias", "logit_bias key %q is not a token ID in [0, %d)", k, lim.vocab)
		}
		if !(v >= -100 && v <= 100) {
			return badRequest("logit_bias", "logit_bias of token %d must be in [-100, 100], got %v", id, v)
		}
		if s.LogitBias == nil {
			s.LogitBias = make(map[int32]float32, len(p.LogitBias))
		}
		s.LogitBias[int32(id)] = float32(v)
	}
	if p.N != nil {
		// The engine runs a request's choices at once, as it does beams.
		if n := *p.N; n < 1 || n > lim.maxBeam {
			return badRequest("n", "n must be in [1, %d], got %d", lim.maxBeam, n)
		}
		req.N = *p.N
	}
	if err := p.promptCache(req, lim); err != nil {
		return err
	}
	if err := p.predict(req, lim); err != nil {
		return err
	}
	if topLogprobs >= 0 {
		req.Logprobs, req.TopLogprobs = true, topLogprobs
		if err := p.checkLogprobEntries(req, lim); err != nil {
			return err
		}
	}
	return p.constrain(req, lim)
}

// promptCache checks prompt_cache_key and applies prompt_cache_retention:
// "24h" sets the request's TTL to 24 h, cut to the server's --max-ttl as
// OpenAI promises "up to" 24 h; "in_memory" leaves the default TTL.
func (p *openAIParams) promptCache(req *engine.Request, lim limits) *apiError {
	if k := p.PromptCacheKey; k != nil && (*k == "" || len(*k) > maxPromptCacheKey) {
		return badRequest("prompt_cache_key", "prompt_cache_key must be 1 to %d bytes, got %d", maxPromptCacheKey, len(*k))
	}
	if p.PromptCacheRetention == nil {
		return nil
	}
	switch r := *p.PromptCacheRetention; r {
	case "in_memory", "in-memory":
	case "24h":
		req.Cache.TTL = min(extendedRetention, lim.maxTTL)
	default:
		return badRequest("prompt_cache_retention", `prompt_cache_retention must be "in_memory" or "24h", got %.32q`, r)
	}
	return nil
}

// checkLogprobEntries refuses a request, not streamed, whose answer would
// hold more log-probabilities than lim allows: it is built whole in memory.
func (p *openAIParams) checkLogprobEntries(req *engine.Request, lim limits) *apiError {
	n := max(req.N, 1)
	entries := int64(n) * int64(req.MaxTokens) * int64(1+req.TopLogprobs)
	if p.Stream || entries <= int64(lim.maxLogprobs) {
		return nil
	}
	param := "max_tokens"
	if p.MaxCompletionTokens != nil {
		param = "max_completion_tokens"
	}
	return badRequest(param, "n (%d) × %s (%d) × (1 + top_logprobs %d) is %d log-probabilities, above the limit of %d "+
		"for an answer that is not streamed on this server: ask for fewer, or stream", n, param, req.MaxTokens,
		req.TopLogprobs, entries, lim.maxLogprobs)
}

// tokenBytes is a token's text as AppendPiece gives it: raw bytes, which
// may be part of a UTF-8 sequence.
func tokenBytes(tok Tokenizer, id int32) []byte { return tok.AppendPiece(nil, id) }

// tokenString is a token's text for logprobs: the text itself if it is
// valid UTF-8, else "bytes:" and its bytes as \xNN escapes, as OpenAI
// writes a token that holds part of a character.
func tokenString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.WriteString("bytes:")
	for _, c := range b {
		fmt.Fprintf(&sb, "\\x%02x", c)
	}
	return sb.String()
}

// jsonLogprob is a log-probability for JSON: -Inf (a token the
// distribution excludes) is written as -9999.0, as OpenAI does.
func jsonLogprob(lp float32) float64 {
	if math.IsInf(float64(lp), -1) {
		return -9999
	}
	return float64(lp)
}

// completionLogprobs is /v1/completions' logprobs object.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// formatCompletionLogprobs is the logprobs object of tokens ids whose text
// starts offset bytes into the choice's text.
func formatCompletionLogprobs(tok Tokenizer, ids []int32, lps []engine.TokenLogprobs, offset int) any {
	out := &completionLogprobs{
		Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{},
	}
	for i, id := range ids {
		b := tokenBytes(tok, id)
		out.Tokens = append(out.Tokens, tokenString(b))
		out.TokenLogprobs = append(out.TokenLogprobs, jsonLogprob(lps[i].Logprob))
		top := make(map[string]float64, len(lps[i].Top))
		for _, a := range lps[i].Top {
			key := tokenString(tokenBytes(tok, a.ID))
			if _, dup := top[key]; !dup { // two tokens may print alike: keep the likelier
				top[key] = jsonLogprob(a.Logprob)
			}
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, offset)
		offset += len(b)
	}
	return out
}

// chatTokenLogprob is one entry of chat's logprobs.content.
type chatTokenLogprob struct {
	Token       string             `json:"token"`
	Logprob     float64            `json:"logprob"`
	Bytes       []int              `json:"bytes"`
	TopLogprobs []chatTokenLogprob `json:"top_logprobs,omitempty"`
}

func chatLogprob(tok Tokenizer, id int32, lp float32) chatTokenLogprob {
	b := tokenBytes(tok, id)
	ints := make([]int, len(b))
	for i, c := range b {
		ints[i] = int(c)
	}
	return chatTokenLogprob{Token: tokenString(b), Logprob: jsonLogprob(lp), Bytes: ints}
}

// formatChatLogprobs is chat's logprobs object of tokens ids.
func formatChatLogprobs(tok Tokenizer, ids []int32, lps []engine.TokenLogprobs) any {
	content := make([]chatTokenLogprob, 0, len(ids))
	for i, id := range ids {
		e := chatLogprob(tok, id, lps[i].Logprob)
		e.TopLogprobs = []chatTokenLogprob{}
		for _, a := range lps[i].Top {
			e.TopLogprobs = append(e.TopLogprobs, chatLogprob(tok, a.ID, a.Logprob))
		}
		content = append(content, e)
	}
	return map[string]any{"content": content}
}

// sumUsage is the OpenAI usage of a request's choices: the prompt once,
// every choice's output (and each choice's use of the prediction, which
// every choice drafts from).
func sumUsage(results []engine.Result) *completionUsage {
	u := openAIUsage(results[0].Usage)
	for _, r := range results[1:] {
		u.CompletionTokens += r.Usage.CompletionTokens
		d := &u.CompletionTokensDetails
		d.AcceptedPredictionTokens += r.Usage.AcceptedPredictionTokens
		d.RejectedPredictionTokens += r.Usage.RejectedPredictionTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// submitChoices queues req (all its choices) under a context that
// outlives the RequestCtx; cancel ends every choice.
func (s *Server) submitChoices(req engine.Request) ([]*engine.Stream, context.CancelFunc, error) {
	rctx, cancel := context.WithCancel(s.base)
	streams, err := s.eng.SubmitN(rctx, req)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	s.trace.record(&req, streams[0])
	return streams, cancel, nil
}

// awaitChoices waits for every choice of a non-streaming request. ok is
// false when there is nothing more to write: a choice failed (answered
// here) or the client hung up.
func (s *Server) awaitChoices(ctx *fasthttp.RequestCtx, streams []*engine.Stream, cancel context.CancelFunc) ([]engine.Result, bool) {
	results := make([]engine.Result, len(streams))
	for i, st := range streams {
		res, ok := s.result(ctx, st, cancel)
		if !ok {
			cancel() // the other choices are of no use now
			return nil, false
		}
		results[i] = res
	}
	all := combineResults(results)
	accessOf(ctx).result = &all
	return results, true
}

// choiceEvent is one token (or the end) of one choice, for streaming.
type choiceEvent struct {
	index int
	tok   engine.Token
	done  bool
}

// choiceEvents merges the choices' token streams, in the order the engine
// produced them. Its buffer holds every token of every choice, so the
// forwarding goroutines never block and always end (the engine closes
// every stream, cancelled or not).
func choiceEvents(streams []*engine.Stream, maxTokens int) <-chan choiceEvent {
	ch := make(chan choiceEvent, len(streams)*(maxTokens+2))
	for i, st := range streams {
		go func() {
			for t := range st.Tokens {
				ch <- choiceEvent{index: i, tok: t}
			}
			ch <- choiceEvent{index: i, done: true}
		}()
	}
	return ch
}

// openAIStream shapes a streamed OpenAI response. Each function returns
// the chunk to send, or nil for none.
type openAIStream struct {
	// start is a choice's first chunk (chat's role delta), before tokens.
	start func(index int) any
	// token carries one token's text and, with logprobs, its entry.
	token func(index int, t engine.Token, offset int) any
	// final ends choice index: rest is its text held back, if any.
	final func(index int, res *engine.Result, rest string, offset int) any
	// usage is the last chunk, with stream_options.include_usage.
	usage func(results []engine.Result) any
}

// streamOpenAI answers with server-sent events for every choice of a
// request, then [DONE]: what streamSSE does for one stream. A choice that
// fails (the engine failed it, or the server is shutting down) ends the
// stream with an error event.
func (s *Server) streamOpenAI(ctx *fasthttp.RequestCtx, id string, streams []*engine.Stream, maxTokens int,
	cancel context.CancelFunc, f openAIStream, includeUsage bool) {
	events := choiceEvents(streams, maxTokens)
	s.serveSSE(ctx, id, cancel, func(w *bufio.Writer) engine.Result {
		results := make([]engine.Result, len(streams))
		if s.writeChoiceEvents(w, id, streams, events, results, f, includeUsage) {
			w.WriteString("data: [DONE]\n\n")
			w.Flush()
		}
		cancel() // whatever has not finished is of no use now
		for i, st := range streams {
			results[i] = st.Result()
		}
		return combineResults(results)
	})
}

// writeChoiceEvents writes the choices' events as they come and reports
// whether the stream may end with [DONE] (false: the client is gone).
func (s *Server) writeChoiceEvents(w *bufio.Writer, id string, streams []*engine.Stream, events <-chan choiceEvent,
	results []engine.Result, f openAIStream, includeUsage bool) bool {
	send := func(v any) bool {
		if v != nil && writeEvent(w, v) != nil {
			s.log.Debug("stream client gone", "id", id)
			return false
		}
		return true
	}
	flush := func() bool {
		if w.Flush() != nil {
			s.log.Debug("stream client gone", "id", id)
			return false
		}
		return true
	}
	// An opening comment sends the headers at once, before the first
	// token (fasthttp writes them with the first chunk).
	w.WriteString(": stream " + id + "\n\n")
	if !flush() {
		return false
	}
	for i := range streams {
		if !send(f.start(i)) {
			return false
		}
	}
	sent := make([]int, len(streams)) // text bytes streamed per choice
	tick := time.NewTicker(s.cfg.KeepAlive)
	defer tick.Stop()
	for left := len(streams); left > 0; {
		select {
		case ev := <-events:
			if !ev.done {
				if !send(f.token(ev.index, ev.tok, sent[ev.index])) {
					return false
				}
				sent[ev.index] += len(ev.tok.Text)
			} else {
				left--
				res := streams[ev.index].Result()
				results[ev.index] = res
				if e := resultError(&res); e != nil {
					// OpenAI streams end in an error event, not a chunk.
					return send(struct {
						Error *apiError `json:"error"`
					}{e})
				}
				rest := res.Text[min(sent[ev.index], len(res.Text)):]
				if !send(f.final(ev.index, &res, rest, sent[ev.index])) {
					return false
				}
				sent[ev.index] += len(rest)
			}
			// Flush only when caught up: a burst of tokens goes out in one
			// write.
			if len(events) == 0 && !flush() {
				return false
			}
		case <-tick.C:
			w.WriteString(": keep-alive\n\n")
			if !flush() {
				return false
			}
		}
	}
	return !includeUsage || send(f.usage(results))
}

// combineResults is one Result for a request's choices, for the access
// log: the first choice's, with every choice's output tokens.
func combineResults(results []engine.Result) engine.Result {
	r := results[0]
	for _, o := range results[1:] {
		r.Usage.CompletionTokens += o.Usage.CompletionTokens
	}
	return r
}

// setLabels puts an OpenAI request's user field and prompt_cache_key on
// its access-log line, as labels: user cut to 64 bytes (at a character
// boundary; the key is at most that already), never with any of the
// request's text.
func (p *openAIParams) setLabels(ctx *fasthttp.RequestCtx) {
	user := p.User
	if len(user) > 64 {
		user = strings.ToValidUTF8(user[:64], "")
	}
	a := accessOf(ctx)
	a.user = user
	if p.PromptCacheKey != nil {
		a.cacheKey = *p.PromptCacheKey
	}
}

// isNull reports whether a raw JSON value is absent or null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}
