package engine

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// TestInvalidErrorParam checks that each refusal names the request field
// at fault, and still matches ErrInvalid for callers that only branch.
func TestInvalidErrorParam(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 64), func(c *Config) { c.NumBlocks = 8 })
	for _, tc := range []struct {
		name, param string
		req         Request
	}{
		{"empty prompt", "prompt", Request{MaxTokens: 1}},
		{"token outside vocab", "prompt", Request{Prompt: []int32{1, testVocab}, MaxTokens: 1}},
		{"zero max tokens", "max_tokens", Request{Prompt: []int32{1}}},
		{"beyond model length", "max_tokens", Request{Prompt: prompt(1, 60), MaxTokens: 5}},
		{"beyond pool", "max_tokens", Request{Prompt: prompt(1, 30), MaxTokens: 5}},
		{"temperature", "temperature", Request{Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{Temperature: 3}}},
		{"top_p", "top_p", Request{Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{TopP: 1.5}}},
		{"top_k", "top_k", Request{Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{TopK: -1}}},
		{"beam too wide", "beam_width", Request{Prompt: []int32{1}, MaxTokens: 1, Beam: Beam{Width: 99}}},
		{"sampled beam", "beam_width", Request{Prompt: []int32{1}, MaxTokens: 1, Beam: Beam{Width: 2}, Sampling: Sampling{Temperature: 1}}},
		{"NaN length penalty", "length_penalty", Request{Prompt: []int32{1}, MaxTokens: 1, Beam: Beam{Width: 2, LengthPenalty: float32(math.NaN())}}},
		{"stop token outside vocab", "stop_ids", Request{Prompt: []int32{1}, MaxTokens: 1, StopTokens: []int32{500}}},
		{"empty stop string", "stop", Request{Prompt: []int32{1}, MaxTokens: 1, StopStrings: []string{""}}},
		{"negative ttl", "cache.ttl", Request{Prompt: []int32{1}, MaxTokens: 1, Cache: Cache{TTL: -time.Second}}},
		{"ttl over max", "cache.ttl", Request{Prompt: []int32{1}, MaxTokens: 1, Cache: Cache{TTL: 100 * time.Hour}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Submit(context.Background(), tc.req)
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Submit: %v, want an *InvalidError", err)
			}
			if ie.Param != tc.param {
				t.Errorf("Param %q, want %q (%v)", ie.Param, tc.param, err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(%v, ErrInvalid) is false", err)
			}
			if want := ErrInvalid.Error() + ": " + ie.Msg; err.Error() != want {
				t.Errorf("Error() %q, want %q", err.Error(), want)
			}
		})
	}
}
