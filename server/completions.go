package server

import (
	"encoding/json"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/prefixd/prefixd/engine"
)

// completionRequest is the body of POST /v1/completions: the OpenAI fields
// prefixd supports (see unsupportedOpenAI for the rule on others).
type completionRequest struct {
	Model  string          `json:"model"`
	Prompt json.RawMessage `json:"prompt"`
	// Logprobs is the number of alternatives to report per token (0: the
	// token's own log-probability only); absent: no logprobs.
	Logprobs *int `json:"logprobs"`
	openAIParams
}

// OpenAI's defaults for the fields a completion request may leave out.
const (
	openAIMaxTokens   = 16
	openAITemperature = 1
	openAIMaxStops    = 4
)

// toEngine validates an OpenAI completion request.
func (c *completionRequest) toEngine(tok Encoder, lim limits) (engine.Request, *apiError) {
	var g generateRequest
	if len(c.Prompt) == 0 || string(c.Prompt) == "null" {
		return engine.Request{}, badRequest("prompt", "prompt is required")
	}
	var text string
	var one []string
	var ids tokenIDs
	switch {
	case json.Unmarshal(c.Prompt, &text) == nil:
		g.Prompt = &text
	case json.Unmarshal(c.Prompt, &ids) == nil:
		g.PromptIDs = ids
	case json.Unmarshal(c.Prompt, &one) == nil && len(one) == 1:
		g.Prompt = &one[0]
	case json.Unmarshal(c.Prompt, &one) == nil:
		return engine.Request{}, badRequest("prompt", "a batch of %d prompts is not supported: send one", len(one))
	default:
		return engine.Request{}, badRequest("prompt", "prompt must be a string, an array of one string, or an array of token ids")
	}
	top := -1
	if c.Logprobs != nil {
		if top = *c.Logprobs; top < 0 || top > engine.MaxTopLogprobs {
			return engine.Request{}, badRequest("logprobs", "logprobs must be in [0, %d], got %d", engine.MaxTopLogprobs, top)
		}
	}
	if err := c.toGenerate(&g); err != nil {
		return engine.Request{}, err
	}
	if g.MaxTokens == nil {
		lim.defaultMax = openAIMaxTokens
	}
	g.promptParam = "prompt" // the OpenAI field carries token IDs too
	req, err := g.toEngine(tok, lim)
	if err != nil {
		return req, err
	}
	return req, c.finish(&req, lim, top)
}

// OpenAI completion objects.
type (
	completionChoice struct {
		Text         string  `json:"text"`
		Index        int     `json:"index"`
		Logprobs     any     `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	}
	// promptDetails is usage.prompt_tokens_details: cached_tokens as
	// OpenAI's, and cache_write_tokens, the prompt tokens the request
	// added to the prefix cache, under OpenRouter's name (OpenAI has
	// none; Anthropic's is cache_creation_input_tokens).
	promptDetails struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"`
	}
	// completionDetails is usage.completion_tokens_details, OpenAI's
	// Predicted Outputs counts (see engine.Usage): the prediction's tokens
	// that verification accepted, and the rest of its tokens.
	completionDetails struct {
		AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
		RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
	}
	completionUsage struct {
		PromptTokens            int               `json:"prompt_tokens"`
		CompletionTokens        int               `json:"completion_tokens"`
		TotalTokens             int               `json:"total_tokens"`
		PromptTokensDetails     promptDetails     `json:"prompt_tokens_details"`
		CompletionTokensDetails completionDetails `json:"completion_tokens_details"`
	}
	completionResponse struct {
		ID      string             `json:"id"`
		Object  string             `json:"object"`
		Created int64              `json:"created"`
		Model   string             `json:"model"`
		Choices []completionChoice `json:"choices"`
		Usage   *completionUsage   `json:"usage,omitempty"`
	}
)

func openAIUsage(u engine.Usage) *completionUsage {
	return &completionUsage{u.PromptTokens, u.CompletionTokens, u.PromptTokens + u.CompletionTokens, promptDetails{u.CachedTokens, u.CacheWriteTokens},
		completionDetails{u.AcceptedPredictionTokens, u.RejectedPredictionTokens}}
}

// checkModel answers a request for a model this server does not serve to
// the caller, and reports whether the request may go on.
func (s *Server) checkModel(ctx *fasthttp.RequestCtx, model string) bool {
	if model == "" || s.servesModel(model, namespace(ctx)) {
		return true
	}
	s.writeError(ctx, &apiError{Status: 404, Type: typeNotFound, Param: "model",
		Message: "model " + model + " does not exist; this server serves " + s.cfg.ModelName})
	return false
}

// decodeOpenAI decodes an OpenAI request body into v, refusing the OpenAI
// fields prefixd does not implement by name; it answers and returns false
// on error.
func (s *Server) decodeOpenAI(ctx *fasthttp.RequestCtx, v any) bool {
	if err := decodeRefusing(ctx.PostBody(), v, unsupportedOpenAI); err != nil {
		s.writeError(ctx, err)
		return false
	}
	return true
}

func (s *Server) handleCompletions(ctx *fasthttp.RequestCtx) {
	var c completionRequest
	if !s.decodeOpenAI(ctx, &c) || !s.checkModel(ctx, c.Model) {
		return
	}
	req, aerr := c.toEngine(s.encoder(), s.limits())
	if aerr != nil {
		s.writeError(ctx, aerr)
		return
	}
	req.Namespace = namespace(ctx)
	streams, cancel, err := s.submitChoices(req)
	if err != nil {
		s.writeSubmitError(ctx, err)
		return
	}
	id, created, name := newID("cmpl-"), time.Now().Unix(), s.cfg.ModelName
	c.setLabels(ctx)
	tk := s.cfg.Tokenizer
	response := func(choices ...completionChoice) completionResponse {
		return completionResponse{ID: id, Object: "text_completion", Created: created, Model: name, Choices: choices}
	}
	logprobs := func(ids []int32, lps []engine.TokenLogprobs, offset int) any {
		if !req.Logprobs || tk == nil {
			return nil
		}
		return formatCompletionLogprobs(tk, ids, lps, offset)
	}
	if c.Stream {
		s.streamOpenAI(ctx, id, streams, req.MaxTokens, cancel, openAIStream{
			start: func(int) any { return nil },
			token: func(i int, t engine.Token, offset int) any {
				if t.Text == "" && !req.Logprobs {
					return nil
				}
				lp := logprobs([]int32{t.ID}, []engine.TokenLogprobs{{Logprob: t.Logprob, Top: t.Top}}, offset)
				return response(completionChoice{Text: t.Text, Index: i, Logprobs: lp})
			},
			final: func(i int, res *engine.Result, rest string, _ int) any {
				reason := string(res.Finish)
				return response(completionChoice{Text: rest, Index: i, FinishReason: &reason})
			},
			usage: func(results []engine.Result) any {
				r := response()
				r.Choices = []completionChoice{}
				r.Usage = sumUsage(results)
				return r
			},
		}, c.StreamOptions != nil && c.StreamOptions.IncludeUsage)
		return
	}
	defer cancel()
	results, ok := s.awaitChoices(ctx, streams, cancel)
	if !ok {
		return
	}
	r := response()
	for i := range results {
		res := &results[i]
		reason := string(res.Finish)
		r.Choices = append(r.Choices, completionChoice{Text: res.Text, Index: i, FinishReason: &reason,
			Logprobs: logprobs(res.Tokens, res.Logprobs, 0)})
	}
	r.Usage = sumUsage(results)
	ctx.Response.Header.Set("X-Request-Id", id)
	s.writeJSON(ctx, 200, r)
}
