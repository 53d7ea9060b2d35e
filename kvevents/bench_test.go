package kvevents_test

import (
	"testing"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kvevents"
	"github.com/prefixd/prefixd/radix"
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
	col.Stored("", radix.NoParent, tokens, root)
	blocks := make([]blockstore.BlockID, 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		blocks[0] = blockstore.BlockID(1 + i%1024)
		tokens[0] = int32(i)
		col.Stored("", 0, tokens, blocks)
		col.Removed("", blocks)
		col.EndStep()
	}
}
