package eviction

import (
	"fmt"
	"math"
	"time"

	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/radix"
)

// expiryEntry is a node's place in the expiry heap, keyed by the deadline
// the node had when it was queued. A node's deadline only moves later, so
// an entry popped with an older deadline than its node's is simply queued
// again: each node has at most one entry, and each expiry costs O(log n).
type expiryEntry struct {
	deadline int64
	node     *radix.Node
}

// NextDeadline returns the earliest moment Sweep may have work, for a
// scheduler that sleeps while idle.
func (m *Manager) NextDeadline() (time.Time, bool) {
	if m.expiry.Len() == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, m.expiry.Peek().deadline), true
}

// Sweep removes every expired, unpinned leaf, cascading to parents that
// become expired unpinned leaves, and returns the number of blocks that
// left the cache. Expired nodes that are pinned or still have children stay
// until they are released or become leaves (see Release).
func (m *Manager) Sweep() int {
	now := m.now()
	removed := 0
	for m.expiry.Len() > 0 && m.expiry.Peek().deadline <= now {
		e := m.expiry.Pop()
		n := e.node
		if n.Removed() {
			continue
		}
		if n.Meta.Deadline > e.deadline { // refreshed since it was queued
			m.expiry.Push(expiryEntry{deadline: n.Meta.Deadline, node: n})
			continue
		}
		n.Meta.Queued = false
		removed += m.expireUpward(n, now)
	}
	return removed
}

// expireUpward removes n and then each ancestor while it is an expired,
// unpinned leaf, and returns the number of blocks removed. A node where the
// cascade stops that is a leaf but not queued yet (one split off above a
// queued node) is queued, so its own deadline removes it.
func (m *Manager) expireUpward(n *radix.Node, now int64) int {
	removed := 0
	for n != nil && !n.IsRoot() && n.IsLeaf() && n.Pins() == 0 && n.Meta.Deadline <= now {
		parent := n.Parent()
		removed += m.remove(n, kvcache.ReasonTTL, now, false)
		n = parent
	}
	if n != nil && !n.IsRoot() && !n.Removed() && n.IsLeaf() && !n.Meta.Queued && n.Meta.Deadline > now {
		n.Meta.Queued = true
		m.expiry.Push(expiryEntry{deadline: n.Meta.Deadline, node: n})
	}
	return removed
}

// remove takes leaf n out of the tree, demotes its blocks to the first
// lower tier if asked (and there is one), drops the tree's references and counts the
// blocks under reason.
func (m *Manager) remove(n *radix.Node, reason kvcache.Reason, now int64, demote bool) int {
	if demote && len(m.tiers) > 0 && n.Meta.Deadline > now {
		m.demote(n, now)
	}
	life := time.Duration(now - n.Meta.Created)
	var err error
	m.blockBuf, err = m.tree.RemoveLeaf(n, m.blockBuf[:0])
	if err != nil {
		panic(fmt.Sprintf("eviction: removing a checked leaf: %v", err))
	}
	for _, id := range m.blockBuf {
		m.pool.ReleaseCache(id)
	}
	k := len(m.blockBuf)
	m.evicted[reason].Add(uint64(k))
	if m.samp.BlockLifetime != nil {
		m.samp.BlockLifetime(life, k)
	}
	return k
}

// demote copies n's blocks into the first lower tier, keyed by the
// fingerprints the tree computed when they were inserted, to live there
// for the rest of n's TTL.
func (m *Manager) demote(n *radix.Node, now int64) {
	st := m.pool.Storage()
	if cap(m.dataBuf) < st.BlockBytes() {
		m.dataBuf = make([]byte, st.BlockBytes())
	}
	data := m.dataBuf[:st.BlockBytes()]
	ttl := time.Duration(n.Meta.Deadline - now)
	parent := lastFingerprint(n.Parent())
	toks := n.Tokens()
	for i, id := range n.Blocks() {
		fp := n.Fingerprints()[i]
		if err := st.ReadBlock(id, data); err != nil {
			return // a block we cannot read is simply not demoted
		}
		b := StoredBlock{Data: data, Expires: n.Meta.Deadline, LastUsed: n.Meta.LastAccess, Parent: parent}
		if m.tiers[0].Put(n.Namespace(), fp, toks[i*m.bsize:(i+1)*m.bsize], b, ttl) {
			m.demoted.Add(1)
		}
		parent = fp
	}
}

