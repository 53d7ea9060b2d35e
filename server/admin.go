package server

import (
	"errors"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/kvcache"
)

// adminError maps an engine admin error to a response.
func adminError(err error) *apiError {
	switch {
	case errors.Is(err, kvcache.ErrNotCached):
		return &apiError{Status: 404, Type: typeNotFound, Param: "prompt", Message: err.Error()}
	case errors.Is(err, kvcache.ErrPinBudget):
		return &apiError{Status: 409, Type: typeConflict, Message: err.Error()}
	case errors.Is(err, kvcache.ErrBadTTL):
		return &apiError{Status: 400, Type: typeInvalid, Message: err.Error()}
	case errors.Is(err, engine.ErrClosed):
		return &apiError{Status: 503, Type: typeUnavailable, Message: "the server is shutting down"}
	}
	return &apiError{Status: 500, Type: typeServer, Message: "internal error: " + err.Error()}
}

type cacheStatsJSON struct {
	Blocks struct {
		Total          int `json:"total"`
		Free           int `json:"free"`
		InUse          int `json:"in_use"`
		CachedIdle     int `json:"cached_idle"`
		SlotsAllocated int `json:"slots_allocated"`
		SlotsUsed      int `json:"slots_used"`
	} `json:"blocks"`
	BlockSize          int               `json:"block_size"`
	KVMemoryEfficiency float64           `json:"kv_memory_efficiency"`
	CachedNodes        int               `json:"cached_nodes"`
	PinnedBlocks       int               `json:"pinned_blocks"`
	PinBudgetBlocks    int               `json:"pin_budget_blocks"`
	DefaultTTL         string            `json:"default_ttl"`
	MaxTTL             string            `json:"max_ttl"`
	Running            int               `json:"running"`
	Waiting            int               `json:"waiting"`
	PromptTokens       uint64            `json:"prompt_tokens"`
	GeneratedTokens    uint64            `json:"generated_tokens"`
	PrefillTokens      uint64            `json:"prefill_tokens"`
	CacheQueryTokens   uint64            `json:"cache_query_tokens"`
	CacheHitDevice     uint64            `json:"cache_hit_device_tokens"`
	CacheHitHost       uint64            `json:"cache_hit_host_tokens"`
	CacheHitDisk       uint64            `json:"cache_hit_disk_tokens"`
	CacheHitRemote     uint64            `json:"cache_hit_remote_tokens"`
	HitRate            float64           `json:"hit_rate"`
	Evicted            map[string]uint64 `json:"evicted_blocks"`
	Demoted            uint64            `json:"demoted_blocks"`
	Promoted           uint64            `json:"promoted_blocks"`
	Preemptions        uint64            `json:"preemptions"`
	Steps              uint64            `json:"steps"`
	Requests           uint64            `json:"requests"`
	DiskTier           *diskTierJSON     `json:"disk_tier,omitempty"`
}

func (s *Server) handleCacheStats(ctx *fasthttp.RequestCtx) {
	st := s.eng.Stats()
	var out cacheStatsJSON
	b := st.Blocks
	out.Blocks.Total, out.Blocks.Free, out.Blocks.InUse, out.Blocks.CachedIdle = b.Total, b.Free, b.InUse, b.CachedOnly
	out.Blocks.SlotsAllocated, out.Blocks.SlotsUsed = b.SlotsAllocated, b.SlotsUsed
	out.BlockSize = s.ecfg.BlockSize
	out.KVMemoryEfficiency = efficiency(b.SlotsUsed, b.SlotsAllocated)
	out.CachedNodes, out.PinnedBlocks, out.PinBudgetBlocks = st.CachedNodes, st.PinnedBlocks, st.PinBudget
	out.DefaultTTL = time.Duration(s.defaultTTL.Load()).String()
	out.MaxTTL = time.Duration(s.maxTTL.Load()).String()
	out.Running, out.Waiting = st.Running, st.Waiting
	out.PromptTokens, out.GeneratedTokens, out.PrefillTokens = st.PromptTokens, st.GeneratedTokens, st.PrefillTokens
	out.CacheQueryTokens, out.CacheHitDevice, out.CacheHitHost = st.CacheQueryTokens, st.CacheHitDevice, st.CacheHitHost
	out.CacheHitDisk = st.CacheHitDisk
	out.CacheHitRemote = st.CacheHitRemote
	if st.CacheQueryTokens > 0 {
		out.HitRate = float64(st.CacheHitDevice+st.CacheHitHost+st.CacheHitDisk+st.CacheHitRemote) / float64(st.CacheQueryTokens)
	}
	if s.ecfg.DiskTier != nil {
		out.DiskTier = diskTierOf(st.Disk)
	}
	out.Evicted = map[string]uint64{}
	for _, r := range kvcache.Reasons() {
		out.Evicted[r.String()] = st.Cache.Evicted[r]
	}
	out.Demoted, out.Promoted = st.Cache.Demoted, st.Cache.Promoted
	out.Preemptions, out.Steps, out.Requests = st.Preemptions, st.Steps, st.Requests
	s.writeJSON(ctx, 200, out)
}

