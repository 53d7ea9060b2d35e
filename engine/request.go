package engine

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prefixd/prefixd/grammar"
	"github.com/prefixd/prefixd/sample"
)

// Errors a submission can get. Each is an *InvalidError (which matches
// ErrInvalid) or a sentinel the server maps to a status code.
var (
	// ErrInvalid marks a request the engine can never serve as asked.
	ErrInvalid = errors.New("engine: invalid request")
	// ErrQueueFull means the waiting queue is at its limit; retry later.
	ErrQueueFull = errors.New("engine: waiting queue full")
	// ErrClosed means the engine is shutting down.
	ErrClosed = errors.New("engine: closed")
	// ErrNoRoom fails a request that cannot get its KV blocks even with
	// nothing else running: operator pins, added after it was accepted,
	// hold the rest of the pool. (A request the pool can never hold is
	// refused by Submit with ErrInvalid instead.) The error wrapping it
	// says how many blocks were missing and how many pins hold.
	ErrNoRoom = errors.New("engine: not enough KV blocks for the request even alone")
	// ErrNonFinite fails a request whose logits held NaN or an infinity
	// (the model's weights do, or its activations overflowed): no token
	// can be drawn from them. The error wrapping it (and
	// sample.ErrNonFinite) says at which output token and which logit.
	ErrNonFinite = errors.New("engine: the model produced a non-finite logit")
)

// InvalidError is the error of a request the engine can never serve as
// asked: Param names the offending request field in the server's API
// spelling ("prompt", "max_tokens", "cache.ttl", ...), so a caller can
// point at it without parsing Msg. errors.Is(err, ErrInvalid) holds for it.
type InvalidError struct {
	Param string // the request field at fault; "" when none is
	Msg   string // what is wrong, for a person
}

// Error implements error.
func (e *InvalidError) Error() string { return ErrInvalid.Error() + ": " + e.Msg }

