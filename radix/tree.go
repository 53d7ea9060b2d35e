// Package radix indexes cached KV blocks by the token IDs they hold: a
// compressed radix tree per namespace whose edges are runs of whole blocks
// of tokens, each edge carrying the physical blocks of those tokens. A
// prompt's longest cached prefix is one walk from the root.
//
// Edges split only at block boundaries, so the children of a node differ in
// their first block of tokens (they may share first tokens) and are kept
// sorted by it. Lookups always compare tokens: nothing is decided by hash.
//
// Nodes emptied of all but one child are not merged back with it: the
// engine's handles and the eviction package's queues hold node pointers,
// and a merge would have to move them.
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

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kvcache"
)

// Errors callers branch on. Functions wrap them with detail.
var (
	// ErrPinned is returned by RemoveLeaf for a node a live handle pins.
	ErrPinned = errors.New("radix: node is pinned")
	// ErrNotLeaf is returned by RemoveLeaf for a root, an inner node or a
	// node already removed.
	ErrNotLeaf = errors.New("radix: node is not a removable leaf")
	// ErrLength is returned by Insert and Extend when the tokens are not
	// exactly the blocks' worth of whole blocks.
	ErrLength = errors.New("radix: tokens do not fill the blocks exactly")
	// ErrHandle is returned by Extend for a handle of another namespace or
	// one that pins more tokens than it is given.
	ErrHandle = errors.New("radix: handle does not fit the tokens")
)

// Stats counts what a namespace (or the whole tree) caches.
type Stats struct {
	Nodes  int // non-root nodes
	Blocks int // blocks held by the tree (one cache reference each)
	Tokens int // tokens in those blocks: Blocks * block size
}

// space is one namespace: its root, its leaves and its counters.
type space struct {
	name       string
	salt       uint64 // kvcache.NamespaceSalt(name)
	bs         int
	root       Node
	leaves     Node // sentinel of the circular list of leaves
	stats      Stats
	prev, next *space // the tree's namespaces in creation order
}

// Tree is the prefix index over every namespace. It owns its nodes; the
// blocks it holds stand for cache references its caller keeps in the pool.
// A Tree is not safe for concurrent use: one goroutine (the engine's
// scheduler) must own it, and the Nodes and Handles it hands out.
type Tree struct {
	bs     int
	spaces map[string]*space
	order  space // sentinel of the list of namespaces
	total  Stats
	obs    Observer
}

// New returns an empty tree over blocks of blockSize tokens.
func New(blockSize int) (*Tree, error) {
	if blockSize <= 0 {
		return nil, fmt.Errorf("radix: block size must be positive, got %d", blockSize)
	}
	t := &Tree{bs: blockSize, spaces: map[string]*space{}}
	t.order.prev, t.order.next = &t.order, &t.order
	return t, nil
}

// BlockSize returns the number of tokens per block.
func (t *Tree) BlockSize() int { return t.bs }

// Stats returns the counts of namespace ns in O(1).
func (t *Tree) Stats(ns string) Stats {
	if sp := t.spaces[ns]; sp != nil {
		return sp.stats
	}
	return Stats{}
}

// Total returns the counts over every namespace in O(1).
func (t *Tree) Total() Stats { return t.total }

