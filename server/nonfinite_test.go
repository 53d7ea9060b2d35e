package server

import (
	"encoding/json"
	"io"
	"math"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/model"
)

// nanModel is the built-in model with one NaN weight in its final norm:
// every logit it computes is NaN, as with a corrupt model file.
func nanModel() *model.Model {
	m := *builtin()
	w := make([]float32, m.Config.Dim)
	for i := range w {
		w[i] = 1
	}
	w[7] = float32(math.NaN())
	m.FinalNorm = kernels.FromF32(w, 1, len(w))
	return &m
}

// TestNonFiniteLogitsAreAnError runs requests on a model whose weights
// hold NaN: each answer is a JSON error saying so (a stream's is an error
// event, then [DONE]), never a failure to encode NaN log-probabilities or
// a stream cut short, and each request is counted in
// prefixd_nonfinite_logits_total.
func TestNonFiniteLogitsAreAnError(t *testing.T) {
	h := newHarness(t, withModel(nanModel()))
	for _, c := range []struct{ path, body string }{
		{"/generate", `{"prompt": "Hi", "max_tokens": 3}`},
		{"/v1/completions", `{"prompt": "Hi", "max_tokens": 3, "logprobs": 1}`},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "n": 2, "logprobs": true, "top_logprobs": 2}`},
	} {
		code, b, _ := h.do("POST", c.path, c.body)
		var e struct {
			Error apiError `json:"error"`
		}
		if code != 500 || json.Unmarshal(b, &e) != nil || e.Error.Type != typeServer || !strings.Contains(e.Error.Message, "NaN") {
			t.Errorf("%s: %d %s, want a 500 JSON error saying the logits are NaN", c.path, code, b)
		}
	}
	for _, c := range []struct{ path, body string }{
		{"/generate_stream", `{"prompt": "Hi", "max_tokens": 3}`},
		{"/v1/completions", `{"prompt": "Hi", "max_tokens": 3, "logprobs": 1, "stream": true}`},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "logprobs": true, "stream": true}`},
	} {
		s := h.stream(c.path, c.body)
		var events []string
		for {
			ev, err := s.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v after %q", c.path, err, events)
			}
			events = append(events, ev)
		}
		s.close()
		n := len(events)
		if n < 2 || events[n-1] != "[DONE]" || !strings.Contains(events[n-2], `"error"`) || !strings.Contains(events[n-2], "NaN") {
			t.Errorf("%s: events %q, want an error event saying the logits are NaN, then [DONE]", c.path, events)
		}
	}
	// The chat request's n=2 is two.
	h.scrapeWhen("prefixd_nonfinite_logits_total to reach 7", func(f map[string]*dto.MetricFamily) bool {
		return metric(f, "prefixd_nonfinite_logits_total") == 7
	})
	h.checkDrained()
}
