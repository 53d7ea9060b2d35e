package kvevents_test

import (
	"testing"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/kvevents"
)

// BenchmarkCollectorBlock measures what the scheduler goroutine pays per
// cached block with events on: a running sequence's block filling (one
// Stored with its parent), its eviction (one Removed) and the step's
// batch handed off. The Emit here drops the batch, so the publisher's
// own goroutine (encoding, sockets) is not counted.
func BenchmarkCollectorBlock(b *testing.B) {
	const bs = 16
	col, err := kvevents.NewCollector(kvevents.CollectorConfig{Model: "m", BlockSize: bs, Emit: func(kvevents.Batch) {}})
	if err != nil {
		b.Fatal(err)
	}
	tokens := make([]int32, bs)
	root := []blockstore.BlockID{0}
	rootFP := chain("", tokens, bs)
	col.Stored("", kvcache.Fingerprint{}, tokens, root, rootFP)
	blocks := make([]blockstore.BlockID, 1)
	fps := make([]kvcache.Fingerprint, 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		blocks[0] = blockstore.BlockID(1 + i%1024)
		tokens[0] = int32(i)
		fps[0] = kvcache.Chain(rootFP[0], 0, tokens)
		col.Stored("", rootFP[0], tokens, blocks, fps)
		col.Removed("", blocks, fps)
		col.EndStep()
	}
}
