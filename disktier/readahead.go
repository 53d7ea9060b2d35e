package disktier

import (
	"slices"
	"sync"

	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/kvcache"
)

// readAhead holds blocks read ahead of their Get, oldest first, within a
// bound. It is safe for concurrent use.
type readAhead struct {
	mu     sync.Mutex
	blocks []aheadBlock
	bytes  int64 // of the blocks' Data
}

type aheadBlock struct {
	ns     string
	fp     kvcache.Fingerprint
	tokens []int32
	b      eviction.StoredBlock
}

func (r *readAhead) has(fp kvcache.Fingerprint) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.blocks, func(a aheadBlock) bool { return a.fp == fp })
}

// put keeps b, dropping the oldest blocks beyond limit bytes.
func (r *readAhead) put(ns string, fp kvcache.Fingerprint, tokens []int32, b eviction.StoredBlock, limit int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blocks = append(r.blocks, aheadBlock{ns, fp, slices.Clone(tokens), b})
	r.bytes += int64(len(b.Data))
	for r.bytes > limit {
		r.bytes -= int64(len(r.blocks[0].b.Data))
		r.blocks = slices.Delete(r.blocks, 0, 1)
	}
}

// take removes and returns the block for exactly ns, fp and tokens.
func (r *readAhead) take(ns string, fp kvcache.Fingerprint, tokens []int32) (eviction.StoredBlock, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.IndexFunc(r.blocks, func(a aheadBlock) bool { return a.fp == fp && a.ns == ns && slices.Equal(a.tokens, tokens) })
	if i < 0 {
		return eviction.StoredBlock{}, false
	}
	b := r.blocks[i].b
	r.blocks = slices.Delete(r.blocks, i, i+1)
	r.bytes -= int64(len(b.Data))
	return b, true
}

// clear drops every block (a flush).
func (r *readAhead) clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blocks, r.bytes = nil, 0
}
