package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/prefixd/prefixd/engine"
)

// predictionJSON is OpenAI's prediction (Predicted Outputs): the output
// the caller expects, text or text parts, which speculative decoding
// drafts from. It never changes the output, only how fast it comes.
type predictionJSON struct {
	Type    string          `json:"type"`
	Content json.RawMessage `json:"content"`
}

// predictionPart is one part of a prediction's content.
type predictionPart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// predict decodes p.Prediction, if sent, into req.Prediction: its text
// tokenized by the model's tokenizer without BOS (the output's tokens
// carry none). Bad shapes are 400s naming the field.
func (p *openAIParams) predict(req *engine.Request, lim limits) *apiError {
	raw := bytes.TrimSpace(p.Prediction)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var pr predictionJSON
	if err := strictField(raw, &pr); err != nil {
		return badRequest("prediction", `prediction must be {"type": "content", "content": TEXT or [{"type": "text", "text": TEXT}]}: %v`, err)
	}
	if pr.Type != "content" {
		return badRequest("prediction.type", `prediction.type must be "content", got %.32q`, pr.Type)
	}
	var text string
	var parts []predictionPart
	switch c := bytes.TrimSpace(pr.Content); {
	case len(c) == 0 || string(c) == "null":
		return badRequest("prediction.content", "prediction.content is required")
	case json.Unmarshal(c, &text) == nil:
	case strictField(c, &parts) == nil:
		var sb strings.Builder
		for i, part := range parts {
			if part.Type != "text" {
				return badRequest(fmt.Sprintf("prediction.content[%d].type", i), `a prediction's content parts must be of type "text", got %.32q`, part.Type)
			}
			if part.Text == nil {
				return badRequest(fmt.Sprintf("prediction.content[%d].text", i), "a text part needs its text")
			}
			sb.WriteString(*part.Text)
		}
		text = sb.String()
	default:
		return badRequest("prediction.content", "prediction.content must be a string or an array of text parts")
	}
	if text == "" {
		return nil
	}
	if lim.tokenizer == nil {
		return badRequest("prediction", "a prediction is text, and this model has no tokenizer")
	}
	req.Prediction = lim.tokenizer.Encode(text)
	if n := len(req.Prediction); n > lim.maxModelLen {
		return badRequest("prediction", "the prediction is %d tokens, more than the longest sequence (%d)", n, lim.maxModelLen)
	}
	return nil
}

// strictField decodes raw into v, refusing unknown fields.
func strictField(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
