package radix

import (
	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kvcache"
)

// Meta is a node's bookkeeping for the eviction policy. The radix tree
// never reads a clock and never interprets these fields: their owner (the
// eviction package) sets them, times in nanoseconds of a clock it injects.
// A split copies them, except Queued, to the new upper node.
type Meta struct {
	Created    int64 // when the node's blocks entered the cache
	LastAccess int64 // last request that used the node
	Deadline   int64 // TTL deadline: the latest use time + TTL
	// Priority is the highest priority of a use whose TTL runs until
	// PriorityUntil; LastPriority is the latest use's, which rules after.
	Priority      int32
	LastPriority  int32
	PriorityUntil int64
	Hits          uint64 // requests that used it
	Queued        bool   // the owner has the node in its expiry queue
}

// Node is a node of the tree: an edge of whole blocks of tokens and the
// blocks that hold their K/V. Every namespace has a root node with no
// tokens. Nodes are owned by the Tree; callers may keep pointers to them
// (a removed node reports Removed and keeps its parent, namespace, tokens
// and blocks) but must change nothing except Meta. Like the Tree, a Node
// is not safe for concurrent use.
type Node struct {
	parent   *Node // nil for a namespace root
	sp       *space
	tokens   []int32 // the edge label, len = len(blocks) * block size
	blocks   []blockstore.BlockID
	fps      []kvcache.Fingerprint // blocks[i]'s fingerprint, chained from the root
	children []*Node               // sorted by their first block of tokens
	firsts   []int32               // children[i].tokens[0], for a cache-friendly search
	pins     int32                 // live handles whose matched path contains this node
	depth    int                   // tokens from the root to the end of this edge
	removed  bool
	listed   bool // on its namespace's leaf list

	prevLeaf, nextLeaf *Node

	// Meta is last: the fields a lookup reads share the first cache lines.
	Meta Meta
}

// Parent returns the node above n; a namespace root's is nil. A removed
// node keeps the parent it had when it was removed.
func (n *Node) Parent() *Node { return n.parent }

// IsRoot reports whether n is a namespace root (no tokens, no blocks).
func (n *Node) IsRoot() bool { return n.parent == nil }

// Namespace returns the namespace n belongs to.
func (n *Node) Namespace() string { return n.sp.name }

// Tokens returns the tokens of n's edge. Callers must not modify them.
func (n *Node) Tokens() []int32 { return n.tokens }

// Blocks returns the blocks of n's edge. Callers must not modify them.
func (n *Node) Blocks() []blockstore.BlockID { return n.blocks }

// Fingerprints returns the fingerprints of n's blocks (see
// kvcache.Fingerprint), computed once when each block entered the tree.
// Callers must not modify them.
func (n *Node) Fingerprints() []kvcache.Fingerprint { return n.fps }

// lastFingerprint returns the fingerprint a chain hung under n follows:
// that of n's last block, or the zero Fingerprint under a root.
func (n *Node) lastFingerprint() kvcache.Fingerprint {
	if n.parent == nil {
		return kvcache.Fingerprint{}
	}
	return n.fps[len(n.fps)-1]
}

// IsLeaf reports whether n is a non-root node without children.
func (n *Node) IsLeaf() bool { return n.parent != nil && len(n.children) == 0 }

// Pins returns the number of live handles whose matched path contains n.
// A pinned node is never removed; a node's pins are at least the sum of
// its children's.
func (n *Node) Pins() int { return int(n.pins) }

// Removed reports whether n has been removed from the tree.
func (n *Node) Removed() bool { return n.removed }

// Depth returns the number of tokens from the root to the end of n's edge.
func (n *Node) Depth() int { return n.depth }

// Path appends every token from the root to the end of n's edge to dst.
func (n *Node) Path(dst []int32) []int32 {
	if n.parent != nil {
		dst = n.parent.Path(dst)
	}
	return append(dst, n.tokens...)
}

// Handle pins the path of a Match (or Extend) until Tree.Release: every
// node on it counts the handle in its pins and cannot be removed. Handle
// is a small value; copies are the same pin, to be released once. The zero
// Handle pins nothing.
type Handle struct {
	node *Node
}

// Node returns the deepest node the handle pins, or nil.
func (h Handle) Node() *Node { return h.node }

// Tokens returns the number of tokens the handle pins.
func (h Handle) Tokens() int {
	if h.node == nil {
		return 0
	}
	return h.node.depth
}

// Blocks returns the number of blocks the handle pins.
func (h Handle) Blocks() int {
	if h.node == nil {
		return 0
	}
	return h.node.depth / h.node.sp.bs
}
