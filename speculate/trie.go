package speculate

import "fmt"

// none marks an absent node index.
const none = -1

// node is one token of a path from a trie's root. Nodes live in an arena
// and link by index, so the arena holds no pointers and the garbage
// collector never scans it.
type node struct {
	token  int32
	count  int32 // occurrences of the path root..node in the text
	cont   int32 // occurrences followed by a token in the trie: the sum of the children's counts
	depth  int32
	parent int32
	best   int32 // the child of the highest count, the lowest token on ties; none if no child
	child  int32 // first child
	next   int32 // siblings, in no order
	prev   int32
}

// trie is a depth-limited suffix trie with counts (the uncompressed form of
// Arctic's suffix tree): every substring of its text of at most depth
// tokens is a path from the root, and each node counts the substring's
// occurrences. A node keeps its best child up to date as counts change, so
// drafting costs one step per drafted token. It is not safe for concurrent
// use.
type trie struct {
	depth int32
	nodes []node           // nodes[0] is the root
	free  []int32          // unused arena slots
	kids  map[uint64]int32 // (parent, token) to child
}

func newTrie(depth int) *trie {
	t := &trie{depth: int32(depth), kids: make(map[uint64]int32)}
	t.nodes = append(t.nodes, node{token: none, parent: none, best: none, child: none, next: none, prev: none})
	return t
}

func kidKey(parent, token int32) uint64 { return uint64(uint32(parent))<<32 | uint64(uint32(token)) }

// live is the number of nodes besides the root.
func (t *trie) live() int { return len(t.nodes) - 1 - len(t.free) }

// child returns the child of p for token, or none.
func (t *trie) child(p, token int32) int32 {
	if c, ok := t.kids[kidKey(p, token)]; ok {
		return c
	}
	return none
}

// better reports whether node a ranks above node b as a continuation.
func (t *trie) better(a, b int32) bool {
	na, nb := &t.nodes[a], &t.nodes[b]
	return na.count > nb.count || na.count == nb.count && na.token < nb.token
}

// step counts one more occurrence of p's path followed by token and returns
// that child, creating it if needed. REQUIRES: p's depth < t.depth.
func (t *trie) step(p, token int32) int32 {
	c := t.child(p, token)
	if c == none {
		c = t.alloc(p, token)
	}
	t.nodes[c].count++
	pn := &t.nodes[p]
	pn.cont++
	if pn.best == none || pn.best != c && t.better(c, pn.best) {
		pn.best = c
	}
	return c
}

func (t *trie) alloc(p, token int32) int32 {
	n := node{token: token, depth: t.nodes[p].depth + 1, parent: p, best: none, child: none, prev: none, next: t.nodes[p].child}
	var c int32
	if k := len(t.free); k > 0 {
		c = t.free[k-1]
		t.free = t.free[:k-1]
		t.nodes[c] = n
	} else {
		c = int32(len(t.nodes))
		t.nodes = append(t.nodes, n)
	}
	if n.next != none {
		t.nodes[n.next].prev = c
	}
	t.nodes[p].child = c
	t.kids[kidKey(p, token)] = c
	return c
}

// add counts every substring of seq of at most t.depth tokens: each suffix's
// first t.depth tokens as a path from the root.
func (t *trie) add(seq []int32) {
	for s := range seq {
		p := int32(0)
		for _, tok := range seq[s:min(len(seq), s+int(t.depth))] {
			p = t.step(p, tok)
		}
	}
}

// remove undoes add(seq). REQUIRES: seq was added and not removed since.
func (t *trie) remove(seq []int32) {
	var path [maxDepthLimit]int32
	for s := range seq {
		end := min(len(seq), s+int(t.depth))
		p := int32(0)
		for i, tok := range seq[s:end] {
			if p = t.child(p, tok); p == none {
				panic("speculate: removing a path the trie does not hold")
			}
			path[i] = p
		}
		// Deepest first: a node's count reaches zero only after its children's.
		for i := end - s - 1; i >= 0; i-- {
			t.uncount(path[i])
		}
	}
}

// uncount removes one occurrence of c's path, freeing c at count zero.
func (t *trie) uncount(c int32) {
	cn := &t.nodes[c]
	p := cn.parent
	cn.count--
	t.nodes[p].cont--
	if cn.count == 0 {
		t.unlink(c)
	}
	if t.nodes[p].best == c {
		t.rescan(p)
	}
}

func (t *trie) unlink(c int32) {
	cn := t.nodes[c]
	if cn.prev != none {
		t.nodes[cn.prev].next = cn.next
	} else {
		t.nodes[cn.parent].child = cn.next
	}
	if cn.next != none {
		t.nodes[cn.next].prev = cn.prev
	}
	delete(t.kids, kidKey(cn.parent, cn.token))
	t.nodes[c] = node{token: none, parent: none, best: none, child: none, next: none, prev: none}
	t.free = append(t.free, c)
}

// rescan recomputes p's best child.
func (t *trie) rescan(p int32) {
	best := int32(none)
	for c := t.nodes[p].child; c != none; c = t.nodes[c].next {
		if best == none || t.better(c, best) {
			best = c
		}
	}
	t.nodes[p].best = best
}

