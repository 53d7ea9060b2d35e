// Package radix indexes cached KV blocks by the token IDs they hold: a
// compressed radix tree per namespace whose edges are runs of whole blocks
// of tokens, each edge carrying the physical blocks of those tokens. A
// prompt's longest cached prefix is one walk from the root.
//
// Edges split only at block boundaries, so the children of a node differ in
// their first block of tokens (they may share first tokens) and are kept
// sorted by it. Lookups always compare tokens: nothing is decided by hash.
//
// A Tree is not safe for concurrent use: prefixd's engine owns it from its
// scheduler goroutine.
package radix

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"prefixd/blockstore"
)

// Errors returned by RemoveLeaf.
var (
	ErrPinned  = errors.New("radix: node is pinned")
	ErrNotLeaf = errors.New("radix: node is not a removable leaf")
)

// Stats counts what a namespace (or the whole tree) caches.
type Stats struct {
	Nodes  int // non-root nodes
	Blocks int
	Tokens int
}

// Tree is the prefix index. See the package documentation.
type Tree struct {
	bs    int
	roots map[string]*Node
	stats map[string]*Stats
	total Stats
	leaf  Node // sentinel of the circular list of leaves
}

// New returns an empty tree over blocks of blockSize tokens.
func New(blockSize int) (*Tree, error) {
	if blockSize <= 0 {
		return nil, fmt.Errorf("radix: block size must be positive, got %d", blockSize)
	}
	t := &Tree{bs: blockSize, roots: map[string]*Node{}, stats: map[string]*Stats{}}
	t.leaf.prevLeaf, t.leaf.nextLeaf = &t.leaf, &t.leaf
	return t, nil
}

// BlockSize returns the number of tokens per block.
func (t *Tree) BlockSize() int { return t.bs }

// Stats returns the counts of namespace ns.
func (t *Tree) Stats(ns string) Stats {
	if s := t.stats[ns]; s != nil {
		return *s
	}
	return Stats{}
}

// Total returns the counts over every namespace.
func (t *Tree) Total() Stats { return t.total }

// Namespaces returns the namespaces that hold at least one block.
func (t *Tree) Namespaces() []string {
	out := make([]string, 0, len(t.roots))
	for ns := range t.roots {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

// asBytes views tokens as bytes so comparisons run through the runtime's
// vectorised memequal.
func asBytes(s []int32) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s))
}

