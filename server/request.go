package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/prefixd/prefixd/engine"
)

// stopList accepts a JSON string or an array of strings.
type stopList []string

// UnmarshalJSON implements json.Unmarshaler.
func (s *stopList) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte(`"`)) {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return &fieldError{"stop", "stop must be a string or an array of strings"}
		}
		*s = stopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return &fieldError{"stop", "stop must be a string or an array of strings"}
	}
	*s = many
	return nil
}

// cacheParams is a request's say over the prefix cache.
type cacheParams struct {
	TTL      *string `json:"ttl"`      // a Go duration: "30s", "5m"
	Priority *int32  `json:"priority"` // higher is kept longer under memory pressure
	Enabled  *bool   `json:"enabled"`  // false: neither read nor write the cache
}

// tokenIDs is a JSON array of token IDs. Unlike a plain []int32 it refuses
// null elements, which would otherwise decode as token 0; null for the
// whole array leaves it nil (absent), [] makes it empty.
type tokenIDs []int32

// UnmarshalJSON implements json.Unmarshaler.
func (t *tokenIDs) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var raw []*int32
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(tokenIDs, len(raw))
	for i, p := range raw {
		if p == nil {
			// A type error, so the decoder names the field.
			return &json.UnmarshalTypeError{Value: fmt.Sprintf("null at index %d", i), Type: reflect.TypeFor[int32]()}
		}
		out[i] = *p
	}
	*t = out
	return nil
}

// generateRequest is the body of POST /generate and /generate_stream.
type generateRequest struct {
	Prompt        *string      `json:"prompt"`
	PromptIDs     tokenIDs     `json:"prompt_ids"`
	MaxTokens     *int         `json:"max_tokens"`
	Temperature   *float64     `json:"temperature"`
	TopP          *float64     `json:"top_p"`
	TopK          *int         `json:"top_k"`
	Seed          *uint64      `json:"seed"`
	Stop          stopList     `json:"stop"`
	StopIDs       tokenIDs     `json:"stop_ids"`
	IgnoreEOS     bool         `json:"ignore_eos"`
	BeamWidth     *int         `json:"beam_width"`
	LengthPenalty *float64     `json:"length_penalty"`
	Cache         *cacheParams `json:"cache"`
	// Structured output, as llama.cpp's native endpoint spells it: a
	// JSON Schema or a GBNF grammar (see grammarSpec).
	JSONSchema json.RawMessage `json:"json_schema"`
	Grammar    *string         `json:"grammar"`
	// promptParam, when set, is what the client called the prompt in the
	// request converted to this one (OpenAI's "prompt", chat's
	// "messages"): errors about the prompt name it.
	promptParam string
}

// param is the client's name for the prompt field this request calls def.
func (g *generateRequest) param(def string) string {
	if g.promptParam != "" {
		return g.promptParam
	}
	return def
}

// limits bound what a request may ask for. They come from the server's
// configuration and the engine's, read per request (the maximum TTL can
// change at run time).
type limits struct {
	vocab        int
	maxModelLen  int // prompt + output
	maxPrompt    int // prompt tokens
	maxTokens    int // output tokens
	defaultMax   int // output tokens when max_tokens is absent
	maxBeam      int
	maxStops     int // stop strings per request
	maxStopBytes int // bytes per stop string
	maxStopIDs   int
	maxLogprobs  int // n × max_tokens × (1 + top_logprobs) of an answer not streamed
	maxTTL       time.Duration
	// priorityCap bounds cache.priority when capPriority is set: the
	// caller is a tenant's API key without the admin token.
	priorityCap   int32
	capPriority   bool
	bos           int32 // prepended to text prompts when >= 0
	haveTokenizer bool
	tokenizer     Encoder       // plain text encoding, without BOS; nil without a tokenizer
	grammars      *grammarSetup // nil without a tokenizer
}

// Encoder turns text into token IDs, without BOS.
type Encoder interface {
	Encode(text string) []int32
}

// encodePrompt tokenizes a text prompt the way generation does: BOS, when
// the model has one, then the text's tokens.
func encodePrompt(tok Encoder, text string, bos int32) []int32 {
	ids := tok.Encode(text)
	if bos < 0 {
		return ids
	}
	return append([]int32{bos}, ids...)
}

