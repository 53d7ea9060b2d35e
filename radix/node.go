package radix

import "prefixd/blockstore"

// Meta is a node's bookkeeping for the eviction policy. The radix tree
// never reads a clock and never interprets these fields: their owner (the
// eviction package) sets them, in Unix nanoseconds of its own clock. A
// split copies them to the new upper node.
type Meta struct {
	Created    int64  // when the node's blocks entered the cache
	LastAccess int64  // last request that used the node
	Deadline   int64  // TTL deadline: the latest use time + TTL
	Priority   int32  // highest priority of a request that used it
	Hits       uint64 // requests that used it
	Queued     bool   // the owner has the node in its expiry queue
}

// Node is a node of the tree: an edge of whole blocks of tokens and the
// blocks that hold their K/V. Every namespace has a root node with no
// tokens. Nodes are owned by the Tree; callers may keep pointers to them
// (a removed node reports Removed) but must not change them except Meta.
type Node struct {
	Meta Meta

	parent   *Node
	ns       string
	tokens   []int32 // the edge label, len = len(blocks) * block size
	blocks   []blockstore.BlockID
	children []*Node // sorted by their first block of tokens
	firsts   []int32 // children[i].tokens[0], for a cache-friendly search
	pins     int32   // live handles whose match ends at this node
	depth    int     // tokens from the root to the end of this edge
	root     bool
	removed  bool

	prevLeaf, nextLeaf *Node // the tree's list of leaves
	listed             bool
}

// Parent returns the node above n; a namespace root's is nil.
func (n *Node) Parent() *Node { return n.parent }

// IsRoot reports whether n is a namespace root (no tokens, no blocks).
func (n *Node) IsRoot() bool { return n.root }

// Namespace returns the namespace n belongs to.
func (n *Node) Namespace() string { return n.ns }

// Tokens returns the tokens of n's edge. Callers must not modify them.
func (n *Node) Tokens() []int32 { return n.tokens }

// Blocks returns the blocks of n's edge. Callers must not modify them.
func (n *Node) Blocks() []blockstore.BlockID { return n.blocks }

// IsLeaf reports whether n is a non-root node without children.
func (n *Node) IsLeaf() bool { return !n.root && len(n.children) == 0 }

// Pins returns the number of live handles whose match ends at n. A handle
// pins only its deepest node: every node above it has a child, so it is
// not a leaf and cannot be removed either.
func (n *Node) Pins() int { return int(n.pins) }

// Removed reports whether n has been removed from the tree.
func (n *Node) Removed() bool { return n.removed }

// Depth returns the number of tokens from the root to the end of n's edge.
func (n *Node) Depth() int { return n.depth }

// Path appends every token from the root to the end of n's edge to dst.
func (n *Node) Path(dst []int32) []int32 {
	if n.parent != nil && !n.parent.root {
		dst = n.parent.Path(dst)
	}
	return append(dst, n.tokens...)
}

// Handle pins the path of a Match until Tree.Release: its deepest node
// cannot be removed, and so neither can any node above it. The zero Handle
// pins nothing.
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
