package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/prefixd/prefixd/engine"
)

// access is what a request's access-log line says. serveHTTP copies the
// method and path out of the RequestCtx, which a stream outlives; the
// handlers fill in the rest. It holds no prompt text and no credential.
type access struct {
	start        time.Time
	method, path string
	namespace    string
	user         string         // an OpenAI request's user field: a label, cut to 64 bytes
	cacheKey     string         // an OpenAI request's prompt_cache_key: a label of at most 64 bytes
	result       *engine.Result // the generation's outcome, if any
	streamed     bool           // the stream's writer logs the line when it ends
}

// accessKey carries a request's *access in the RequestCtx.
const accessKey = "prefixd.access"

// accessOf returns ctx's access record, a throwaway one if routing did not
// set one.
func accessOf(ctx *fasthttp.RequestCtx) *access {
	if a, ok := ctx.UserValue(accessKey).(*access); ok {
		return a
	}
	return &access{}
}

// logAccess writes a's line at info level: one per request, when its
// answer has been written.
func (s *Server) logAccess(a *access, status int) {
	attrs := []slog.Attr{
		slog.String("method", a.method),
		slog.String("path", a.path),
		slog.Int("status", status),
		slog.String("namespace", a.namespace),
	}
	if a.user != "" {
		attrs = append(attrs, slog.String("user", a.user))
	}
	if a.cacheKey != "" {
		attrs = append(attrs, slog.String("prompt_cache_key", a.cacheKey))
	}
	if r := a.result; r != nil {
		attrs = append(attrs,
			slog.Int("prompt_tokens", r.Usage.PromptTokens),
			slog.Int("cached_tokens", r.Usage.CachedTokens),
			slog.Int("cache_write_tokens", r.Usage.CacheWriteTokens),
			slog.Int("completion_tokens", r.Usage.CompletionTokens),
			slog.String("finish", string(r.Finish)))
	}
	attrs = append(attrs, slog.Duration("duration", time.Since(a.start)))
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
}