// toEngine validates a generate request and builds the engine request.
// The namespace is the caller's, set by the handler.
func (g *generateRequest) toEngine(tok Encoder, lim limits) (engine.Request, *apiError) {
	var req engine.Request
	switch {
	case g.Prompt != nil && g.PromptIDs != nil:
		return req, badRequest(g.param("prompt"), "send either prompt or prompt_ids, not both")
	case g.Prompt != nil:
		if *g.Prompt == "" {
			return req, badRequest(g.param("prompt"), "prompt is empty")
		}
		if tok == nil || !lim.haveTokenizer {
			return req, badRequest(g.param("prompt"), "this model has no tokenizer: send prompt_ids")
		}
		if err := checkPromptBytes(g.param("prompt"), len(*g.Prompt), lim); err != nil {
			return req, err
		}
		req.Prompt = encodePrompt(tok, *g.Prompt, lim.bos)
	case g.PromptIDs != nil:
		req.Prompt = g.PromptIDs
	default:
		return req, badRequest(g.param("prompt"), "prompt or prompt_ids is required")
	}
	param := g.param("prompt")
	if g.Prompt == nil {
		param = g.param("prompt_ids")
	}
	if err := checkPrompt(param, req.Prompt, lim); err != nil {
		return req, err
	}
	var err *apiError
	if req.MaxTokens, err = maxTokens(g.MaxTokens, len(req.Prompt), g.param("prompt"), lim); err != nil {
		return req, err
	}
	if req.Sampling, err = sampling(g.Temperature, g.TopP, g.TopK, g.Seed); err != nil {
		return req, err
	}
	if err := checkStops(g.Stop, lim); err != nil {
		return req, err
	}
	req.StopStrings = g.Stop
	if len(g.StopIDs) > lim.maxStopIDs {
		return req, badRequest("stop_ids", "at most %d stop_ids, got %d", lim.maxStopIDs, len(g.StopIDs))
	}
	for _, id := range g.StopIDs {
		if id < 0 || int(id) >= lim.vocab {
			return req, badRequest("stop_ids", "stop id %d is outside the vocabulary [0, %d)", id, lim.vocab)
		}
	}
	req.StopTokens = g.StopIDs
	req.IgnoreEOS = g.IgnoreEOS
	if g.BeamWidth != nil {
		w := *g.BeamWidth
		if w < 1 || w > lim.maxBeam {
			return req, badRequest("beam_width", "beam_width must be in [1, %d], got %d", lim.maxBeam, w)
		}
		if w > 1 && req.Sampling.Temperature != 0 {
			return req, badRequest("beam_width", "beam search is deterministic: leave temperature at 0")
		}
		req.Beam.Width = w
		req.Beam.LengthPenalty = 1
	}
	if g.LengthPenalty != nil {
		if req.Beam.Width <= 1 {
			return req, badRequest("length_penalty", "length_penalty applies to beam search: set beam_width > 1")
		}
		if lp := *g.LengthPenalty; !(lp >= 0 && lp <= 10) {
			return req, badRequest("length_penalty", "length_penalty must be in [0, 10], got %v", lp)
		}
		req.Beam.LengthPenalty = float32(*g.LengthPenalty)
	}
	if g.Cache != nil {
		if req.Cache, err = cacheControl(g.Cache, lim); err != nil {
			return req, err
		}
	}
	spec, err := g.generateSpec()
	if err != nil {
		return req, err
	}
	if spec != nil && req.Beam.Width > 1 {
		return req, badRequest(spec.param, "beam search cannot follow a grammar: leave beam_width at 1")
	}
	return req, spec.apply(&req, lim)
}

// checkPromptBytes refuses a text prompt too long to be worth tokenizing:
// a byte is at least one token, or less than one for merged vocabularies,
// so one of more than 8 bytes per token of the limit cannot fit it.
func checkPromptBytes(param string, n int, lim limits) *apiError {
	if n > 8*lim.maxPrompt {
		return badRequest(param, "%s is %d bytes, far above the limit of %d tokens", param, n, lim.maxPrompt)
	}
	return nil
}

