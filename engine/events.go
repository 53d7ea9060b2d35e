package engine

import (
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/radix"
)

// CacheEvents is told of every change of what the KV cache holds: blocks
// entering and leaving the device tree (as its radix.Observer), the host
// tier's entries and full flushes (as the eviction.Observer), and the end
// of each scheduler iteration, after which it may publish what it
// gathered. Every call but the host tier's removals comes from the
// scheduler goroutine; none may block (a publisher hands batches to its
// own goroutine).
type CacheEvents interface {
	radix.Observer
	eviction.Observer
	// EndStep is called after every scheduler iteration.
	EndStep()
}

// endStep ends the iteration for the cache's event observer, if any.
func (e *Engine) endStep() {
	if e.cfg.CacheEvents != nil {
		e.cfg.CacheEvents.EndStep()
	}
}
