package server

import (
	_ "embed"

	"github.com/valyala/fasthttp"
)

// indexHTML is the status page at GET /: self-contained (no external
// resources), it polls GET /v1/stats.
//
//go:embed ui/index.html
var indexHTML []byte

// The status page may run its own inline script and styles and fetch from
// this origin, nothing else.
const indexCSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// handleIndex serves the status page.
func (s *Server) handleIndex(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.Response.Header.Set("Content-Security-Policy", indexCSP)
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetBody(indexHTML)
}
