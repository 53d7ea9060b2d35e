package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/disktier"
	"github.com/prefixd/prefixd/engine"
)

// TestDiskTierStats runs prompts through a pool too small to keep them, so
// the device evicts them into the disk tier, then the first prompt again:
// it is served from disk, and /v1/stats, /v1/cache and /metrics say
// so; a server without a disk tier shows none of it.
func TestDiskTierStats(t *testing.T) {
	d, err := disktier.New(disktier.Config{Dir: t.TempDir(), CapacityBytes: 1 << 30, Model: disktier.ModelFingerprint{1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	h := newHarness(t, withEngine(func(c *engine.Config) { c.NumBlocks, c.DiskTier = 24, d }))
	complete := func(i int) {
		t.Helper()
		prompt := fmt.Sprintf("%d: %s", i, strings.Repeat("a story of cached prefixes ", 4))
		body := fmt.Sprintf(`{"model": "prefixd-builtin-byte-3m", "prompt": %q, "max_tokens": 2, "temperature": 0}`, prompt)
		if code, b, _ := h.do("POST", "/v1/completions", body); code != 200 {
			t.Fatalf("%d %s", code, b)
		}
	}
	for i := range 4 {
		complete(i)
	}
	d.Wait()
	complete(0)
	d.Wait() // what the last request evicted is written: the counts hold still
	s := h.stats()
	if s.DiskTier == nil || s.DiskTier.Writes == 0 || s.DiskTier.Hits == 0 || s.Tokens.CacheHitDisk == 0 || s.HitRate.Disk == nil {
		t.Fatalf("/v1/stats: disk tier %+v, disk hits %d tokens", s.DiskTier, s.Tokens.CacheHitDisk)
	}
	if _, ok := s.CacheHitAge["disk"]; !ok {
		t.Fatal("/v1/stats has no disk hit-age summary")
	}
	code, b, _ := h.do("GET", "/v1/cache", "", "Authorization", "Bearer admin-secret")
	if code != 200 || !strings.Contains(string(b), `"cache_hit_disk_tokens":`) || !strings.Contains(string(b), `"corrupt_records":0`) {
		t.Fatalf("/v1/cache: %d %s", code, b)
	}
	fams := h.scrape()
	if got := metric(fams, "prefixd_disk_tier_writes_total"); got != float64(s.DiskTier.Writes) {
		t.Fatalf("prefixd_disk_tier_writes_total %v, /v1/stats says %d", got, s.DiskTier.Writes)
	}
	if metric(fams, "prefixd_cache_hit_tokens_total", "tier", "disk") <= 0 || metric(fams, "prefixd_cache_hit_age_seconds", "tier", "disk") <= 0 {
		t.Fatal("/metrics shows no disk hits")
	}

	plain := newHarness(t)
	if s := plain.stats(); s.DiskTier != nil {
		t.Fatalf("/v1/stats without a disk tier: %+v", s.DiskTier)
	}
	if metric(plain.scrape(), "prefixd_disk_tier_bytes") != -1 {
		t.Fatal("/metrics exports disk tier series without a disk tier")
	}
}
