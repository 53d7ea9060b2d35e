package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/disktier"
	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/internal/redistest"
	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/remotetier"
)

// TestRemoteTierTwoServers: two servers share one redis-server. The
// second answers a prompt the first served with the prompt's prefix
// fetched from the store, the same text, and /v1/stats and /metrics say
// so; a server without the tier shows none of it.
func TestRemoteTierTwoServers(t *testing.T) {
	s := redistest.Start(t)
	replica := func() (*harness, *remotetier.Tier) { return remoteTierHarness(t, s) }
	a, ra := replica()
	b, _ := replica()
	prompt := strings.Repeat("a story of shared prefixes ", 6)
	body := fmt.Sprintf(`{"model": "prefixd-builtin-byte-3m", "prompt": %q, "max_tokens": 4, "temperature": 0}`, prompt)
	var first, second struct {
		Choices []struct{ Text string } `json:"choices"`
	}
	a.post("/v1/completions", body, &first)
	ra.Wait()
	b.post("/v1/completions", body, &second)
	if first.Choices[0].Text != second.Choices[0].Text {
		t.Fatalf("first server %q, second %q", first.Choices[0].Text, second.Choices[0].Text)
	}
	st := b.stats()
	if st.RemoteTier == nil || st.RemoteTier.HitTokens == 0 || st.RemoteTier.HitTokens != st.Tokens.CacheQuery/8*8 ||
		st.HitRate.Remote == nil || st.RemoteTier.Breaker != "closed" {
		t.Fatalf("/v1/stats: remote tier %+v, %d tokens looked up", st.RemoteTier, st.Tokens.CacheQuery)
	}
	fams := b.scrape()
	if got := metric(fams, "prefixd_remote_tier_tokens_total", "outcome", "hit"); got != float64(st.RemoteTier.HitTokens) {
		t.Fatalf("prefixd_remote_tier_tokens_total{outcome=hit} %v, /v1/stats says %d", got, st.RemoteTier.HitTokens)
	}
	if metric(fams, "prefixd_cache_hit_tokens_total", "tier", "remote") != float64(st.RemoteTier.HitTokens) ||
		metric(fams, "prefixd_remote_tier_fetch_seconds") <= 0 {
		t.Fatal("/metrics shows no remote hits or fetch latency")
	}
	if s := newHarness(t).stats(); s.RemoteTier != nil {
		t.Fatalf("/v1/stats without a remote tier: %+v", s.RemoteTier)
	}
}

// idleRemoteTier is a remote tier that never dials its store (nothing
// fetches or writes through it): its collector exports every series, at
// zero, for tests of what /metrics names.
func idleRemoteTier(t *testing.T) *remotetier.Tier {
	t.Helper()
	r, err := remotetier.New(remotetier.Config{URL: "redis://127.0.0.1:1/0", Model: disktier.ModelFingerprint{1}, BlockTokens: 8, BlockBytes: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// remoteTierHarness starts a server on the built-in model whose engine has
// a remote tier on store, with the tier's metrics registered.
func remoteTierHarness(t *testing.T, store *redistest.Server) (*harness, *remotetier.Tier) {
	t.Helper()
	w := cpu.NewWorkers(1)
	t.Cleanup(w.Close)
	kv, err := model.NewRunner(builtin(), w).NewKV(1, 8)
	if err != nil {
		t.Fatal(err)
	}
	r, err := remotetier.New(remotetier.Config{URL: store.URL(0), Model: disktier.ModelFingerprint{1}, BlockTokens: 8, BlockBytes: kv.BlockBytes()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	h := newHarness(t, withEngine(func(c *engine.Config) { c.RemoteTier = r }),
		withServer(func(c *Config) { c.Metrics.Registry().MustRegister(r.Collector()) }))
	return h, r
}