// Is makes errors.Is(err, ErrInvalid) true for every *InvalidError.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// invalid returns an *InvalidError for param.
func invalid(param, format string, args ...any) error {
	return &InvalidError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// Sampling chooses the next token (see package sample; the engine allows
// temperatures up to 2). The zero value is greedy decoding; the same seed
// gives the same output.
type Sampling = sample.Params

// Logprob is a token and its log-probability.
type Logprob = sample.TokenLogprob

// TokenLogprobs is a generated token's log-probability under the
// distribution it was sampled from (see sample.Sampler.Logprobs), and the
// most likely tokens of that distribution, most likely first.
type TokenLogprobs struct {
	Logprob float32
	Top     []Logprob
}

// MaxTopLogprobs is the most alternatives a request may ask for per token
// (OpenAI's limit).
const MaxTopLogprobs = 20

// Beam asks for beam search instead of sampling.
type Beam struct {
	Width         int     // beams kept per step; 0 or 1 means no beam search
	LengthPenalty float32 // hypotheses are ranked by logprob / length^LengthPenalty
}

// Cache is a request's say over the prefix cache.
type Cache struct {
	TTL      time.Duration // how long to keep what this request uses; 0: default
	Priority int32         // higher is kept longer under memory pressure, for as long as TTL
	Disabled bool          // neither read nor write the prefix cache
	// Breakpoints keep the prompt's prefixes they end for longer TTLs
	// (Anthropic's cache_control): the whole blocks of a breakpoint's
	// first Tokens tokens for its TTL, the rest of the prompt for TTL. At
	// most MaxBreakpoints, Tokens ascending within the prompt, TTLs
	// positive, at most the maximum TTL and not ascending: a prefix of a
	// prefix is kept at least as long.
	Breakpoints []Breakpoint
}

// Breakpoint gives the prompt's first Tokens tokens a TTL.
type Breakpoint struct {
	Tokens int
	TTL    time.Duration
}

// MaxBreakpoints bounds Cache.Breakpoints, as Anthropic's API does.
const MaxBreakpoints = 4

// Request is one generation request. Namespace is set by the server from
// the caller's credentials, never from the request body.
type Request struct {
	Namespace   string
	Prompt      []int32
	MaxTokens   int
	StopTokens  []int32  // generation ends after any of these (EOS is always one)
	StopStrings []string // generation ends when the decoded text contains one
	IgnoreEOS   bool     // keep going past EOS (benchmarks)
	Sampling    Sampling
	// N is the number of choices, independent samples of the same prompt
	// (0 or 1: one; SubmitN returns a Stream per choice). The prompt is
	// prefilled once: every choice's block table forks the first's
	// copy-on-write, and choice i samples from PRNG stream i of the seed.
	// Each choice counts as a sequence in Stats and for the Observer.
	N int
	// Logprobs asks for each generated token's log-probability (Token and
	// Result.Logprobs), TopLogprobs (at most MaxTopLogprobs) for that many
	// most likely alternatives as well.
	Logprobs    bool
	TopLogprobs int
	Beam        Beam
	Cache       Cache
	// Constraint, if set, restricts the output to a grammar (structured
	// outputs): each choice follows it with its own grammar.Matcher, its
	// sampler draws only tokens the grammar allows, and a stop token is
	// allowed only where the grammar can end. Beam search cannot take one.
	Constraint *grammar.Constraint
	// Prediction is the output the caller expects, mostly (OpenAI's
	// Predicted Outputs, a file to edit say): the Speculator drafts from
	// it, so the parts of the output that match it cost a fraction of a
	// step each. It never changes the output. nil: none.
	Prediction []int32
}

// FinishReason says why a sequence ended.
type FinishReason string

// Finish reasons, as OpenAI-style APIs name them.
const (
	FinishStop      FinishReason = "stop"      // EOS, a stop token or a stop string
	FinishLength    FinishReason = "length"    // MaxTokens reached
	FinishCancelled FinishReason = "cancelled" // the caller's context ended
	FinishError     FinishReason = "error"     // the engine failed the request
)

// Usage counts a request's tokens.
type Usage struct {
	PromptTokens     int
	CachedTokens     int // prompt tokens served from the prefix cache, both tiers
	HostCachedTokens int // of those, promoted from the host tier
	// CacheWriteTokens is the prompt tokens this request added to the
	// prefix cache: its whole prompt blocks the cache did not hold yet
	// (Anthropic's cache_creation_input_tokens). Output blocks offered to
	// the cache are not counted.
	CacheWriteTokens int
	CompletionTokens int
	PrefillTokens    int // prompt tokens actually computed, preemptions included
	Preemptions      int
	// AcceptedPredictionTokens counts the drafted tokens taken from
	// Request.Prediction that verification accepted (so appear in the
	// output where the prediction put them); RejectedPredictionTokens is
	// the rest of the prediction's tokens: its length less the accepted.
	// Both are 0 without a prediction.
	AcceptedPredictionTokens int
	RejectedPredictionTokens int
}

// Timing measures a request's latency.
type Timing struct {
	Queue       time.Duration   // submission to first admission
	FirstToken  time.Duration   // submission to first generated token
	Total       time.Duration   // submission to finish
	InterTokens []time.Duration // gaps between consecutive generated tokens
}

// Result is a finished request.
type Result struct {
	Tokens []int32
	// Logprobs, if the request asked, is each token's log-probability,
	// index for index with Tokens.
	Logprobs []TokenLogprobs
	Text     string // decoded tokens, if the engine has a tokenizer
	Finish   FinishReason
	Usage    Usage
	Timing   Timing
	Err      error // set when Finish is FinishError
}

// validate checks what can be checked without the engine's state.
func (r *Request) validate(vocab, maxLen, maxBeam int) error {
	lp := float64(r.Beam.LengthPenalty)
	switch {
	case len(r.Prompt) == 0:
		return invalid("prompt", "prompt is empty")
	case r.MaxTokens <= 0:
		return invalid("max_tokens", "max_tokens must be positive, got %d", r.MaxTokens)
	case r.MaxTokens > maxLen-len(r.Prompt): // not the sum, which can overflow
		return invalid("max_tokens", "prompt (%d tokens) + max_tokens (%d) exceeds the model's maximum length %d",
			len(r.Prompt), r.MaxTokens, maxLen)
	case !(r.Sampling.Temperature >= 0 && r.Sampling.Temperature <= 2): // NaN fails too
		return invalid("temperature", "temperature must be in [0, 2], got %v", r.Sampling.Temperature)
	case r.Sampling.TopK < 0:
		return invalid("top_k", "top_k must be >= 0, got %d", r.Sampling.TopK)
	case !(r.Sampling.TopP >= 0 && r.Sampling.TopP <= 1):
		return invalid("top_p", "top_p must be in [0, 1], got %v", r.Sampling.TopP)
	case math.IsNaN(lp) || math.IsInf(lp, 0):
		return invalid("length_penalty", "length penalty must be finite, got %v", r.Beam.LengthPenalty)
	case r.Beam.Width < 0 || r.Beam.Width > maxBeam:
		return invalid("beam_width", "beam width must be in [0, %d], got %d", maxBeam, r.Beam.Width)
	case r.Beam.Width > 1 && r.Sampling.Temperature != 0:
		return invalid("beam_width", "beam search is deterministic: temperature must be 0")
	case r.Beam.Width > 1 && (r.N > 1 || r.Logprobs || r.Sampling.LogitBias != nil ||
		r.Sampling.FrequencyPenalty != 0 || r.Sampling.PresencePenalty != 0 || r.Sampling.RepetitionPenalty != 0):
		return invalid("beam_width", "beam search ranks by the model's own log-probabilities: it takes no n, logprobs, logit bias or penalties")
	case r.Beam.Width > 1 && r.Constraint != nil:
		return invalid("beam_width", "beam search cannot follow a grammar (structured outputs): use sampling or greedy decoding")
	case r.N < 0 || r.N > maxBeam:
		return invalid("n", "n must be in [1, %d], got %d", maxBeam, r.N)
	case r.TopLogprobs < 0 || r.TopLogprobs > MaxTopLogprobs:
		return invalid("top_logprobs", "top_logprobs must be in [0, %d], got %d", MaxTopLogprobs, r.TopLogprobs)
	case r.TopLogprobs > 0 && !r.Logprobs:
		return invalid("top_logprobs", "top_logprobs needs logprobs")
	case r.Cache.TTL < 0:
		return invalid("cache.ttl", "cache TTL must not be negative, got %v", r.Cache.TTL)
	case len(r.Cache.Breakpoints) > MaxBreakpoints:
		return invalid("cache.breakpoints", "at most %d cache breakpoints, got %d", MaxBreakpoints, len(r.Cache.Breakpoints))
	}
	for i, bp := range r.Cache.Breakpoints {
		switch {
		case bp.Tokens <= 0 || bp.Tokens > len(r.Prompt):
			return invalid("cache.breakpoints", "cache breakpoint %d ends at token %d, outside the %d-token prompt", i, bp.Tokens, len(r.Prompt))
		case bp.TTL <= 0:
			return invalid("cache.breakpoints", "cache breakpoint %d has TTL %v: it must be positive", i, bp.TTL)
		case i > 0 && bp.Tokens <= r.Cache.Breakpoints[i-1].Tokens:
			return invalid("cache.breakpoints", "cache breakpoint %d ends at token %d, not after the one before it (%d)", i, bp.Tokens, r.Cache.Breakpoints[i-1].Tokens)
		case i > 0 && bp.TTL > r.Cache.Breakpoints[i-1].TTL:
			return invalid("cache.breakpoints", "cache breakpoint %d's TTL %v is longer than the one before it (%v): longer TTLs come first", i, bp.TTL, r.Cache.Breakpoints[i-1].TTL)
		}
	}
	for i, t := range r.Prompt {
		if t < 0 || int(t) >= vocab {
			return invalid("prompt", "prompt token %d at position %d is outside the vocabulary [0, %d)", t, i, vocab)
		}
	}
	for i, t := range r.Prediction {
		if t < 0 || int(t) >= vocab {
			return invalid("prediction", "prediction token %d at position %d is outside the vocabulary [0, %d)", t, i, vocab)
		}
	}
	if len(r.Prediction) > maxLen {
		return invalid("prediction", "prediction of %d tokens exceeds the model's maximum length %d", len(r.Prediction), maxLen)
	}
	for _, t := range r.StopTokens {
		if t < 0 || int(t) >= vocab {
			return invalid("stop_ids", "stop token %d is outside the vocabulary [0, %d)", t, vocab)
		}
	}
	if err := validatePenalties(&r.Sampling, vocab); err != nil {
		return err
	}
	for _, s := range r.StopStrings {
		if s == "" {
			return invalid("stop", "stop strings must not be empty")
		}
	}
	return nil
}

// validatePenalties checks the sampling fields beyond temperature, top-k
// and top-p, naming each as the OpenAI API does.
func validatePenalties(p *Sampling, vocab int) error {
	switch {
	case !(p.MinP >= 0 && p.MinP <= 1):
		return invalid("min_p", "min_p must be in [0, 1], got %v", p.MinP)
	case !(p.FrequencyPenalty >= -2 && p.FrequencyPenalty <= 2):
		return invalid("frequency_penalty", "frequency_penalty must be in [-2, 2], got %v", p.FrequencyPenalty)
	case !(p.PresencePenalty >= -2 && p.PresencePenalty <= 2):
		return invalid("presence_penalty", "presence_penalty must be in [-2, 2], got %v", p.PresencePenalty)
	case !(p.RepetitionPenalty == 0 || p.RepetitionPenalty >= sample.MinRepetitionPenalty && p.RepetitionPenalty <= 10):
		return invalid("repetition_penalty", "repetition_penalty must be in [%v, 10] (0: none), got %v", sample.MinRepetitionPenalty, p.RepetitionPenalty)
	}
	for t, b := range p.LogitBias {
		if t < 0 || int(t) >= vocab {
			return invalid("logit_bias", "logit bias token %d is outside the vocabulary [0, %d)", t, vocab)
		}
		if !(b >= -100 && b <= 100) {
			return invalid("logit_bias", "logit bias %v of token %d must be in [-100, 100]", b, t)
		}
	}
	return nil
}
