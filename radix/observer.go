package radix

import (
	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kvcache"
)

// Observer is told of every change of the set of blocks a Tree holds, in
// the order the changes happen, so that it can mirror the tree (an event
// publisher for KV-aware routers does). Splits change no block and are not
// reported. Calls come from the goroutine that owns the tree, while it is
// being changed: an Observer must not call back into the tree and must not
// retain the slices it is given.
type Observer interface {
	// Stored reports that blocks, holding tokens (len(blocks) * block size
	// of them), with fingerprints fps, entered namespace ns as one chain:
	// blocks[0] follows the block whose fingerprint is parent (the zero
	// Fingerprint when it starts the namespace) and each later block
	// follows the one before it.
	Stored(ns string, parent kvcache.Fingerprint, tokens []int32, blocks []blockstore.BlockID, fps []kvcache.Fingerprint)
	// Removed reports that blocks, with fingerprints fps, left namespace
	// ns. A node's blocks are reported after those of the nodes below it.
	Removed(ns string, blocks []blockstore.BlockID, fps []kvcache.Fingerprint)
}

// SetObserver makes o the tree's observer; nil turns observing off, which
// then costs one comparison per change.
func (t *Tree) SetObserver(o Observer) { t.obs = o }