// Namespaces returns, sorted, the namespaces that hold at least one block.
func (t *Tree) Namespaces() []string {
	out := make([]string, 0, len(t.spaces))
	for ns := range t.spaces {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

// space returns namespace ns, creating it if needed.
func (t *Tree) space(ns string) *space {
	if sp := t.spaces[ns]; sp != nil {
		return sp
	}
	sp := &space{name: ns, salt: kvcache.NamespaceSalt(ns), bs: t.bs}
	sp.root.sp = sp
	sp.leaves.prevLeaf, sp.leaves.nextLeaf = &sp.leaves, &sp.leaves
	sp.prev, sp.next = t.order.prev, &t.order
	t.order.prev.next = sp
	t.order.prev = sp
	t.spaces[ns] = sp
	return sp
}

// dropSpace forgets an empty namespace.
func (t *Tree) dropSpace(sp *space) {
	sp.prev.next = sp.next
	sp.next.prev = sp.prev
	delete(t.spaces, sp.name)
}

// count adds a change of nodes, blocks and tokens to sp's and the total
// counters.
func (t *Tree) count(sp *space, nodes, blocks, tokens int) {
	sp.stats.Nodes += nodes
	sp.stats.Blocks += blocks
	sp.stats.Tokens += tokens
	t.total.Nodes += nodes
	t.total.Blocks += blocks
	t.total.Tokens += tokens
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

// firstAt returns the index of n's first child whose edge starts with
// token first, or where such a child would go.
func (n *Node) firstAt(first int32) int {
	lo, hi := 0, len(n.firsts)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if n.firsts[mid] < first {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// indexOf returns the index of child c in n.children.
func (n *Node) indexOf(c *Node) int {
	i := n.firstAt(c.tokens[0])
	for n.children[i] != c {
		i++
	}
	return i
}

// next finds the child of n whose edge starts with the first block of
// toks (whole blocks only), and how many tokens of toks the edge matches:
// a multiple of the block size, at least one block. Without such a child
// it returns nil and the index where one would go. One comparison covers
// the whole edge in the common case: the first mismatch is looked for
// only when there is one, and no division runs unless there is.
func (t *Tree) next(n *Node, toks []int32) (c *Node, matched, at int) {
	i := n.firstAt(toks[0])
	for ; i < len(n.firsts) && n.firsts[i] == toks[0]; i++ {
		c := n.children[i]
		m := min(len(c.tokens), len(toks))
		if bytes.Equal(asBytes(c.tokens[:m]), asBytes(toks[:m])) {
			return c, m, i
		}
		j := 0
		for c.tokens[j] == toks[j] {
			j++
		}
		if j >= t.bs {
			return c, j / t.bs * t.bs, i
		}
		if c.tokens[j] > toks[j] {
			break
		}
	}
	return nil, 0, i
}

// descend follows the whole blocks of tokens down from n, splitting the
// edge where the match ends inside one. It pins every node it enters if
// pin is set, and appends their blocks to *dst unless dst is nil. It
// returns the deepest node matched, the number of tokens matched below n,
// and, if it stopped at a block no child starts with, the index under
// that node where such a child would go.
func (t *Tree) descend(n *Node, tokens []int32, pin bool, dst *[]blockstore.BlockID) (deepest *Node, matched, at int) {
	tokens = tokens[:len(tokens)/t.bs*t.bs]
	for matched < len(tokens) {
		c, m, i := t.next(n, tokens[matched:])
		if c == nil {
			return n, matched, i
		}
		if m < len(c.tokens) {
			c = t.split(c, m/t.bs)
		}
		if pin {
			c.pins++
		}
		if dst != nil {
			*dst = append(*dst, c.blocks...)
		}
		matched += m
		n = c
	}
	return n, matched, 0
}

// Match finds the longest prefix of tokens cached in namespace ns, in whole
// blocks, appends its blocks to dst and returns it with a Handle that pins
// the path until Release. A match that ends inside an edge splits it
// there, so the handle pins exactly the matched blocks. A partial trailing
// block never matches; an empty match returns the zero Handle. Match
// allocates only when it splits an edge or dst lacks capacity.
func (t *Tree) Match(ns string, tokens []int32, dst []blockstore.BlockID) ([]blockstore.BlockID, Handle) {
	sp := t.spaces[ns]
	if sp == nil {
		return dst, Handle{}
	}
	n, matched, _ := t.descend(&sp.root, tokens, true, &dst)
	if matched == 0 {
		return dst, Handle{}
	}
	return dst, Handle{node: n}
}

// Release unpins a Match's or Extend's path. Releasing the zero Handle does
// nothing; releasing a handle twice is a broken invariant and panics once
// the deepest node's pins go negative.
func (t *Tree) Release(h Handle) {
	for n := h.node; n != nil && n.parent != nil; n = n.parent {
		if n.pins--; n.pins < 0 {
			panic("radix: Release of a handle that was already released")
		}
	}
}

// split cuts c after its first k blocks and returns the new upper node,
// which takes c's place under its parent. Meta is copied, except Queued
// (whatever queue the owner keeps holds c, not the new node), and so are
// the pins: every handle through c passes through the upper node too, and
// handles ending at c still end at c with the same path.
func (t *Tree) split(c *Node, k int) *Node {
	cut := k * t.bs
	meta := c.Meta
	meta.Queued = false
	up := &Node{
		Meta:     meta,
		parent:   c.parent,
		sp:       c.sp,
		tokens:   c.tokens[:cut:cut],
		blocks:   c.blocks[:k:k],
		fps:      c.fps[:k:k],
		children: []*Node{c},
		firsts:   []int32{c.tokens[cut]},
		pins:     c.pins,
		depth:    c.depth - len(c.tokens) + cut,
	}
	c.parent.children[c.parent.indexOf(c)] = up
	c.parent = up
	c.tokens = c.tokens[cut:]
	c.blocks = c.blocks[k:]
	c.fps = c.fps[k:]
	t.count(c.sp, 1, 0, 0)
	return up
}

// SplitAt makes a node of h's path end at depth tokens, a multiple of
// the block size, by splitting the node whose edge spans it, so that the
// prefix up to depth can carry Meta of its own (a longer TTL). It returns
// the new upper node, nil when depth is not inside h's path or a node ends
// there already. Handles through the split node stay valid (see split).
func (t *Tree) SplitAt(h Handle, depth int) *Node {
	if depth <= 0 || depth%t.bs != 0 {
		return nil
	}
	for n := h.node; n != nil && n.parent != nil; n = n.parent {
		start := n.depth - len(n.tokens)
		switch {
		case depth >= n.depth:
			return nil
		case depth > start:
			return t.split(n, (depth-start)/t.bs)
		}
	}
	return nil
}

// Insert adds the whole blocks of tokens (len(tokens) == len(blocks) *
// block size) to namespace ns. The tree already holds a leading run of
// them, existing blocks long, and keeps its own blocks there (which may
// differ from the caller's: the caller may release its duplicates); it
// takes blocks[existing:] from the caller, whose cache references it now
// stands for. The tree keeps copies of tokens and blocks.
func (t *Tree) Insert(ns string, tokens []int32, blocks []blockstore.BlockID) (existing int, err error) {
	if err := t.checkLength(tokens, blocks); err != nil {
		return 0, err
	}
	if len(blocks) == 0 {
		return 0, nil
	}
	n, matched, at := t.descend(&t.space(ns).root, tokens, false, nil)
	if matched < len(tokens) {
		t.addLeaf(n, at, tokens[matched:], blocks[matched/t.bs:])
	}
	return matched / t.bs, nil
}

func (t *Tree) checkLength(tokens []int32, blocks []blockstore.BlockID) error {
	if len(tokens) != len(blocks)*t.bs {
		return fmt.Errorf("%w: %d tokens for %d blocks of %d", ErrLength, len(tokens), len(blocks), t.bs)
	}
	return nil
}

// Extend is Insert for a caller that holds a Handle h on a prefix of
// tokens: the walk starts at h's node instead of the root, so a sequence
// that offers its blocks as they fill pays for the new blocks only. On
// success h is consumed and the returned Handle pins all of tokens; on
// error h is returned unchanged and still pinned.
// REQUIRES: tokens[:h.Tokens()] is the path h pins.
func (t *Tree) Extend(ns string, h Handle, tokens []int32, blocks []blockstore.BlockID) (existing int, nh Handle, err error) {
	if err := t.checkLength(tokens, blocks); err != nil {
		return 0, h, err
	}
	n := h.node
	if n == nil {
		if len(blocks) == 0 {
			return 0, h, nil
		}
		n = &t.space(ns).root
	}
	if n.sp.name != ns || n.depth > len(tokens) {
		return 0, h, fmt.Errorf("%w: a %d-token handle in %q extended to %d tokens in %q",
			ErrHandle, n.depth, n.sp.name, len(tokens), ns)
	}
	from := n.depth
	if n == h.node && n.IsLeaf() && n.pins == 1 && from < len(tokens) {
		// Only the caller's handle ends at this leaf: grow its edge in place
		// rather than hang a one-block node under it for every block a
		// running sequence fills.
		t.growLeaf(n, tokens[from:], blocks[from/t.bs:])
		return from / t.bs, h, nil
	}
	// h keeps the path down to n pinned for the new handle; the walk pins
	// only what lies below.
	n, matched, at := t.descend(n, tokens[from:], true, nil)
	from += matched
	if from < len(tokens) {
		n = t.addLeaf(n, at, tokens[from:], blocks[from/t.bs:])
		n.pins++
	}
	return from / t.bs, Handle{node: n}, nil
}

// Reserve makes room for tokens more tokens (and their whole blocks) in
// the edge of the leaf h ends at, when h alone pins it: the leaf a running
// sequence grows with Extend, so that growing it, block by block, does not
// reallocate. Otherwise it does nothing. It may allocate, once.
func (t *Tree) Reserve(h Handle, tokens int) {
	n := h.node
	if n == nil || !n.IsLeaf() || n.pins != 1 || tokens <= 0 {
		return
	}
	tokens = tokens / t.bs * t.bs
	n.tokens = slices.Grow(n.tokens, tokens)
	n.blocks = slices.Grow(n.blocks, tokens/t.bs)
	n.fps = slices.Grow(n.fps, tokens/t.bs)
}

// Trim gives back the room Reserve made in the edge of the node h ends at
// and that it did not fill: for a sequence done growing it, whose request
// ended before its longest. It allocates when there is room to give back.
func (t *Tree) Trim(h Handle) {
	n := h.node
	if n == nil {
		return
	}
	if cap(n.tokens)-len(n.tokens) >= t.bs {
		n.tokens = slices.Clone(n.tokens)
	}
	if cap(n.blocks) > len(n.blocks) {
		n.blocks = slices.Clone(n.blocks)
	}
	if cap(n.fps) > len(n.fps) {
		n.fps = slices.Clone(n.fps)
	}
}

// chain appends to fps the fingerprints of the whole blocks of tokens,
// chained from parent, and returns fps. The tree is where a cached block's
// fingerprint is computed, once, as it enters; every tier and observer
// reads it from the node.
func (t *Tree) chain(fps []kvcache.Fingerprint, parent kvcache.Fingerprint, salt uint64, tokens []int32) []kvcache.Fingerprint {
	return kvcache.AppendChain(fps, parent, salt, tokens, t.bs)
}

// growLeaf appends tokens and blocks to leaf n's edge.
func (t *Tree) growLeaf(n *Node, tokens []int32, blocks []blockstore.BlockID) {
	parent := n.lastFingerprint()
	from := len(n.fps)
	n.fps = t.chain(n.fps, parent, n.sp.salt, tokens)
	if t.obs != nil {
		t.obs.Stored(n.sp.name, parent, tokens, blocks, n.fps[from:])
	}
	n.tokens = append(n.tokens, tokens...)
	n.blocks = append(n.blocks, blocks...)
	n.depth += len(tokens)
	t.count(n.sp, 0, len(blocks), len(tokens))
}

// addLeaf puts a new leaf holding copies of tokens and blocks under n, at
// index at of its children, and returns it.
func (t *Tree) addLeaf(n *Node, at int, tokens []int32, blocks []blockstore.BlockID) *Node {
	leaf := &Node{
		parent: n,
		sp:     n.sp,
		tokens: slices.Clone(tokens),
		blocks: slices.Clone(blocks),
		fps:    t.chain(make([]kvcache.Fingerprint, 0, len(blocks)), n.lastFingerprint(), n.sp.salt, tokens),
		depth:  n.depth + len(tokens),
	}
	n.children = slices.Insert(n.children, at, leaf)
	n.firsts = slices.Insert(n.firsts, at, leaf.tokens[0])
	if n.listed {
		unlist(n)
	}
	list(leaf)
	t.count(n.sp, 1, len(leaf.blocks), len(leaf.tokens))
	if t.obs != nil {
		t.obs.Stored(n.sp.name, n.lastFingerprint(), leaf.tokens, leaf.blocks, leaf.fps)
	}
	return leaf
}

// RemoveLeaf removes an unpinned leaf, appends its blocks to dst (the
// caller drops the cache's references to them) and returns dst. Its parent
// may become a leaf; a namespace left empty is forgotten.
func (t *Tree) RemoveLeaf(n *Node, dst []blockstore.BlockID) ([]blockstore.BlockID, error) {
	switch {
	case n.removed || n.parent == nil || len(n.children) > 0:
		return dst, ErrNotLeaf
	case n.pins > 0:
		return dst, fmt.Errorf("%w: %d handles", ErrPinned, n.pins)
	}
	p := n.parent
	i := p.indexOf(n)
	p.children = slices.Delete(p.children, i, i+1)
	p.firsts = slices.Delete(p.firsts, i, i+1)
	dst = t.forget(n, dst)
	t.settle(p)
	return dst, nil
}

// RemoveNamespace removes every unpinned node of namespace ns, appends
// their blocks to dst (the caller drops the cache's references to them)
// and returns dst. Pinned nodes are skipped, and so stay with their
// ancestors (which they pin too); releasing their handles and calling it
// again, or RemoveLeaf, removes them later. To flush every namespace, call
// it for each of Namespaces.
func (t *Tree) RemoveNamespace(ns string, dst []blockstore.BlockID) []blockstore.BlockID {
	sp := t.spaces[ns]
	if sp == nil {
		return dst
	}
	return t.prune(&sp.root, dst)
}

// prune removes every unpinned node below n.
func (t *Tree) prune(n *Node, dst []blockstore.BlockID) []blockstore.BlockID {
	kept := 0
	for i, c := range n.children {
		if c.pins == 0 {
			dst = t.forget(c, dst)
			continue
		}
		dst = t.prune(c, dst)
		n.children[kept], n.firsts[kept] = c, n.firsts[i]
		kept++
	}
	if kept < len(n.children) {
		clear(n.children[kept:])
		n.children, n.firsts = n.children[:kept], n.firsts[:kept]
		t.settle(n)
	}
	return dst
}

// forget marks n and the subtree below it removed, takes them off the leaf
// list and the counters and appends their blocks to dst. The caller has
// already unlinked n from its parent.
func (t *Tree) forget(n *Node, dst []blockstore.BlockID) []blockstore.BlockID {
	for _, c := range n.children {
		dst = t.forget(c, dst)
	}
	if n.listed {
		unlist(n)
	}
	t.count(n.sp, -1, -len(n.blocks), -len(n.tokens))
	if t.obs != nil {
		t.obs.Removed(n.sp.name, n.blocks, n.fps)
	}
	n.removed = true
	n.children, n.firsts = nil, nil
	return append(dst, n.blocks...)
}

// settle restores the leaf list and the namespace table after n lost
// children: a childless node becomes a leaf, a childless root's namespace
// is forgotten.
func (t *Tree) settle(n *Node) {
	switch {
	case len(n.children) > 0:
	case n.parent == nil:
		t.dropSpace(n.sp)
	case !n.listed:
		list(n)
	}
}

// list appends n to its namespace's leaf list.
func list(n *Node) {
	head := &n.sp.leaves
	n.prevLeaf, n.nextLeaf = head.prevLeaf, head
	head.prevLeaf.nextLeaf = n
	head.prevLeaf = n
	n.listed = true
}

func unlist(n *Node) {
	n.prevLeaf.nextLeaf = n.nextLeaf
	n.nextLeaf.prevLeaf = n.prevLeaf
	n.prevLeaf, n.nextLeaf = nil, nil
	n.listed = false
}

// Leaves calls fn for every leaf, namespaces in the order they were
// created and each namespace's leaves in the order they became leaves,
// until fn returns false. It costs O(leaves + namespaces). fn must not
// change the tree.
func (t *Tree) Leaves(fn func(*Node) bool) {
	for sp := t.order.next; sp != &t.order; sp = sp.next {
		if !sp.eachLeaf(fn) {
			return
		}
	}
}

// NamespaceLeaves is Leaves for namespace ns only.
func (t *Tree) NamespaceLeaves(ns string, fn func(*Node) bool) {
	if sp := t.spaces[ns]; sp != nil {
		sp.eachLeaf(fn)
	}
}

func (sp *space) eachLeaf(fn func(*Node) bool) bool {
	for n := sp.leaves.nextLeaf; n != &sp.leaves; n = n.nextLeaf {
		if !fn(n) {
			return false
		}
	}
	return true
}

// Walk calls fn for every non-root node, namespaces in the order they were
// created, parents before children, until fn returns false. fn must not
// change the tree.
func (t *Tree) Walk(fn func(*Node) bool) {
	for sp := t.order.next; sp != &t.order; sp = sp.next {
		if !walk(&sp.root, fn) {
			return
		}
	}
}

func walk(n *Node, fn func(*Node) bool) bool {
	if n.parent != nil && !fn(n) {
		return false
	}
	for _, c := range n.children {
		if !walk(c, fn) {
			return false
		}
	}
	return true
}
