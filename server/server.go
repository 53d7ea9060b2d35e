// Package server is prefixd's HTTP face: generation endpoints (a native
// JSON API, server-sent-event streaming and an OpenAI-compatible
// completions API), cache administration, health checks and Prometheus
// metrics, served with fasthttp over one engine.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
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

// defaultMaxTenantPriority is Config.MaxTenantPriority's default: room for
// a tenant to rank its own prefixes, far below what an operator may set.
const defaultMaxTenantPriority = 100

// adminTokenHeader carries the admin token on a generation request made
// with a tenant's API key, lifting the tenant priority cap.
const adminTokenHeader = "X-Admin-Token"

// newID returns a request id with the given prefix.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// retryAfter is the Retry-After of a 429, in seconds: a queue slot opens
// when a request finishes, typically well within this.
const retryAfter = 1
