package eviction

import (
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/radix"
)

// SaveFunc stores one block for good (a disk tier's synchronous write).
// It must not retain tokens or b.Data.
type SaveFunc func(ns string, fp kvcache.Fingerprint, tokens []int32, b StoredBlock) error

// SaveAll hands every block the device tree holds, and then every block
// in the host tier, to save, for a clean stop that keeps what the cache
// holds across a restart. A block save fails to store is skipped; SaveAll
// returns the number saved and the first error. It reads the blocks
// through the pool's Storage (a no-op without one) and must run on the
// Manager's goroutine, or after it has stopped.
func (m *Manager) SaveAll(save SaveFunc) (saved int, first error) {
	st := m.pool.Storage()
	if st == nil {
		return 0, nil
	}
	note := func(err error) {
		if err == nil {
			saved++
		} else if first == nil {
			first = err
		}
	}
	if cap(m.dataBuf) < st.BlockBytes() {
		m.dataBuf = make([]byte, st.BlockBytes())
	}
	data := m.dataBuf[:st.BlockBytes()]
	m.tree.Walk(func(n *radix.Node) bool {
		parent := lastFingerprint(n.Parent())
		toks := n.Tokens()
		for i, id := range n.Blocks() {
			fp := n.Fingerprints()[i]
			if err := st.ReadBlock(id, data); err != nil {
				note(err)
				continue
			}
			note(save(n.Namespace(), fp, toks[i*m.bsize:(i+1)*m.bsize],
				StoredBlock{Data: data, Expires: n.Meta.Deadline, LastUsed: n.Meta.LastAccess, Parent: parent}))
			parent = fp
		}
		return true
	})
	for _, t := range m.tiers {
		if h, ok := t.(*HostTier); ok {
			h.Wait()
			h.each(func(e *hostEntry) { note(save(e.ns, e.fp, e.tokens, e.StoredBlock)) })
		}
	}
	return saved, first
}

// each calls fn for every entry of the tier.
func (h *HostTier) each(fn func(*hostEntry)) {
	h.cache.IterValues(func(e *hostEntry) bool {
		fn(e)
		return false
	})
}
