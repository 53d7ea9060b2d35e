package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/radix"
)

// The admin methods run on the scheduler goroutine between iterations, so
// they see and change a consistent cache. Each returns ErrClosed once the
// engine has stopped.

// Config returns the engine's configuration with its defaults filled in
// (NumBlocks included, when the pool was sized by KVBytes).
func (e *Engine) Config() Config { return e.cfg }

// KVBlockBytes returns the bytes one block's K/V takes across all layers,
// or 0 for a model that keeps none.
func (e *Engine) KVBlockBytes() int {
	if st := e.pool.Storage(); st != nil {
		return st.BlockBytes()
	}
	return 0
}

// Flush removes every unpinned cached prefix of namespace, or of every
// namespace if all is set, dropping operator pins there first; prefixes
// that running requests use stay. It returns the number of blocks removed.
func (e *Engine) Flush(namespace string, all bool) (blocks int, err error) {
	err = e.do(func() { blocks = e.cache.Flush(namespace, all) })
	return blocks, err
}

// Pin keeps the cached prefix tokens of namespace (whole blocks) through
// TTL expiry and memory pressure until Unpin or a flush. Errors wrap
// kvcache.ErrNotCached or kvcache.ErrPinBudget.
func (e *Engine) Pin(namespace string, tokens []int32) (info kvcache.PinInfo, err error) {
	if e.cfg.DisablePrefixCache {
		return info, fmt.Errorf("%w: the prefix cache is off", kvcache.ErrNotCached)
	}
	if derr := e.do(func() { info, err = e.cache.Pin(namespace, tokens) }); derr != nil {
		return info, derr
	}
	return info, err
}

// Unpin removes the operator pin of exactly this prefix and reports
// whether there was one.
func (e *Engine) Unpin(namespace string, tokens []int32) (found bool, err error) {
	err = e.do(func() { found = e.cache.Unpin(namespace, tokens) })
	return found, err
}

// SetTTLs changes the default and maximum cache TTL for requests from now
// on. Errors wrap kvcache.ErrBadTTL.
func (e *Engine) SetTTLs(def, maxTTL time.Duration) (err error) {
	if derr := e.do(func() {
		if err = e.cache.SetTTLs(def, maxTTL); err == nil {
			e.maxTTL.Store(int64(maxTTL))
		}
	}); derr != nil {
		return derr
	}
	return err
}

// Prefixes returns up to limit cached prefixes, the most used first.
func (e *Engine) Prefixes(limit int) (out []kvcache.Prefix, err error) {
	err = e.do(func() { out = e.cache.TopPrefixes(limit) })
	return out, err
}

// Check runs the invariant checkers of the block pool, the prefix tree
// and the eviction manager (which checks the other two), and every
// sequence's block table (which holds its computed positions and no more:
// a speculative step's rejected drafts were rolled back); then it recounts every block's references from
// the sequences' tables (+1 when cached) and every tree node's pins from
// the sequences' handles plus operator pins. It is O(pool + tree +
// sequences' blocks).
func (e *Engine) Check() (err error) {
	if derr := e.do(func() { err = e.check() }); derr != nil {
		return derr
	}
	return err
}

// check is Check on the scheduler goroutine.
func (e *Engine) check() error {
	errs := []error{e.cache.Check()}
	var tables []*blockstore.Table
	var handles []radix.Handle
	for _, list := range [][]*seq{e.sched.running, e.sched.waiting} {
		for _, s := range list {
			if s.table != nil {
				tables = append(tables, s.table)
				errs = append(errs, s.table.Check())
				if s.table.Len() != s.computed {
					// Between steps a table holds the computed positions
					// only: rejected drafts were rolled back.
					errs = append(errs, fmt.Errorf("a sequence's table has %d slots for %d computed positions", s.table.Len(), s.computed))
				}
			}
			if s.pin.Node() != nil {
				handles = append(handles, s.pin)
			}
		}
	}
	if err := e.pool.CheckRefs(tables); err != nil {
		errs = append(errs, fmt.Errorf("block references: %w", err))
	}
	if err := e.cache.CheckPins(handles); err != nil {
		errs = append(errs, fmt.Errorf("tree pins: %w", err))
	}
	return errors.Join(errs...)
}