// checkPrompt checks a prompt's token IDs; param is its field.
func checkPrompt(param string, ids []int32, lim limits) *apiError {
	switch {
	case len(ids) == 0:
		return badRequest(param, "prompt is empty")
	case len(ids) > lim.maxPrompt:
		return badRequest(param, "prompt is %d tokens, the limit is %d", len(ids), lim.maxPrompt)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= lim.vocab {
			return badRequest(param, "token %d at position %d is outside the vocabulary [0, %d)", id, i, lim.vocab)
		}
	}
	return nil
}

// maxTokens resolves max_tokens: absent means the default, cut to the room
// the prompt (field promptParam) leaves.
func maxTokens(v *int, promptLen int, promptParam string, lim limits) (int, *apiError) {
	room := lim.maxModelLen - promptLen
	if v == nil {
		if room <= 0 {
			return 0, badRequest(promptParam, "prompt is %d tokens and leaves no room in the model's %d positions", promptLen, lim.maxModelLen)
		}
		return min(lim.defaultMax, lim.maxTokens, room), nil
	}
	n := *v
	switch {
	case n <= 0 || n > lim.maxTokens:
		return 0, badRequest("max_tokens", "max_tokens must be in [1, %d], got %d", lim.maxTokens, n)
	case n > room:
		return 0, badRequest("max_tokens", "prompt (%d tokens) + max_tokens (%d) exceeds the model's maximum length %d",
			promptLen, n, lim.maxModelLen)
	}
	return n, nil
}

func sampling(temp, topP *float64, topK *int, seed *uint64) (engine.Sampling, *apiError) {
	var s engine.Sampling
	if temp != nil {
		if t := *temp; !(t >= 0 && t <= 2) {
			return s, badRequest("temperature", "temperature must be in [0, 2], got %v", t)
		}
		s.Temperature = float32(*temp)
	}
	if topP != nil {
		// Checked as the engine will see it: a positive top_p that rounds
		// to float32 0 would mean no cut at all.
		if p := float32(*topP); !(p > 0 && p <= 1) {
			return s, badRequest("top_p", "top_p must be in (0, 1], got %v", *topP)
		}
		s.TopP = float32(*topP)
	}
	if topK != nil {
		if *topK < 0 {
			return s, badRequest("top_k", "top_k must be >= 0 (0: no cut), got %d", *topK)
		}
		s.TopK = *topK
	}
	switch {
	case seed != nil:
		s.Seed = *seed
	case s.Temperature > 0:
		// Without a seed, sampled requests differ run to run, as callers
		// of OpenAI-style APIs expect.
		s.Seed = rand.Uint64()
	}
	return s, nil
}

func checkStops(stops []string, lim limits) *apiError {
	if len(stops) == 0 {
		return nil
	}
	if !lim.haveTokenizer {
		return badRequest("stop", "this model has no tokenizer: use stop_ids")
	}
	if len(stops) > lim.maxStops {
		return badRequest("stop", "at most %d stop strings, got %d", lim.maxStops, len(stops))
	}
	for _, s := range stops {
		switch {
		case s == "":
			return badRequest("stop", "stop strings must not be empty")
		case len(s) > lim.maxStopBytes:
			return badRequest("stop", "a stop string is %d bytes, the limit is %d", len(s), lim.maxStopBytes)
		}
	}
	return nil
}

func cacheControl(c *cacheParams, lim limits) (engine.Cache, *apiError) {
	var out engine.Cache
	if c.TTL != nil {
		d, err := time.ParseDuration(*c.TTL)
		if err != nil {
			return out, badRequest("cache.ttl", "cache.ttl %q is not a duration like \"30s\" or \"5m\"", *c.TTL)
		}
		if d <= 0 || d > lim.maxTTL {
			return out, badRequest("cache.ttl", "cache.ttl must be in (0, %v], got %v", lim.maxTTL, d)
		}
		out.TTL = d
	}
	if c.Priority != nil {
		if p := *c.Priority; lim.capPriority && p > lim.priorityCap {
			return out, &apiError{Status: 403, Type: typePermission, Param: "cache.priority",
				Message: fmt.Sprintf("cache.priority %d is above %d, the most an API key may set on this server; "+
					"higher needs the admin token in the %s header", p, lim.priorityCap, adminTokenHeader)}
		}
		out.Priority = *c.Priority
	}
	if c.Enabled != nil {
		out.Disabled = !*c.Enabled
	}
	return out, nil
}
