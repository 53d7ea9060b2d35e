package server

import (
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// route is one path's handlers by method.
type route struct {
	name    string // metric label
	methods map[string]fasthttp.RequestHandler
	allow   string
}

func (s *Server) buildRoutes() map[string]*route {
	routes := map[string]*route{}
	add := func(path, method string, h fasthttp.RequestHandler) {
		r := routes[path]
		if r == nil {
			r = &route{name: path, methods: map[string]fasthttp.RequestHandler{}}
			routes[path] = r
		}
		r.methods[method] = h
		ms := make([]string, 0, len(r.methods))
		for m := range r.methods {
			ms = append(ms, m)
		}
		slices.Sort(ms)
		r.allow = strings.Join(ms, ", ")
	}
	add("/generate", "POST", s.tenant(s.handleGenerate))
	add("/generate_stream", "POST", s.tenant(s.handleGenerateStream))
	add("/v1/completions", "POST", s.tenant(s.handleCompletions))
	add("/v1/chat/completions", "POST", s.tenant(s.handleChatCompletions))
	add("/tokenize", "POST", s.tenant(s.handleTokenize))
	add("/detokenize", "POST", s.tenant(s.handleDetokenize))
	add("/v1/models", "GET", s.tenant(s.handleModels))
	add("/metrics", "GET", s.stats(s.metrics.handler()))
	add("/", "GET", s.handleIndex)
	add("/v1/stats", "GET", s.stats(s.statsHandler()))
	add("/healthz", "GET", s.handleHealthz)
	add("/health", "GET", s.handleHealthz)
	add("/readyz", "GET", s.handleReadyz)
	add("/version", "GET", s.handleVersion)
	add("/v1/cache", "GET", s.admin(s.handleCacheStats))
	add("/v1/cache/prefixes", "GET", s.admin(s.handleCachePrefixes))
	add("/v1/cache/flush", "POST", s.admin(s.handleCacheFlush))
	add("/v1/cache/pin", "POST", s.admin(s.handleCachePin))
	add("/v1/cache/unpin", "POST", s.admin(s.handleCacheUnpin))
	add("/v1/cache/ttl", "PUT", s.admin(s.handleCacheTTL))
	return routes
}

// serveHTTP routes a request, turning a panic into a logged 500, and
// writes its access-log line.
func (s *Server) serveHTTP(ctx *fasthttp.RequestCtx) {
	s.conns.busy(ctx.Conn())
	// A handler that sets a write deadline makes fasthttp flush its answer
	// before serving the connection's next request, pipelined or not
	// (otherwise it holds the answer while a pipelined request runs). The
	// zero deadline is none; fasthttp clears it after the answer. So every
	// request starts with nothing of the connection's buffered, and await
	// may write its hang-up probe to the connection of any request.
	ctx.SetWriteDeadline(time.Time{})
	a := &access{start: time.Now(), method: string(ctx.Method()), path: string(ctx.Path())}
	ctx.SetUserValue(accessKey, a)
	r := s.routes[a.path]
	label := "other"
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("handler panic", "path", a.path, "panic", p, "stack", string(debug.Stack()))
			ctx.Response.Reset()
			s.writeError(ctx, &apiError{Status: 500, Type: typeServer, Message: "internal error"})
		}
		s.metrics.httpRequest(label, ctx.Response.StatusCode())
		if !a.streamed {
			s.logAccess(a, ctx.Response.StatusCode())
		}
	}()
	if r == nil {
		s.writeError(ctx, &apiError{Status: 404, Type: typeNotFound, Message: fmt.Sprintf("no endpoint %s", ctx.Path())})
		return
	}
	label = r.name
	h := r.methods[a.method]
	if h == nil && ctx.IsHead() {
		h = r.methods["GET"] // fasthttp sends the headers only
	}
	if h == nil {
		ctx.Response.Header.Set("Allow", r.allow)
		s.writeError(ctx, &apiError{Status: 405, Type: typeInvalid,
			Message: fmt.Sprintf("method %s not allowed on %s; allowed: %s", ctx.Method(), r.name, r.allow)})
		return
	}
	if e := s.decodeBody(ctx); e != nil {
		s.writeError(ctx, e)
		return
	}
	// Handler() may be called without the fasthttp server's own limit.
	if len(ctx.Request.Body()) > s.cfg.MaxBodyBytes {
		s.writeError(ctx, tooLarge(s.cfg.MaxBodyBytes))
		return
	}
	h(ctx)
}

func (s *Server) handleHealthz(ctx *fasthttp.RequestCtx) {
	s.writeJSON(ctx, 200, map[string]string{"status": "ok"})
}

func (s *Server) handleReadyz(ctx *fasthttp.RequestCtx) {
	if s.draining.Load() {
		s.writeJSON(ctx, 503, map[string]string{"status": "draining"})
		return
	}
	s.writeJSON(ctx, 200, map[string]string{"status": "ready"})
}

func (s *Server) handleModels(ctx *fasthttp.RequestCtx) {
	type modelObj struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
		MaxLen  int    `json:"max_model_len"`
	}
	s.writeJSON(ctx, 200, map[string]any{
		"object": "list",
		"data":   []modelObj{{ID: s.cfg.ModelName, Object: "model", Created: s.created, OwnedBy: "prefixd", MaxLen: s.ecfg.MaxModelLen}},
	})
}
