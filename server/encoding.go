package server

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strings"

	"github.com/valyala/fasthttp"
)

// decodeBody replaces a gzip-encoded request body with its decoded bytes,
// read no further than the body limit, so a small body that inflates past
// it (a gzip bomb) is a 413 without ever being held whole. Any other
// Content-Encoding but identity is a 415 naming what is accepted.
func (s *Server) decodeBody(ctx *fasthttp.RequestCtx) *apiError {
	enc := strings.ToLower(strings.TrimSpace(string(ctx.Request.Header.ContentEncoding())))
	if len(ctx.Request.Body()) == 0 {
		return nil
	}
	switch enc {
	case "", "identity":
		return nil
	case "gzip", "x-gzip":
	default:
		ctx.Response.Header.Set("Accept-Encoding", "gzip") // RFC 7694
		return &apiError{Status: 415, Type: typeInvalid,
			Message: fmt.Sprintf("Content-Encoding %q is not supported: send the body as is or gzip-encoded", enc)}
	}
	corrupt := func(err error) *apiError {
		return badRequest("", "the body is not valid gzip: %v", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(ctx.Request.Body()))
	if err != nil {
		return corrupt(err)
	}
	b, err := io.ReadAll(io.LimitReader(zr, int64(s.cfg.MaxBodyBytes)+1))
	switch {
	case err != nil:
		return corrupt(err)
	case len(b) > s.cfg.MaxBodyBytes:
		return &apiError{Status: 413, Type: typeInvalid,
			Message: fmt.Sprintf("the decoded request body is larger than the limit of %d bytes", s.cfg.MaxBodyBytes)}
	}
	ctx.Request.SetBody(b)
	ctx.Request.Header.Del(fasthttp.HeaderContentEncoding)
	return nil
}