type prefixJSON struct {
	Namespace string  `json:"namespace"`
	Tokens    []int32 `json:"tokens"`
	Text      *string `json:"text,omitempty"`
	Hits      uint64  `json:"hits"`
	LastUsed  string  `json:"last_used"`
	TTLLeftMs int64   `json:"ttl_left_ms"`
	Pinned    bool    `json:"pinned"`
	InUse     bool    `json:"in_use"`
}

// Bounds of /v1/cache/prefixes?limit=.
const (
	defaultPrefixes = 20
	maxPrefixes     = 1000
)

func (s *Server) handleCachePrefixes(ctx *fasthttp.RequestCtx) {
	limit := defaultPrefixes
	if v := ctx.QueryArgs().Peek("limit"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 || n > maxPrefixes {
			s.writeError(ctx, badRequest("limit", "limit must be an integer in [1, %d], got %q", maxPrefixes, v))
			return
		}
		limit = n
	}
	ps, err := s.eng.Prefixes(limit)
	if err != nil {
		s.writeError(ctx, adminError(err))
		return
	}
	out := make([]prefixJSON, len(ps))
	for i, p := range ps {
		out[i] = prefixJSON{
			Namespace: p.Namespace, Tokens: nonNil(p.Tokens), Hits: p.Hits,
			LastUsed: p.LastUsed.UTC().Format(time.RFC3339Nano), TTLLeftMs: p.TTLLeft.Milliseconds(),
			Pinned: p.Pinned, InUse: p.InUse,
		}
		if tk := s.cfg.Tokenizer; tk != nil {
			var b []byte
			for _, id := range p.Tokens {
				b = tk.AppendPiece(b, id)
			}
			t := string(b)
			out[i].Text = &t
		}
	}
	s.writeJSON(ctx, 200, map[string]any{"prefixes": out})
}

type flushRequest struct {
	Namespace *string `json:"namespace"`
	All       bool    `json:"all"`
}

func (s *Server) handleCacheFlush(ctx *fasthttp.RequestCtx) {
	var f flushRequest
	if err := decodeStrict(ctx.PostBody(), &f); err != nil {
		s.writeError(ctx, err)
		return
	}
	if (f.Namespace != nil) == f.All {
		s.writeError(ctx, badRequest("namespace", `send exactly one of {"namespace": "..."} and {"all": true}`))
		return
	}
	ns := ""
	if f.Namespace != nil {
		ns = *f.Namespace
	}
	n, err := s.eng.Flush(ns, f.All)
	if err != nil {
		s.writeError(ctx, adminError(err))
		return
	}
	s.log.Info("cache flushed", "namespace", ns, "all", f.All, "blocks", n)
	s.writeJSON(ctx, 200, map[string]int{"flushed_blocks": n})
}

// pinRequest names a cached prefix: a namespace (default "") and the
// prompt, as text (tokenized as generation does, BOS first) or token IDs.
type pinRequest struct {
	Namespace string   `json:"namespace"`
	Prompt    *string  `json:"prompt"`
	PromptIDs tokenIDs `json:"prompt_ids"`
}