// Reclaim evicts until the pool has at least need free blocks: unpinned
// leaves whose blocks no sequence holds, lowest priority first, then least
// recently used, each demoted to the first lower tier when there is one.
// With a NamespaceShare, the namespaces beyond their share give up their
// blocks first, down to their share. It returns ErrNothingEvictable if it
// ran out of candidates first; what it evicted stays evicted.
func (m *Manager) Reclaim(need int) error {
	if m.pool.NumFree() >= need {
		return nil
	}
	now := m.now()
	if m.nsShare > 0 {
		m.evictVictims(need, now, m.overShare)
	}
	m.evictVictims(need, now, func(string) bool { return true })
	if m.pool.NumFree() < need {
		return fmt.Errorf("%w: %d free of %d needed", ErrNothingEvictable, m.pool.NumFree(), need)
	}
	return nil
}

// overShare reports whether namespace ns holds more blocks in the tree
// than its share.
func (m *Manager) overShare(ns string) bool { return m.tree.Stats(ns).Blocks > m.nsShare }

// evictVictims evicts the evictable leaves of the namespaces from selects,
// in victim order, until need blocks are free or none is left; a
// namespace stops giving up blocks once from no longer selects it.
func (m *Manager) evictVictims(need int, now int64, from func(ns string) bool) {
	m.victimsAt = now
	m.victims.Reset()
	top := int32(math.MinInt32)
	m.tree.Leaves(func(n *radix.Node) bool {
		if m.evictable(n) && from(n.Namespace()) {
			m.victims.Push(n)
			top = max(top, priority(n, now))
		}
		return true
	})
	for m.pool.NumFree() < need && m.victims.Len() > 0 {
		n := m.victims.Pop()
		if !from(n.Namespace()) {
			continue
		}
		reason := kvcache.ReasonLRU
		if priority(n, now) < top {
			reason = kvcache.ReasonPriority
		}
		parent := n.Parent()
		m.remove(n, reason, now, true)
		if m.evictable(parent) {
			m.victims.Push(parent)
		}
	}
	m.victims.Reset()
}

// evictable reports whether removing n would free its blocks: an unpinned
// leaf whose first block (and so every block: tables hold prefixes) only
// the tree holds.
func (m *Manager) evictable(n *radix.Node) bool {
	return n != nil && !n.IsRoot() && n.IsLeaf() && n.Pins() == 0 && m.pool.RefCount(n.Blocks()[0]) == 1
}

// Flush removes every unpinned node of namespace ns, or of every namespace
// if all is set, with the lower tiers' entries. Operator pins there are
// dropped first; nodes pinned by running requests stay. It returns the
// number of blocks removed.
func (m *Manager) Flush(ns string, all bool) int {
	for key, p := range m.pins {
		if all || p.ns == ns {
			// Not dropPin: what expired under the pin is flushed below and
			// counted as flushed, not as expired.
			m.unpin(key, p)
		}
	}
	now := m.now()
	var leaves []*radix.Node
	m.tree.Leaves(func(n *radix.Node) bool {
		if all || n.Namespace() == ns {
			leaves = append(leaves, n)
		}
		return true
	})
	removed := 0
	for _, n := range leaves {
		for n != nil && !n.IsRoot() && !n.Removed() && n.IsLeaf() && n.Pins() == 0 {
			parent := n.Parent()
			removed += m.remove(n, kvcache.ReasonFlush, now, false)
			n = parent
		}
	}
	for _, t := range m.tiers {
		t.Wait() // Puts still in flight are flushed too
		if all {
			t.Clear()
		} else {
			t.FlushNamespace(ns)
		}
	}
	if all && m.obs != nil && m.tree.Total().Blocks == 0 {
		m.obs.Cleared()
	}
	return removed
}
