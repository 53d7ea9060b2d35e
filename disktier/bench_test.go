package disktier

import (
	"testing"
	"time"

	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/kvcache"
)

// BenchmarkGet reads records of one block of a 110M-parameter model
// (12 layers x K and V x 768 x 16 positions x 2 bytes = 589,824 bytes)
// back, checked in full: the disk tier's read throughput (from the page
// cache, the records having just been written).
func BenchmarkGet(b *testing.B) {
	const blocks, blockBytes = 64, 12 * 2 * 768 * 16 * 2
	d, err := New(Config{Dir: b.TempDir(), CapacityBytes: 1 << 30, Model: ModelFingerprint{1}})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	now := time.Now().UnixNano()
	data := make([]byte, blockBytes)
	toks := make([][]int32, blocks)
	fps := make([]kvcache.Fingerprint, blocks)
	for i := range blocks {
		toks[i] = []int32{int32(i), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
		fps[i] = kvcache.Chain(kvcache.Fingerprint{}, 0, toks[i])
		data[0] = byte(i)
		if err := d.Save("", fps[i], toks[i], eviction.StoredBlock{Data: data, LastUsed: now}); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(blockBytes)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok := d.Get("", fps[i%blocks], toks[i%blocks], now); !ok {
			b.Fatal("miss")
		}
	}
}