func (s *Server) parsePin(ctx *fasthttp.RequestCtx) (string, []int32, *apiError) {
	var p pinRequest
	if err := decodeStrict(ctx.PostBody(), &p); err != nil {
		return "", nil, err
	}
	lim := s.limits()
	var ids []int32
	switch {
	case (p.Prompt != nil) == (p.PromptIDs != nil):
		return "", nil, badRequest("prompt", "send exactly one of prompt and prompt_ids")
	case p.Prompt != nil:
		if s.cfg.Tokenizer == nil {
			return "", nil, badRequest("prompt", "this model has no tokenizer: send prompt_ids")
		}
		if err := checkPromptBytes("prompt", len(*p.Prompt), lim); err != nil {
			return "", nil, err
		}
		ids = encodePrompt(s.cfg.Tokenizer, *p.Prompt, lim.bos)
	default:
		ids = p.PromptIDs
	}
	param := "prompt"
	if p.Prompt == nil {
		param = "prompt_ids"
	}
	if err := checkPrompt(param, ids, lim); err != nil {
		return "", nil, err
	}
	return p.Namespace, ids, nil
}

func (s *Server) handleCachePin(ctx *fasthttp.RequestCtx) {
	ns, ids, aerr := s.parsePin(ctx)
	if aerr != nil {
		s.writeError(ctx, aerr)
		return
	}
	info, err := s.eng.Pin(ns, ids)
	if err != nil {
		s.writeError(ctx, adminError(err))
		return
	}
	s.log.Info("prefix pinned", "namespace", ns, "tokens", info.Tokens)
	s.writeJSON(ctx, 200, map[string]any{"namespace": info.Namespace, "pinned_tokens": info.Tokens})
}

func (s *Server) handleCacheUnpin(ctx *fasthttp.RequestCtx) {
	ns, ids, aerr := s.parsePin(ctx)
	if aerr != nil {
		s.writeError(ctx, aerr)
		return
	}
	found, err := s.eng.Unpin(ns, ids)
	if err != nil {
		s.writeError(ctx, adminError(err))
		return
	}
	s.writeJSON(ctx, 200, map[string]bool{"unpinned": found})
}

type ttlRequest struct {
	Default *string `json:"default"`
	Max     *string `json:"max"`
}

func (s *Server) handleCacheTTL(ctx *fasthttp.RequestCtx) {
	var t ttlRequest
	if err := decodeStrict(ctx.PostBody(), &t); err != nil {
		s.writeError(ctx, err)
		return
	}
	if t.Default == nil && t.Max == nil {
		s.writeError(ctx, badRequest("default", `send "default", "max" or both, as durations like "5m"`))
		return
	}
	s.ttlMu.Lock()
	defer s.ttlMu.Unlock()
	def, maxTTL := time.Duration(s.defaultTTL.Load()), time.Duration(s.maxTTL.Load())
	for _, f := range []struct {
		v     *string
		dst   *time.Duration
		param string
	}{{t.Default, &def, "default"}, {t.Max, &maxTTL, "max"}} {
		if f.v == nil {
			continue
		}
		d, err := time.ParseDuration(*f.v)
		if err != nil || d <= 0 {
			s.writeError(ctx, badRequest(f.param, "%s must be a positive duration like \"5m\", got %q", f.param, *f.v))
			return
		}
		*f.dst = d
	}
	if def > maxTTL {
		s.writeError(ctx, badRequest("default", "default TTL %v is above the maximum %v", def, maxTTL))
		return
	}
	if err := s.eng.SetTTLs(def, maxTTL); err != nil {
		s.writeError(ctx, adminError(err))
		return
	}
	s.defaultTTL.Store(int64(def))
	s.maxTTL.Store(int64(maxTTL))
	s.log.Info("cache TTLs changed", "default", def, "max", maxTTL)
	s.writeJSON(ctx, 200, map[string]string{"default": def.String(), "max": maxTTL.String()})
}
