// Package server is prefixd's HTTP face: generation endpoints (a native
// JSON API, server-sent-event streaming and an OpenAI-compatible
// completions API), cache administration, health checks and Prometheus
// metrics, served with fasthttp over one engine.
package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/prefixd/prefixd/chat"
	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/trace"
)

// Tokenizer is what the server needs from a model's vocabulary;
// model.Tokenizer implements it.
type Tokenizer interface {
	// Encode tokenizes text, without BOS.
	Encode(text string) []int32
	// AppendPiece appends the bytes token id adds to a text.
	AppendPiece(dst []byte, id int32) []byte
	// BOS is the beginning-of-sequence token, -1 if none.
	BOS() int32
}

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// Engine serves the requests; required. The Server owns it from New
	// on: Shutdown closes it.
	Engine *engine.Engine
	// Tokenizer encodes text prompts and decodes output; nil for a model
	// without a vocabulary (then only prompt_ids and stop_ids work). It
	// must be the engine's.
	Tokenizer Tokenizer
	// ModelName is the model's id in /v1/models and completion responses;
	// default "prefixd".
	ModelName string
	// AdminToken guards the /v1/cache endpoints (Authorization: Bearer);
	// empty disables them (403).
	AdminToken string
	// APIKeys maps each API key to its tenant's cache namespace. With keys,
	// generation needs one (401 otherwise); without, every request shares
	// the namespace "".
	APIKeys map[string]string
	// PublicStats, with APIKeys, leaves the aggregate figures (/metrics and
	// /v1/stats) open to callers without a key. By default they need an
	// API key or the admin token: they tell every tenant's request rates,
	// token counts and cache hit rates. The status page (/) is static and
	// always open; it reads /v1/stats, so with keys and without
	// PublicStats it shows a 401. Without APIKeys everything is open.
	// Default false.
	PublicStats bool
	// MaxTenantPriority, with APIKeys, is the highest cache.priority a
	// tenant's key may give its prefixes, so one tenant cannot make its own
	// outlast everyone else's; a request that also carries the admin token
	// in the X-Admin-Token header may set any. Without APIKeys there are
	// no tenants and no cap. Default (and when 0) 100; negative is an
	// error.
	MaxTenantPriority int32
	// MaxBodyBytes bounds a request body; default 1 MiB.
	MaxBodyBytes int
	// MaxPromptTokens bounds a prompt; default and cap: the engine's
	// MaxModelLen - 1.
	MaxPromptTokens int
	// MaxTokens bounds a request's max_tokens; default and cap: the
	// engine's MaxModelLen - 1.
	MaxTokens int
	// DefaultMaxTokens applies to /generate requests without max_tokens;
	// default 64 (OpenAI completions default to 16).
	DefaultMaxTokens int
	// MaxLogprobEntries bounds the log-probabilities an OpenAI request
	// that is not streamed may ask for: n × max_tokens × (1 +
	// top_logprobs), each a JSON object of its answer, which is built
	// whole in memory. Default 262144 (at about 60 bytes an entry, an
	// answer of some 16 MB); a streamed request is not bounded.
	MaxLogprobEntries int
	// KeepAlive is the interval of SSE comments sent while a stream waits
	// for tokens, so a gone client is noticed (and its request cancelled)
	// even while queued; default 5 s.
	KeepAlive time.Duration
	// ReadTimeout bounds reading one request; IdleTimeout, a keep-alive
	// connection's wait for the next. Defaults 30 s and 2 min. Responses
	// have no write timeout: a stream lasts as long as its generation.
	ReadTimeout, IdleTimeout time.Duration
	// Metrics receives the engine's measurements: pass the same Metrics as
	// the engine's Config.Observer and Config.Samples. Default: a fresh
	// Metrics, whose histograms then stay empty.
	Metrics *Metrics
	// Logger receives request errors and lifecycle events; default
	// slog.Default().
	Logger *slog.Logger
	// Trace, if not nil, receives a record of every generation request the
	// engine accepts (see package trace), in arrival order, each written
	// once its request has finished, with its output length. Shutdown
	// returns after the last record; closing the file is the caller's.
	Trace *trace.Writer
	// TraceTokens records prompts as token IDs; by default a record holds
	// only the prompt's block hashes (trace.BlockHashes), not its text.
	TraceTokens bool
	// DeviceMemory, set when the model runs on a GPU, reports its memory
	// for /v1/stats and /metrics (prefixd_device_memory_bytes).
	DeviceMemory DeviceMemory
	// Version is what GET /version reports.
	Version BuildVersion
	// ChatTemplate renders /v1/chat/completions conversations and
	// /tokenize's messages. Default: the tokenizer's own template, else
	// the built-in one (chat.BuiltinFor) its vocabulary's marker tokens
	// call for, else ChatML.
	ChatTemplate *chat.Template
	// ChatSpecialInContent encodes the texts of control tokens in chat
	// messages' contents as those tokens, as Hugging Face tokenizers do,
	// so that a user's <|im_end|> ends a turn. Default: they stay text.
	ChatSpecialInContent bool
}

