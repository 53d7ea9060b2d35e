package server

import (
	"encoding/json"
	"fmt"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/prefixd/prefixd/engine"
)

// predictionSpec is a test Speculator whose drafters draft from the
// request's prediction alone, position for position: the verification
// under test is the engine's.
type predictionSpec struct{}

type predictionDrafter struct {
	prediction []int32
	out        int // output tokens so far
	nPrompt    int
}

func (predictionSpec) NewDrafter(_ string, prompt, prediction []int32) engine.Drafter {
	return &predictionDrafter{prediction: prediction, nPrompt: len(prompt)}
}

func (predictionSpec) Finished(string, []int32) {}

func (d *predictionDrafter) Accept(tokens []int32) { d.out += len(tokens) }

func (d *predictionDrafter) Draft(dst []int32, k int) ([]int32, bool) {
	if d.out >= len(d.prediction) {
		return dst, false
	}
	return append(dst, d.prediction[d.out:min(d.out+k, len(d.prediction))]...), true
}

// TestPredictedOutputs: a completion and a chat completion whose
// prediction is the output itself (as text, and as text parts) answer the
// same as without one, faster in steps (a random-weight model with
// GPT-2's vocabulary, whose text mostly encodes back to its tokens), and report the prediction's
// accepted and rejected tokens in usage.completion_tokens_details; the
// vllm:spec_decode_* series and /v1/stats count the drafts.
func TestPredictedOutputs(t *testing.T) {
	h := newChatHarness(t, withEngine(func(c *engine.Config) { c.Speculator, c.SpecTokens = predictionSpec{}, 4 }))
	type resp struct {
		Choices []struct {
			Text    string
			Message struct{ Content string }
		}
		Usage completionUsage
	}
	for _, tc := range []struct{ path, head string }{
		{"/v1/completions", `"prompt": "Once upon a time"`},
		{"/v1/chat/completions", `"messages": [{"role": "user", "content": "Once upon a time"}]`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			text := func(r resp) string { return r.Choices[0].Text + r.Choices[0].Message.Content }
			var plain resp
			h.post(tc.path, `{`+tc.head+`, "max_tokens": 40, "temperature": 0}`, &plain)
			want := text(plain)
			if want == "" {
				t.Fatal("no output")
			}
			if d := plain.Usage.CompletionTokensDetails; d != (completionDetails{}) {
				t.Fatalf("without a prediction: %+v", d)
			}
			wantJSON, _ := json.Marshal(want)
			half := len(want) / 2
			p1, _ := json.Marshal(want[:half])
			p2, _ := json.Marshal(want[half:])
			for _, pred := range []string{
				`{"type": "content", "content": ` + string(wantJSON) + `}`,
				`{"type": "content", "content": [{"type": "text", "text": ` + string(p1) + `}, {"type": "text", "text": ` + string(p2) + `}]}`,
			} {
				before := h.eng.Stats().Steps
				var r resp
				h.post(tc.path, `{`+tc.head+`, "max_tokens": 40, "temperature": 0, "prediction": `+pred+`}`, &r)
				if got := text(r); got != want {
					t.Fatalf("with a prediction %q, without %q", got, want)
				}
				d, n := r.Usage.CompletionTokensDetails, len(h.srv.cfg.Tokenizer.Encode(want))
				if d.AcceptedPredictionTokens == 0 || d.AcceptedPredictionTokens+d.RejectedPredictionTokens != n {
					t.Fatalf("usage %+v for a prediction of %d tokens", d, n)
				}
				if steps := h.eng.Stats().Steps - before; steps >= uint64(r.Usage.CompletionTokens) {
					t.Fatalf("%d steps for %d tokens predicted", steps, r.Usage.CompletionTokens)
				}
			}
		})
	}
	// The engine publishes its counts after the step that answered.
	model, final := h.srv.cfg.ModelName, h.eng.Stats().SpecAcceptedTokens
	f := h.scrapeWhen("the last step's counts", func(f map[string]*dto.MetricFamily) bool {
		return metric(f, "vllm:spec_decode_num_accepted_tokens_total", "model_name", model) >= float64(final)
	})
	drafted := metric(f, "vllm:spec_decode_num_draft_tokens_total", "model_name", model)
	accepted := metric(f, "vllm:spec_decode_num_accepted_tokens_total", "model_name", model)
	if metric(f, "vllm:spec_decode_num_drafts_total", "model_name", model) == 0 || accepted == 0 || accepted > drafted {
		t.Fatalf("vllm:spec_decode_*: %v accepted of %v drafted", accepted, drafted)
	}
	perPos := 0.0
	for i := range 4 {
		perPos += metric(f, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "model_name", model, "position", fmt.Sprint(i))
	}
	if perPos != accepted {
		t.Fatalf("accepted by position sum to %v, accepted %v", perPos, accepted)
	}
	st := h.stats().Speculative
	if st.AcceptedTokens < uint64(accepted) || len(st.AcceptedPerPos) != 4 || st.AcceptanceRate == nil {
		t.Fatalf("/v1/stats speculative %+v", st)
	}
}

// TestPredictionShapes: every malformed prediction is a 400 naming its
// field.
func TestPredictionShapes(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct{ pred, param, want string }{
		{`"text"`, "prediction", "prediction must be"},
		{`{"type": "content", "content": "x", "extra": 1}`, "prediction", "unknown field"},
		{`{"type": "file", "content": "x"}`, "prediction.type", `must be "content"`},
		{`{"content": "x"}`, "prediction.type", `must be "content"`},
		{`{"type": "content"}`, "prediction.content", "required"},
		{`{"type": "content", "content": 5}`, "prediction.content", "string or an array"},
		{`{"type": "content", "content": [{"type": "image_url", "text": "x"}]}`, "prediction.content[0].type", `type "text"`},
		{`{"type": "content", "content": [{"type": "text", "text": "a"}, {"type": "text"}]}`, "prediction.content[1].text", "needs its text"},
	} {
		for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
			head := `"prompt": "Hi"`
			if path == "/v1/chat/completions" {
				head = `"messages": [{"role": "user", "content": "Hi"}]`
			}
			h.expect400(path, `{`+head+`, "max_tokens": 2, "prediction": `+tc.pred+`}`, tc.param, tc.want)
		}
	}
}
