package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/prefixd/prefixd/engine"
	"github.com/valyala/fasthttp"
)

// apiError is a client-visible error: an HTTP status and a message saying
// what is wrong, and for which field. It is the body's "error" object.
type apiError struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param,omitempty"`
}

func (e *apiError) Error() string { return e.Message }

// Error types, as OpenAI-style clients expect in error.type.
const (
	typeInvalid     = "invalid_request_error"
	typeAuth        = "authentication_error"
	typePermission  = "permission_error"
	typeNotFound    = "not_found_error"
	typeConflict    = "conflict_error"
	typeRateLimit   = "rate_limit_error"
	typeUnavailable = "unavailable_error"
	typeServer      = "server_error"
)

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: 400, Type: typeInvalid, Param: param, Message: fmt.Sprintf(format, args...)}
}

// fieldError is a decoding error that knows its field.
type fieldError struct{ param, msg string }

func (e *fieldError) Error() string { return e.msg }

func tooLarge(limit int) *apiError {
	return &apiError{Status: 413, Type: typeInvalid, Message: fmt.Sprintf("request body is larger than the limit of %d bytes", limit)}
}

// parseError answers requests fasthttp could not read.
func (s *Server) parseError(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		s.writeError(ctx, tooLarge(s.cfg.MaxBodyBytes))
		return
	}
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		s.writeError(ctx, &apiError{Status: 408, Type: typeInvalid, Message: "timed out reading the request"})
		return
	}
	if errors.As(err, new(*fasthttp.ErrSmallBuffer)) || errors.Is(err, fasthttp.ErrSmallReadBuffer) {
		s.writeError(ctx, &apiError{Status: 431, Type: typeInvalid, Message: "request headers are too large"})
		return
	}
	s.log.Debug("malformed HTTP request", "err", redact(err))
	s.writeError(ctx, badRequest("", "malformed HTTP request"))
}

// writeJSON sends v as the response body.
func (s *Server) writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("encoding a response", "err", err)
		status, b = 500, []byte(`{"error":{"message":"internal error: encoding the response","type":"server_error"}}`)
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(append(b, '\n'))
}

// writeError sends e as {"error": {...}}.
func (s *Server) writeError(ctx *fasthttp.RequestCtx, e *apiError) {
	if e.Status >= 500 {
		s.log.Error("request failed", "path", string(ctx.Path()), "status", e.Status, "err", e.Message)
	}
	if e.Status == 401 {
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="prefixd"`)
	}
	s.writeJSON(ctx, e.Status, struct {
		Error *apiError `json:"error"`
	}{e})
}

// submitError maps an engine.Submit error to a response.
func submitError(err error) *apiError {
	var inv *engine.InvalidError
	switch {
	case errors.As(err, &inv):
		return &apiError{Status: 400, Type: typeInvalid, Param: inv.Param, Message: inv.Msg}
	case errors.Is(err, engine.ErrQueueFull):
		return &apiError{Status: 429, Type: typeRateLimit, Message: "the server is at capacity: retry later"}
	case errors.Is(err, engine.ErrClosed):
		return &apiError{Status: 503, Type: typeUnavailable, Message: "the server is shutting down"}
	}
	return &apiError{Status: 500, Type: typeServer, Message: "internal error: " + err.Error()}
}

func (s *Server) writeSubmitError(ctx *fasthttp.RequestCtx, err error) {
	e := submitError(err)
	if e.Status == 429 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	s.writeError(ctx, e)
}

// fasthttpLogger sends fasthttp's own messages to slog, with its errors
// redacted. While the server drains (draining is true) it closes idle
// connections itself, so fasthttp's errors about using a closed one are
// expected and left out.
type fasthttpLogger struct {
	l        *slog.Logger
	draining func() bool
}

func (f fasthttpLogger) Printf(format string, args ...any) {
	for i, a := range args {
		if err, ok := a.(error); ok {
			if errors.Is(err, net.ErrClosed) && f.draining() {
				return
			}
			args[i] = redact(err)
		}
	}
	f.l.Warn("fasthttp: " + fmt.Sprintf(format, args...))
}

// redact returns err's text up to its first quote. fasthttp quotes the
// request bytes it could not parse, even with SecureErrorLogMessage for a
// malformed header line, and those may hold credentials or prompt text.
func redact(err error) string {
	msg := err.Error()
	if i := strings.IndexAny(msg, "\"'`"); i >= 0 {
		msg = strings.TrimRight(msg[:i], ": ") + " (request bytes not logged)"
	}
	return msg
}

// resultError is the error a finished request reports, if any.
func resultError(res *engine.Result) *apiError {
	switch res.Finish {
	case engine.FinishError:
		if errors.Is(res.Err, engine.ErrNoRoom) {
			// Operator pins took the room the request was admitted with:
			// the server's state, not the request, and it passes with an
			// unpin or an expiry, so the client may retry.
			return &apiError{Status: 503, Type: typeUnavailable, Message: "the request was accepted but cannot run now: " + res.Err.Error()}
		}
		if errors.Is(res.Err, engine.ErrNonFinite) {
			// The model's fault, not the request's: its weights hold NaN
			// or Inf, or its activations overflowed.
			return &apiError{Status: 500, Type: typeServer, Message: "generation failed: the model's output is not a number " +
				"(NaN or an infinity), so no token could be drawn; the model file may be corrupt: " + res.Err.Error()}
		}
		msg := "generation failed"
		if res.Err != nil {
			msg += ": " + res.Err.Error()
		}
		return &apiError{Status: 500, Type: typeServer, Message: msg}
	case engine.FinishCancelled:
		// The server's own context only ends when a drain runs out of time.
		return &apiError{Status: 503, Type: typeUnavailable, Message: "the request was cancelled: the server is shutting down"}
	}
	return nil
}
