package eviction

import (
	"cmp"
	"slices"
	"time"

	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/radix"
)

// TopPrefixes returns up to limit cached prefixes with the most hits, the
// longest first among equals. It walks the whole tree (O(nodes log nodes)):
// an admin query, not a hot path.
func (m *Manager) TopPrefixes(limit int) []kvcache.Prefix {
	if limit <= 0 {
		return nil
	}
	var nodes []*radix.Node
	m.tree.Walk(func(n *radix.Node) bool {
		nodes = append(nodes, n)
		return true
	})
	slices.SortFunc(nodes, func(a, b *radix.Node) int {
		if c := cmp.Compare(b.Meta.Hits, a.Meta.Hits); c != 0 {
			return c
		}
		return cmp.Compare(b.Depth(), a.Depth())
	})
	nodes = nodes[:min(limit, len(nodes))]
	now := m.now()
	out := make([]kvcache.Prefix, len(nodes))
	for i, n := range nodes {
		first := n.Blocks()[0]
		out[i] = kvcache.Prefix{
			Namespace: n.Namespace(),
			Tokens:    n.Path(nil),
			Hits:      n.Meta.Hits,
			LastUsed:  time.Unix(0, n.Meta.LastAccess),
			TTLLeft:   time.Duration(max(0, n.Meta.Deadline-now)),
			Pinned:    m.pinned[first] > 0,
			InUse:     m.pool.RefCount(first) > 1,
		}
	}
	return out
}
