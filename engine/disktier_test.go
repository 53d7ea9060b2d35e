package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prefixd/prefixd/disktier"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/kvcache"
)

// TestDiskTierAcrossRestart runs a prompt on an engine with a disk tier,
// stops it cleanly (which saves the cache), and runs the prompt on a new
// engine over a new tier on the same directory, as a restarted process
// would: its prefix comes back from disk (counted as disk hits), and since
// the model's outputs depend on every K/V byte, the output matches the
// cold run. With a host tier the blocks are prefetched into host memory
// at Submit; without one admission reads them from disk.
func TestDiskTierAcrossRestart(t *testing.T) {
	for _, host := range []int64{0, 1 << 20} {
		dir := t.TempDir()
		p := prompt(21, 41) // 10 whole blocks looked up
		var cold Result
		for restart := range 2 {
			d, err := disktier.New(disktier.Config{Dir: dir, CapacityBytes: 1 << 24, Model: disktier.ModelFingerprint{7}})
			if err != nil {
				t.Fatal(err)
			}
			d.WaitScan()
			e, err := New(Config{Model: newHashModel(testVocab, 512), EOS: -1, NumBlocks: 24, BlockSize: 4,
				MaxRunning: 8, MaxBatchTokens: 64, PrefillChunk: 16, HostTierBytes: host, DiskTier: d})
			if err != nil {
				t.Fatal(err)
			}
			res := run(t, e, Request{Prompt: p, MaxTokens: 3, IgnoreEOS: true})
			st := e.Stats()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := e.Close(ctx); err != nil {
				t.Fatal(err)
			}
			cancel()
			switch restart {
			case 0:
				cold = res
				if res.Usage.CachedTokens != 0 {
					t.Fatalf("host %d: the cold run hit %d tokens", host, res.Usage.CachedTokens)
				}
				if s := d.Stats(); s.Blocks < 10 || s.Writes < 10 {
					t.Fatalf("host %d: after a clean stop the disk holds %+v", host, s)
				}
			case 1:
				if res.Usage.CachedTokens != 40 || st.CacheHitDisk+st.CacheHitHost != 40 || st.Disk.Hits == 0 {
					t.Fatalf("host %d: after the restart %d cached tokens, %d from disk, %d from host (prefetched), disk %+v",
						host, res.Usage.CachedTokens, st.CacheHitDisk, st.CacheHitHost, st.Disk)
				}
				if !slices.Equal(res.Tokens, cold.Tokens) {
					t.Fatalf("host %d: from disk %v, cold %v", host, res.Tokens, cold.Tokens)
				}
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestDiskStatsAreLive: Stats reports the disk tier as it is now, not as
// of the scheduler's last iteration: an idle engine's scan or writer may
// change it (a restarted server waiting for its scan saw "scanning" for
// ever).
func TestDiskStatsAreLive(t *testing.T) {
	d, err := disktier.New(disktier.Config{Dir: t.TempDir(), CapacityBytes: 1 << 24, Model: disktier.ModelFingerprint{7}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	e := newTestEngine(t, newHashModel(testVocab, 512), func(c *Config) { c.DiskTier = d })
	d.WaitScan()
	toks := []int32{1, 2, 3, 4}
	fp := kvcache.Chain(kvcache.Fingerprint{}, 0, toks)
	if err := d.Save("", fp, toks, eviction.StoredBlock{Data: make([]byte, e.KVBlockBytes()), LastUsed: time.Now().UnixNano()}); err != nil {
		t.Fatal(err)
	}
	if s := e.Stats().Disk; s.Blocks != 1 || s.Scanning {
		t.Fatalf("an idle engine's disk stats: %+v", s)
	}
}
