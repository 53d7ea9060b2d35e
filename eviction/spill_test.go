package eviction_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/prefixd/prefixd/disktier"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/kvcache"
)

// TestHostTierSpillsToNext fills a small host tier whose Next is a disk
// tier: every block the host tier drops for capacity or refuses is
// written to disk, and reads back whole from there; none is lost.
func TestHostTierSpillsToNext(t *testing.T) {
	d, err := disktier.New(disktier.Config{Dir: t.TempDir(), CapacityBytes: 1 << 30, Model: disktier.ModelFingerprint{3}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const blockBytes = 256
	h, err := eviction.NewHostTier(eviction.HostTierConfig{CapacityBytes: 8 * (blockBytes + 16), BlockBytes: blockBytes, Next: d})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	now := time.Now().UnixNano()
	block := func(i int) ([]int32, kvcache.Fingerprint, []byte) {
		toks := []int32{int32(i), 1, 2, 3}
		return toks, kvcache.Chain(kvcache.Fingerprint{}, 0, toks), bytes.Repeat([]byte{byte(i)}, blockBytes)
	}
	for i := range 64 {
		toks, fp, data := block(i)
		h.Put("", fp, toks, eviction.StoredBlock{Data: data, Expires: now + int64(time.Hour), LastUsed: now}, time.Hour)
		h.Wait()
	}
	d.Wait()
	if h.Dropped() == 0 || d.Stats().Writes == 0 {
		t.Fatalf("the host tier dropped %d blocks, the disk tier wrote %d", h.Dropped(), d.Stats().Writes)
	}
	for i := range 64 {
		toks, fp, data := block(i)
		if h.Has("", fp, toks, now) {
			continue
		}
		b, ok := d.Get("", fp, toks, now)
		if !ok || !bytes.Equal(b.Data, data) {
			t.Fatalf("block %d is in neither tier (%v)", i, ok)
		}
	}
}