// path is the result of walking a trie from a node: how many tokens it
// would draft and their score, the sum of their cumulative probabilities.
type path struct {
	n     int
	score float64
}

// walk follows best children from node c for at most limit tokens while
// the cumulative empirical probability stays at least minProb.
func (t *trie) walk(c int32, limit int, minProb float64) path {
	var r path
	prob := 1.0
	for r.n < limit {
		cn := &t.nodes[c]
		if cn.best == none {
			break
		}
		b := &t.nodes[cn.best]
		if prob *= float64(b.count) / float64(cn.cont); prob < minProb {
			break
		}
		r.n++
		r.score += prob
		c = cn.best
	}
	return r
}

// check verifies the trie's invariants: the root, every live node reachable
// from it exactly once through sibling lists that link both ways, parents
// and depths, the child table equal to the links, counts positive and cont
// equal to the sum of the children's counts, best the children's maximum,
// and the free list disjoint from the live nodes. It is O(nodes).
func (t *trie) check() error {
	root := &t.nodes[0]
	if root.parent != none || root.depth != 0 || root.count != 0 {
		return fmt.Errorf("malformed root %+v", *root)
	}
	seen := make([]bool, len(t.nodes))
	for _, f := range t.free {
		if f <= 0 || int(f) >= len(t.nodes) || seen[f] {
			return fmt.Errorf("free list holds %d twice or out of range", f)
		}
		seen[f] = true
	}
	reached := 0
	stack := []int32{0}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		pn := &t.nodes[p]
		sum, best, prev := int32(0), int32(none), int32(none)
		for c := pn.child; c != none; c = t.nodes[c].next {
			if c <= 0 || int(c) >= len(t.nodes) || seen[c] {
				return fmt.Errorf("node %d reached twice, freed or out of range", c)
			}
			seen[c] = true
			reached++
			cn := &t.nodes[c]
			switch {
			case cn.parent != p || cn.prev != prev:
				return fmt.Errorf("node %d: parent %d prev %d, want %d %d", c, cn.parent, cn.prev, p, prev)
			case cn.depth != pn.depth+1 || cn.depth > t.depth:
				return fmt.Errorf("node %d: depth %d under depth %d (limit %d)", c, cn.depth, pn.depth, t.depth)
			case cn.count <= 0:
				return fmt.Errorf("node %d: count %d", c, cn.count)
			case t.child(p, cn.token) != c:
				return fmt.Errorf("node %d: child table gives %d", c, t.child(p, cn.token))
			}
			sum += cn.count
			if best == none || t.better(c, best) {
				best = c
			}
			prev = c
			stack = append(stack, c)
		}
		if pn.cont != sum || pn.best != best {
			return fmt.Errorf("node %d: cont %d best %d, children sum %d best %d", p, pn.cont, pn.best, sum, best)
		}
		if p != 0 && pn.cont > pn.count {
			return fmt.Errorf("node %d: %d continuations of %d occurrences", p, pn.cont, pn.count)
		}
	}
	if reached != t.live() || len(t.kids) != reached {
		return fmt.Errorf("%d nodes reached, %d live, %d in the child table", reached, t.live(), len(t.kids))
	}
	return nil
}

// extend appends token to the trie's text: active holds the nodes of the
// text's suffixes, active[m-1] the node of its last m tokens, and comes
// back updated for the new text. REQUIRES: cap(active) >= t.depth.
func (t *trie) extend(active []int32, token int32) []int32 {
	n := min(len(active), int(t.depth)-1) // the deepest suffix can grow no more
	active = active[:n+1]
	for i := n; i >= 1; i-- {
		active[i] = t.step(active[i-1], token)
	}
	active[0] = t.step(0, token)
	return active
}

// match fills buf with the nodes of tail's suffixes, buf[m-1] the node of
// its last m tokens, as far as the trie holds them, and returns that part.
func (t *trie) match(tail []int32, buf []int32) []int32 {
	buf = buf[:0]
	for m := 1; m <= len(tail) && m <= int(t.depth); m++ {
		p := int32(0)
		for _, tok := range tail[len(tail)-m:] {
			if p = t.child(p, tok); p == none {
				return buf
			}
		}
		buf = append(buf, p)
	}
	return buf
}

// follow appends to dst the tokens of the first n best children from c.
func (t *trie) follow(dst []int32, c int32, n int) []int32 {
	for range n {
		c = t.nodes[c].best
		dst = append(dst, t.nodes[c].token)
	}
	return dst
}

// choice is the walk a drafter takes: path.n tokens from node.
type choice struct {
	node int32
	path
}

// choose returns, over the matched suffixes (matched[m-1] the node of the
// last m tokens), the walk of the highest score, the longest match on
// ties, drafting at most min(k, factor × m) tokens from a match of m tokens.
func (t *trie) choose(matched []int32, k int, factor, minProb float64) choice {
	var best choice
	for i, c := range matched {
		p := t.walk(c, min(k, int(float64(i+1)*factor+1e-9)), minProb)
		if p.n > 0 && p.score >= best.score {
			best = choice{node: c, path: p}
		}
	}
	return best
}
