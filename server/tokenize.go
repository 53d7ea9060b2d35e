package server

import (
	"github.com/valyala/fasthttp"
)

// tokenizeRequest is the body of POST /tokenize, in vLLM's shape: a
// prompt, or chat messages rendered with the chat template.
type tokenizeRequest struct {
	Model    string        `json:"model"`
	Prompt   *string       `json:"prompt"`
	Messages []chatMessage `json:"messages"`
	// AddSpecialTokens adds BOS where the model's prompts start with it;
	// default true for a prompt, false for messages (the template writes
	// its own), as in vLLM.
	AddSpecialTokens *bool `json:"add_special_tokens"`
	// AddGenerationPrompt ends rendered messages with the assistant turn's
	// header; default true.
	AddGenerationPrompt *bool `json:"add_generation_prompt"`
}

type tokenizeResponse struct {
	Count       int     `json:"count"`
	MaxModelLen int     `json:"max_model_len"`
	Tokens      []int32 `json:"tokens"`
}

// detokenizeRequest is the body of POST /detokenize.
type detokenizeRequest struct {
	Model  string   `json:"model"`
	Tokens tokenIDs `json:"tokens"`
}

type detokenizeResponse struct {
	Prompt string `json:"prompt"`
}

func (s *Server) handleTokenize(ctx *fasthttp.RequestCtx) {
	var r tokenizeRequest
	if !s.decodeOpenAI(ctx, &r) || !s.checkModel(ctx, r.Model) {
		return
	}
	if s.cfg.Tokenizer == nil {
		s.writeError(ctx, badRequest("", "this model has no tokenizer"))
		return
	}
	lim := s.limits()
	var ids []int32
	addSpecial := r.Messages == nil
	if r.AddSpecialTokens != nil {
		addSpecial = *r.AddSpecialTokens
	}
	switch {
	case r.Prompt != nil && r.Messages != nil:
		s.writeError(ctx, badRequest("prompt", "send either prompt or messages, not both"))
		return
	case r.Prompt != nil:
		if aerr := checkPromptBytes("prompt", len(*r.Prompt), lim); aerr != nil {
			s.writeError(ctx, aerr)
			return
		}
		ids = s.encoder().Encode(*r.Prompt)
	case r.Messages != nil:
		in, _, aerr := toChat(r.Messages)
		if aerr == nil {
			n := 0
			for _, m := range in.Messages {
				n += len(m.Content)
			}
			aerr = checkPromptBytes("messages", n, lim)
		}
		if aerr != nil {
			s.writeError(ctx, aerr)
			return
		}
		if ids, aerr = s.renderChat(in, r.AddGenerationPrompt == nil || *r.AddGenerationPrompt, "messages"); aerr != nil {
			s.writeError(ctx, aerr)
			return
		}
	default:
		s.writeError(ctx, badRequest("prompt", "prompt or messages is required"))
		return
	}
	if bos := lim.bos; addSpecial && bos >= 0 && (len(ids) == 0 || ids[0] != bos) {
		ids = append([]int32{bos}, ids...)
	}
	if len(ids) > lim.maxPrompt {
		param := "prompt"
		if r.Messages != nil {
			param = "messages"
		}
		s.writeError(ctx, badRequest(param, "%s is %d tokens, the limit is %d", param, len(ids), lim.maxPrompt))
		return
	}
	s.writeJSON(ctx, 200, tokenizeResponse{Count: len(ids), MaxModelLen: s.ecfg.MaxModelLen, Tokens: nonNil(ids)})
}

func (s *Server) handleDetokenize(ctx *fasthttp.RequestCtx) {
	var r detokenizeRequest
	if !s.decodeOpenAI(ctx, &r) || !s.checkModel(ctx, r.Model) {
		return
	}
	if s.cfg.Tokenizer == nil {
		s.writeError(ctx, badRequest("", "this model has no tokenizer"))
		return
	}
	if r.Tokens == nil {
		s.writeError(ctx, badRequest("tokens", "tokens is required"))
		return
	}
	if n, most := len(r.Tokens), s.ecfg.MaxModelLen; n > most {
		s.writeError(ctx, badRequest("tokens", "tokens holds %d tokens, the limit is %d (the model's maximum length)", n, most))
		return
	}
	vocab := s.ecfg.Model.VocabSize()
	var text []byte
	started := false // see model.Tokenizer's AppendTextPiece: the text loses a leading dummy space
	tp, pieces := s.cfg.Tokenizer.(interface {
		AppendTextPiece(dst []byte, id int32, started bool) ([]byte, bool)
	})
	for i, id := range r.Tokens {
		if id < 0 || int(id) >= vocab {
			s.writeError(ctx, badRequest("tokens", "token %d at position %d is outside the vocabulary [0, %d)", id, i, vocab))
			return
		}
		if pieces {
			text, started = tp.AppendTextPiece(text, id, started)
		} else {
			text = s.cfg.Tokenizer.AppendPiece(text, id)
		}
	}
	s.writeJSON(ctx, 200, detokenizeResponse{Prompt: string(text)})
}