// compareBlock orders two blocks of tokens lexicographically.
func compareBlock(a, b []int32) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// child returns n's child whose first block is blk, and where it is or
// would be in n.children.
func (n *Node) child(blk []int32) (*Node, int) {
	first := blk[0]
	lo, hi := 0, len(n.firsts)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if n.firsts[mid] < first {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	for i := lo; i < len(n.firsts) && n.firsts[i] == first; i++ {
		edge := n.children[i].tokens[:len(blk)]
		if bytes.Equal(asBytes(edge), asBytes(blk)) {
			return n.children[i], i
		}
		if compareBlock(edge, blk) > 0 {
			return nil, i
		}
		lo = i + 1
	}
	return nil, lo
}

// commonBlocks returns how many whole blocks edge and toks share, given
// that their first block is known to match.
func (t *Tree) commonBlocks(edge, toks []int32) int {
	n := min(len(edge), len(toks)/t.bs*t.bs)
	if bytes.Equal(asBytes(edge[t.bs:n]), asBytes(toks[t.bs:n])) {
		return n / t.bs
	}
	k := 1
	for (k+1)*t.bs <= n && bytes.Equal(asBytes(edge[k*t.bs:(k+1)*t.bs]), asBytes(toks[k*t.bs:(k+1)*t.bs])) {
		k++
	}
	return k
}

// Match finds the longest prefix of tokens cached in namespace ns, in whole
// blocks, appends its blocks to dst and returns it with a Handle that pins
// the path until Release. A match that ends inside an edge splits it
// there, so the handle pins exactly the matched blocks.
func (t *Tree) Match(ns string, tokens []int32, dst []blockstore.BlockID) ([]blockstore.BlockID, Handle) {
	n := t.roots[ns]
	if n == nil {
		return dst, Handle{}
	}
	pos := 0
	for len(tokens)-pos >= t.bs {
		c, _ := n.child(tokens[pos : pos+t.bs])
		if c == nil {
			break
		}
		k := t.commonBlocks(c.tokens, tokens[pos:])
		if k < len(c.blocks) {
			c = t.split(c, k)
		}
		dst = append(dst, c.blocks...)
		pos += len(c.tokens)
		n = c
	}
	if n.root {
		return dst, Handle{}
	}
	n.pins++
	return dst, Handle{node: n}
}

// Release unpins a Match's path. Releasing the zero Handle does nothing.
func (t *Tree) Release(h Handle) {
	if n := h.node; n != nil {
		if n.pins--; n.pins < 0 {
			panic("radix: Release of a handle that was already released")
		}
	}
}

// split cuts c after its first k blocks and returns the new upper node,
// which takes c's place under its parent. Meta is copied; pins stay with c,
// the deeper node, which keeps every handle to c pinning the same path.
func (t *Tree) split(c *Node, k int) *Node {
	cut := k * t.bs
	up := &Node{
		Meta:     c.Meta,
		parent:   c.parent,
		ns:       c.ns,
		tokens:   c.tokens[:cut:cut],
		blocks:   c.blocks[:k:k],
		children: []*Node{c},
		firsts:   []int32{c.tokens[cut]},
		depth:    c.depth - len(c.tokens) + cut,
	}
	_, i := c.parent.child(c.tokens[:t.bs])
	c.parent.children[i] = up
	c.parent = up
	c.tokens = c.tokens[cut:]
	c.blocks = c.blocks[k:]
	t.stats[c.ns].Nodes++
	t.total.Nodes++
	return up
}

// Insert adds the whole blocks of tokens (len(tokens) == len(blocks) *
// block size) to namespace ns. The tree already holds a leading run of
// them, existing blocks long, and keeps its own blocks there (which may
// differ from the caller's); it takes blocks[existing:] from the caller.
func (t *Tree) Insert(ns string, tokens []int32, blocks []blockstore.BlockID) (existing int, err error) {
	existing, h, err := t.Extend(ns, Handle{}, tokens, blocks)
	t.Release(h)
	return existing, err
}

// Extend is Insert for a caller that holds a Handle h on a prefix of
// tokens: the walk starts at h's node instead of the root, so a sequence
// that offers its blocks as they fill pays for the new blocks only. It
// releases h and returns a Handle pinning all of tokens.
// REQUIRES: tokens[:h.Tokens()] is the path h pins, in namespace ns.
func (t *Tree) Extend(ns string, h Handle, tokens []int32, blocks []blockstore.BlockID) (existing int, nh Handle, err error) {
	if len(tokens) != len(blocks)*t.bs {
		return 0, h, fmt.Errorf("radix: Insert of %d tokens with %d blocks of %d", len(tokens), len(blocks), t.bs)
	}
	if h.Tokens() > len(tokens) {
		return 0, h, fmt.Errorf("radix: Extend of a %d-token handle to %d tokens", h.Tokens(), len(tokens))
	}
	n := h.node
	if n == nil {
		if len(blocks) == 0 {
			return 0, h, nil
		}
		if n = t.roots[ns]; n == nil {
			n = &Node{ns: ns, root: true}
			t.roots[ns] = n
			t.stats[ns] = &Stats{}
		}
	}
	bi := h.Tokens() / t.bs
	if n == h.node && n.IsLeaf() && n.pins == 1 && bi < len(blocks) {
		// Only the caller's handle ends at this leaf: grow its edge in place
		// rather than hang a one-block node under it for every block a
		// running sequence fills.
		t.growLeaf(n, tokens[bi*t.bs:], blocks[bi:])
		return bi, h, nil
	}
	for bi < len(blocks) {
		rest := tokens[bi*t.bs:]
		c, at := n.child(rest[:t.bs])
		if c == nil {
			n = t.addLeaf(n, at, rest, blocks[bi:])
			break
		}
		k := t.commonBlocks(c.tokens, rest)
		if k < len(c.blocks) {
			c = t.split(c, k)
		}
		bi += k
		n = c
	}
	t.Release(h)
	if n.root {
		return bi, Handle{}, nil
	}
	n.pins++
	return bi, Handle{node: n}, nil
}

// growLeaf appends tokens and blocks to leaf n's edge.
func (t *Tree) growLeaf(n *Node, tokens []int32, blocks []blockstore.BlockID) {
	n.tokens = append(n.tokens, tokens...)
	n.blocks = append(n.blocks, blocks...)
	n.depth += len(tokens)
	s := t.stats[n.ns]
	s.Blocks += len(blocks)
	s.Tokens += len(tokens)
	t.total.Blocks += len(blocks)
	t.total.Tokens += len(tokens)
}

// addLeaf puts a new leaf holding copies of tokens and blocks under n, at
// index at of its children, and returns it.
func (t *Tree) addLeaf(n *Node, at int, tokens []int32, blocks []blockstore.BlockID) *Node {
	leaf := &Node{
		parent: n,
		ns:     n.ns,
		tokens: slices.Clone(tokens),
		blocks: slices.Clone(blocks),
		depth:  n.depth + len(tokens),
	}
	n.children = slices.Insert(n.children, at, leaf)
	n.firsts = slices.Insert(n.firsts, at, leaf.tokens[0])
	if !n.root && len(n.children) == 1 {
		t.unlist(n)
	}
	t.list(leaf)
	s := t.stats[n.ns]
	s.Nodes++
	s.Blocks += len(leaf.blocks)
	s.Tokens += len(leaf.tokens)
	t.total.Nodes++
	t.total.Blocks += len(leaf.blocks)
	t.total.Tokens += len(leaf.tokens)
	return leaf
}

// RemoveLeaf removes an unpinned leaf, appends its blocks to dst (the
// caller drops the cache's references to them) and returns dst. Its parent
// may become a leaf. A node emptied of children is not merged with its
// parent: handles may point at it.
func (t *Tree) RemoveLeaf(n *Node, dst []blockstore.BlockID) ([]blockstore.BlockID, error) {
	switch {
	case n.removed || n.root || len(n.children) > 0:
		return dst, ErrNotLeaf
	case n.pins > 0:
		return dst, ErrPinned
	}
	p := n.parent
	_, i := p.child(n.tokens[:t.bs])
	p.children = slices.Delete(p.children, i, i+1)
	p.firsts = slices.Delete(p.firsts, i, i+1)
	t.unlist(n)
	if len(p.children) == 0 {
		if p.root {
			delete(t.roots, p.ns)
			delete(t.stats, p.ns)
		} else {
			t.list(p)
		}
	}
	if s := t.stats[n.ns]; s != nil {
		s.Nodes--
		s.Blocks -= len(n.blocks)
		s.Tokens -= len(n.tokens)
	}
	t.total.Nodes--
	t.total.Blocks -= len(n.blocks)
	t.total.Tokens -= len(n.tokens)
	n.removed = true
	n.children = nil
	return append(dst, n.blocks...), nil
}

func (t *Tree) list(n *Node) {
	n.prevLeaf, n.nextLeaf = t.leaf.prevLeaf, &t.leaf
	t.leaf.prevLeaf.nextLeaf = n
	t.leaf.prevLeaf = n
	n.listed = true
}

func (t *Tree) unlist(n *Node) {
	n.prevLeaf.nextLeaf = n.nextLeaf
	n.nextLeaf.prevLeaf = n.prevLeaf
	n.prevLeaf, n.nextLeaf = nil, nil
	n.listed = false
}

// Leaves calls fn for every leaf, in every namespace, until fn returns
// false. fn must not change the tree.
func (t *Tree) Leaves(fn func(*Node) bool) {
	for n := t.leaf.nextLeaf; n != &t.leaf; n = n.nextLeaf {
		if !fn(n) {
			return
		}
	}
}

// Walk calls fn for every non-root node, parents before children, until fn
// returns false. fn must not change the tree.
func (t *Tree) Walk(fn func(*Node) bool) {
	for _, ns := range t.Namespaces() {
		if !walk(t.roots[ns], fn) {
			return
		}
	}
}

func walk(n *Node, fn func(*Node) bool) bool {
	if !n.root && !fn(n) {
		return false
	}
	for _, c := range n.children {
		if !walk(c, fn) {
			return false
		}
	}
	return true
}
