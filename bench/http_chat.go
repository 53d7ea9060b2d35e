package bench

import (
	"context"
	"encoding/json"
	"strings"
)

// chatMessage is one OpenAI chat message.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatBody is the /v1/chat/completions request of a ChatAPI run: streamed,
// with the usage chunk that carries the cached prompt tokens.
type chatBody struct {
	Messages      []chatMessage `json:"messages"`
	MaxTokens     int           `json:"max_tokens"`
	Stream        bool          `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// chatChunk is the part of a chat.completion.chunk event a run reads.
type chatChunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *streamError `json:"error"`
}

// chatText spells a workload message as text: a letter per token ID, so
// that a byte tokenizer reads as many tokens as the workload asked for.
func chatText(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteByte('a' + byte(id%26))
	}
	return b.String()
}

// chatTurn sends a conversation so far to /v1/chat/completions and
// records its measurement. It returns the assistant's reply, the usage
// and whether the request succeeded.
func (r *httpRun) chatTurn(ctx context.Context, msgs []chatMessage, maxTokens int) (string, *streamUsage, bool) {
	body := chatBody{Messages: msgs, MaxTokens: maxTokens, Stream: true}
	body.StreamOptions.IncludeUsage = true
	var reply strings.Builder
	usage, ok := r.stream(ctx, "/v1/chat/completions", body, func(data []byte) (streamPart, error) {
		var ch chatChunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return streamPart{}, err
		}
		p := streamPart{err: ch.Error}
		if u := ch.Usage; u != nil {
			p.usage = &streamUsage{PromptTokens: u.PromptTokens, CachedTokens: u.PromptTokensDetails.CachedTokens, CompletionTokens: u.CompletionTokens}
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != "" {
				reply.WriteString(c.Delta.Content)
				p.token = true
			}
		}
		return p, nil
	})
	return reply.String(), usage, ok
}