// DeviceMemory returns a GPU's free and total memory in bytes.
type DeviceMemory func() (free, total int64, err error)

// Server serves one engine over HTTP. It is safe for concurrent use.
type Server struct {
	cfg     Config
	eng     *engine.Engine
	ecfg    engine.Config
	log     *slog.Logger
	metrics *Metrics
	srv     *fasthttp.Server
	routes  map[string]*route
	handler fasthttp.RequestHandler
	trace   *tracer // nil without Config.Trace
	chat    *chatSetup

	grammars *grammarSetup // structured outputs; nil without a tokenizer

	conns *connSet // the client connections, for the drain to wait on and close

	// base is the parent of every request's context: not the RequestCtx,
	// whose Done fires when shutdown begins, before in-flight requests
	// have drained. It ends after the drain.
	base     context.Context
	stopBase context.CancelFunc
	draining atomic.Bool
	created  int64 // Unix seconds, for /v1/models

	// lnMu orders Serve's check of draining against Shutdown setting it,
	// so that a listener Serve was given is either refused or closed by
	// Shutdown: fasthttp's own shutdown closes only the listeners its
	// Serve has reached, and one it reaches later would serve forever.
	lnMu      sync.Mutex
	listeners []net.Listener

	// The cache TTLs in force. The server is the only caller of SetTTLs;
	// it keeps them here because Stats publishes a change only after the
	// engine's next iteration.
	ttlMu              sync.Mutex // serializes changes
	defaultTTL, maxTTL atomic.Int64
}

