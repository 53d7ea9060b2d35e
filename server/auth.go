package server

import (
	"crypto/subtle"
	"strings"

	"github.com/valyala/fasthttp"
)

// bearer returns the request's bearer token.
func bearer(ctx *fasthttp.RequestCtx) (string, bool) {
	h := string(ctx.Request.Header.Peek("Authorization"))
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// callerKey resolves the caller's API key to its namespace; ok is false
// when it has answered with a 401.
func (s *Server) callerKey(ctx *fasthttp.RequestCtx) (ns string, ok bool) {
	tok, ok := bearer(ctx)
	if !ok {
		s.writeError(ctx, &apiError{Status: 401, Type: typeAuth, Message: "missing API key: send Authorization: Bearer <key>"})
		return "", false
	}
	found := false
	// Compare every key in constant time, so timing says nothing about
	// how close a guess was.
	for k, v := range s.cfg.APIKeys {
		if subtle.ConstantTimeCompare([]byte(k), []byte(tok)) == 1 {
			ns, found = v, true
		}
	}
	if !found {
		s.writeError(ctx, &apiError{Status: 401, Type: typeAuth, Message: "invalid API key"})
		return "", false
	}
	return ns, true
}

// tenant resolves the caller's namespace from its API key.
func (s *Server) tenant(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if len(s.cfg.APIKeys) > 0 {
			ns, ok := s.callerKey(ctx)
			if !ok {
				return
			}
			accessOf(ctx).namespace = ns
		}
		h(ctx)
	}
}

// stats guards the aggregate figures: with API keys and without
// Config.PublicStats, they need an API key or the admin token.
func (s *Server) stats(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if len(s.cfg.APIKeys) > 0 && !s.cfg.PublicStats && !s.isAdmin(ctx) {
			if _, ok := s.callerKey(ctx); !ok {
				return
			}
		}
		h(ctx)
	}
}

func namespace(ctx *fasthttp.RequestCtx) string { return accessOf(ctx).namespace }

// requestLimits is s.limits() for the request in ctx: a caller with a
// tenant's API key is held to Config.MaxTenantPriority unless it also
// sends the admin token in the X-Admin-Token header; a wrong admin token
// is a 401.
func (s *Server) requestLimits(ctx *fasthttp.RequestCtx) (limits, *apiError) {
	lim := s.limits()
	if len(s.cfg.APIKeys) == 0 {
		return lim, nil
	}
	tok := ctx.Request.Header.Peek(adminTokenHeader)
	if len(tok) == 0 {
		lim.capPriority, lim.priorityCap = true, s.cfg.MaxTenantPriority
		return lim, nil
	}
	if s.cfg.AdminToken == "" || subtle.ConstantTimeCompare(tok, []byte(s.cfg.AdminToken)) != 1 {
		return lim, &apiError{Status: 401, Type: typeAuth, Message: "invalid admin token in the " + adminTokenHeader + " header"}
	}
	return lim, nil
}

// isAdmin reports whether the request carries the admin token.
func (s *Server) isAdmin(ctx *fasthttp.RequestCtx) bool {
	tok, ok := bearer(ctx)
	return ok && s.cfg.AdminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AdminToken)) == 1
}

// admin guards the cache administration endpoints.
func (s *Server) admin(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if s.cfg.AdminToken == "" {
			s.writeError(ctx, &apiError{Status: 403, Type: typePermission, Message: "the admin endpoints are disabled: this server has no admin token"})
			return
		}
		tok, ok := bearer(ctx)
		if !ok {
			s.writeError(ctx, &apiError{Status: 401, Type: typeAuth, Message: "missing admin token: send Authorization: Bearer <token>"})
			return
		}
		if subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AdminToken)) != 1 {
			s.writeError(ctx, &apiError{Status: 401, Type: typeAuth, Message: "invalid admin token"})
			return
		}
		h(ctx)
	}
}
