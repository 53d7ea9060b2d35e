package eviction

import (
	"time"

	"github.com/prefixd/prefixd/radix"
)

// Publish offers to tier t (a tier replicas share) the blocks of the path
// h pins from block index from on, as they are computed rather than when
// they are evicted: another replica can only fetch a prefix while this one
// still holds it. They are offered in chain order, with what is left of
// their TTL. Put must not block (a shared tier queues). h stays the
// caller's. Blocks that cannot be read are skipped.
func (m *Manager) Publish(t Tier, h radix.Handle, from int) {
	st := m.pool.Storage()
	n := h.Node()
	if st == nil || n == nil || h.Blocks() <= from {
		return
	}
	var path []*radix.Node // the nodes holding blocks from `from` on, deepest first
	for ; n != nil && !n.IsRoot(); n = n.Parent() {
		path = append(path, n)
		if n.Depth()-len(n.Tokens()) <= from*m.bsize {
			break
		}
	}
	if cap(m.dataBuf) < st.BlockBytes() {
		m.dataBuf = make([]byte, st.BlockBytes())
	}
	data := m.dataBuf[:st.BlockBytes()]
	now := m.now()
	for i := len(path) - 1; i >= 0; i-- {
		n := path[i]
		first := (n.Depth() - len(n.Tokens())) / m.bsize // n's first block's index on the path
		parent := lastFingerprint(n.Parent())
		fps, toks := n.Fingerprints(), n.Tokens()
		for j, id := range n.Blocks() {
			if first+j >= from {
				if err := st.ReadBlock(id, data); err == nil {
					b := StoredBlock{Data: data, Expires: n.Meta.Deadline, LastUsed: n.Meta.LastAccess, Parent: parent}
					t.Put(n.Namespace(), fps[j], toks[j*m.bsize:(j+1)*m.bsize], b, time.Duration(n.Meta.Deadline-now))
				}
			}
			parent = fps[j]
		}
	}
}