// New builds a Server over cfg.Engine.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil {
		return nil, errors.New("server: Config.Engine is required")
	}
	ecfg := cfg.Engine.Config()
	longest := ecfg.MaxModelLen - 1
	for _, f := range []struct {
		v    *int
		def  int
		max  int
		name string
	}{
		{&cfg.MaxBodyBytes, 1 << 20, 1 << 30, "MaxBodyBytes"},
		{&cfg.MaxPromptTokens, longest, longest, "MaxPromptTokens"},
		{&cfg.MaxTokens, longest, longest, "MaxTokens"},
		{&cfg.DefaultMaxTokens, 64, longest, "DefaultMaxTokens"},
		{&cfg.MaxLogprobEntries, 1 << 18, math.MaxInt32, "MaxLogprobEntries"},
	} {
		switch {
		case *f.v == 0:
			*f.v = f.def
		case *f.v < 0:
			return nil, fmt.Errorf("server: Config.%s must be positive, got %d", f.name, *f.v)
		}
		*f.v = min(*f.v, f.max)
	}
	for _, f := range []struct {
		v    *time.Duration
		def  time.Duration
		name string
	}{
		{&cfg.KeepAlive, 5 * time.Second, "KeepAlive"},
		{&cfg.ReadTimeout, 30 * time.Second, "ReadTimeout"},
		{&cfg.IdleTimeout, 2 * time.Minute, "IdleTimeout"},
	} {
		switch {
		case *f.v == 0:
			*f.v = f.def
		case *f.v < 0:
			return nil, fmt.Errorf("server: Config.%s must be positive, got %v", f.name, *f.v)
		}
	}
	switch {
	case cfg.MaxTenantPriority == 0:
		cfg.MaxTenantPriority = defaultMaxTenantPriority
	case cfg.MaxTenantPriority < 0:
		return nil, fmt.Errorf("server: Config.MaxTenantPriority must be positive, got %d", cfg.MaxTenantPriority)
	}
	if cfg.ModelName == "" {
		cfg.ModelName = "prefixd"
	}
	for k := range cfg.APIKeys {
		if k == "" {
			return nil, errors.New("server: Config.APIKeys has an empty key")
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	s := &Server{cfg: cfg, eng: cfg.Engine, ecfg: ecfg, log: cfg.Logger, metrics: cfg.Metrics, created: time.Now().Unix(),
		conns: newConnSet()}
	s.base, s.stopBase = context.WithCancel(context.Background())
	s.trace = newTracer(cfg.Trace, cfg.TraceTokens, ecfg.BlockSize, cfg.Logger)
	if cfg.Tokenizer != nil {
		var err error
		if s.chat, err = newChatSetup(cfg.Tokenizer, cfg.ChatTemplate, cfg.ChatSpecialInContent); err != nil {
			return nil, err
		}
		s.log.Info("chat template", "template", s.chat.source)
		stops := slices.Clone(s.chat.eot)
		if ecfg.EOS >= 0 && !slices.Contains(stops, ecfg.EOS) {
			stops = append(stops, ecfg.EOS)
		}
		s.grammars = newGrammarSetup(cfg.Tokenizer, ecfg.Model.VocabSize(), stops)
	}
	st := cfg.Engine.Stats()
	s.defaultTTL.Store(int64(st.DefaultTTL))
	s.maxTTL.Store(int64(st.MaxTTL))
	if err := s.metrics.bind(s); err != nil {
		return nil, err
	}
	s.routes = s.buildRoutes()
	s.handler = s.serveHTTP
	s.srv = &fasthttp.Server{
		Handler:      s.handler,
		ErrorHandler: s.parseError,
		Name:         "prefixd",
		// Bodies up to twice the limit are read whole and refused by the
		// handler, so the client reads its 413 before the connection
		// closes; larger ones are cut off while being read.
		MaxRequestBodySize:           2 * cfg.MaxBodyBytes,
		ReadTimeout:                  cfg.ReadTimeout,
		IdleTimeout:                  cfg.IdleTimeout,
		CloseOnShutdown:              true,
		NoDefaultContentType:         true,
		TCPKeepalive:                 true,
		DisablePreParseMultipartForm: true,
		ConnState:                    s.conns.track,
		// fasthttp otherwise quotes the raw request it could not parse in
		// its errors: headers, Authorization included.
		SecureErrorLogMessage: true,
		Logger:                fasthttpLogger{s.log, s.Draining},
	}
	return s, nil
}

// Handler returns the request handler, for tests and embedding.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handler }

// Serve accepts connections on ln until Shutdown. It returns nil after a
// Shutdown, at once (closing ln) when Shutdown has already begun.
func (s *Server) Serve(ln net.Listener) error {
	s.lnMu.Lock()
	if s.draining.Load() {
		s.lnMu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners = append(s.listeners, ln)
	s.lnMu.Unlock()
	err := s.srv.Serve(ln)
	if s.draining.Load() {
		return nil
	}
	return err
}

// answerGrace bounds how long Shutdown waits, once its context has ended
// and the engine has cancelled what remained, for those requests' answers
// (a 503, or a stream's final error event) to be written, before it
// closes the connections under them: a client that stops reading could
// otherwise hold the process.
const answerGrace = 5 * time.Second

// Shutdown drains the server: /readyz turns 503, listeners close, new
// generation requests get 503, and in-flight ones run to completion until
// ctx ends, when the engine cancels what remains and each of those gets
// its answer: a 503 error, or on a stream a final event carrying the error
// (then [DONE]). Shutdown returns once every answer is written (or
// answerGrace after ctx ends), closing the connections that remain: idle
// ones, and ones still sending a request, which never held it up. It
// closes the engine, and returns ctx's error if ctx ended first.
func (s *Server) Shutdown(ctx context.Context) error {
	s.lnMu.Lock()
	s.draining.Store(true)
	for _, ln := range s.listeners {
		ln.Close() // fasthttp closes those its Serve has reached too; a second Close only errs
	}
	s.listeners = nil
	s.lnMu.Unlock()
	// fasthttp's own shutdown closes the listeners and idle connections,
	// then waits for every other one to end by itself, also one that is
	// still sending its request: it runs until the drain is over.
	httpCtx, stopHTTP := context.WithCancel(context.Background())
	httpDone := make(chan struct{})
	go func() {
		s.srv.ShutdownWithContext(httpCtx)
		close(httpDone)
	}()
	engErr := s.eng.Close(ctx) // every request has its Result now
	grace := time.NewTimer(answerGrace)
	select {
	case <-s.conns.idle():
	case <-grace.C:
		s.log.Warn("drain: answers still unwritten after the grace period; closing their connections")
	}
	grace.Stop()
	stopHTTP()
	<-httpDone
	// Closed, a connection's reads and writes fail at once; Shutdown
	// returns only when fasthttp (or the hijack handler) is done with each,
	// not merely once none is answering: a connection that turned idle
	// after its answer is still fasthttp's to close.
	s.conns.closeAll()
	<-s.conns.empty()
	s.stopBase()
	s.trace.wait() // every request has finished: its record goes out now
	if engErr != nil {
		return fmt.Errorf("server: draining the engine: %w", engErr)
	}
	return nil
}

// Draining reports whether Shutdown has begun.
func (s *Server) Draining() bool { return s.draining.Load() }

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

// defaultMaxTenantPriority is Config.MaxTenantPriority's default: room for
// a tenant to rank its own prefixes, far below what an operator may set.
const defaultMaxTenantPriority = 100

// adminTokenHeader carries the admin token on a generation request made
// with a tenant's API key, lifting the tenant priority cap.
const adminTokenHeader = "X-Admin-Token"

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

// newID returns a request id with the given prefix.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
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

// retryAfter is the Retry-After of a 429, in seconds: a queue slot opens
// when a request finishes, typically well within this.
const retryAfter = 1

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
