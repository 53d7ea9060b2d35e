package speculate

import "fmt"

// none marks an absent node index.
const none = -1

// node is a path from a trie's root: its own token, then n tail tokens
// read from a text. Only a node of one occurrence has a tail, so the tail
// is that occurrence's text; this compresses the long unique paths that
// would otherwise cost a node per token (Arctic compresses every chain,
// which needs its references moved when a text leaves). Nodes live in an
// arena and link by index, so the arena holds no pointers and the garbage
// collector never scans it.
type node struct {
	token  int32
	count  int32 // occurrences of the path in the texts
	cont   int32 // the sum of the children's counts: occurrences followed by a child's token
	depth  int32 // tokens from the root to token, not counting the tail
	parent int32
	best   int32 // the child of the highest count, the lowest token on ties; none if no child
	child  int32 // first child
	next   int32 // siblings, in no order
	prev   int32
	ref    int32 // the text of the occurrence that created the node, for the tail: it may have left since
	pos    int32 // where in ref the tail starts
	n      int32 // tail length; > 0 only if count is 1 and there is no child
}

// trie is a depth-limited suffix trie with counts over a queue of texts:
// every substring of a text of at most depth tokens is a path from the
// root, and counts its occurrences. A node keeps its best child up to date
// as counts change, so drafting costs a step per drafted token. It is not
// safe for concurrent use.
type trie struct {
	depth  int32
	nodes  []node           // nodes[0] is the root
	free   []int32          // unused arena slots
	kids   map[uint64]int32 // (parent, token) to child
	texts  [][]int32        // text base+i is texts[i]
	base   int32
	rebase int32   // the base at which texts are numbered from 0 again
	tokens int     // the sum of len(texts)
	active []int32 // the nodes of the newest text's suffixes (see extend)
}

func newTrie(depth int) *trie {
	t := &trie{depth: int32(depth), kids: make(map[uint64]int32), active: make([]int32, 0, depth), rebase: 1 << 30}
	t.nodes = append(t.nodes, node{token: none, parent: none, best: none, child: none, next: none, prev: none, ref: none})
	return t
}

func kidKey(parent, token int32) uint64 { return uint64(uint32(parent))<<32 | uint64(uint32(token)) }

// live is the number of nodes besides the root.
func (t *trie) live() int { return len(t.nodes) - 1 - len(t.free) }

func (t *trie) text(id int32) []int32 { return t.texts[id-t.base] }

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

// add appends seq to the texts and counts its substrings. The trie keeps
// seq; the caller must not change it.
func (t *trie) add(seq []int32) {
	id := t.base + int32(len(t.texts))
	t.texts = append(t.texts, seq)
	t.tokens += len(seq)
	t.active = t.active[:0]
	for i := range seq {
		t.extend(id, i)
	}
}

// grew records that the newest text is now seq, one token longer: the
// caller appended to it. t.active follows the newest text's suffixes.
func (t *trie) grew(seq []int32) {
	t.texts[len(t.texts)-1] = seq
	t.tokens++
	t.extend(t.base+int32(len(t.texts))-1, len(seq)-1)
}

// extend counts the substrings that end at token i of text id. Before,
// t.active holds the nodes of those that end at token i-1 (active[m-1] the
// one of m tokens, its path ending at the node's tail's end); after, those
// that end at i. The longest go first, so that each grows from a node
// that no shorter one has counted yet; split redirects those it moves.
func (t *trie) extend(id int32, i int) {
	n := min(len(t.active), int(t.depth)-1) // the deepest can grow no more
	t.active = t.active[:n+1]
	for j := n; j >= 1; j-- {
		t.active[j] = t.grow(t.active[j-1], id, i)
	}
	t.active[0] = t.grow(0, id, i)
}

// grow counts the path of c (to its tail's end) followed by token i of
// text id, an occurrence that c's count includes, and returns its node.
func (t *trie) grow(c, id int32, i int) int32 {
	cn := &t.nodes[c]
	if c != 0 && cn.count == 1 {
		// This occurrence is c's only one, so c has no child and its tail
		// is this text's, ending at i.
		if cn.ref != id || int(cn.pos+cn.n) != i || cn.child != none {
			panic("speculate: a node of one occurrence is not that occurrence's")
		}
		cn.n++
		return c
	}
	token := t.text(id)[i]
	x := t.child(c, token)
	switch {
	case x == none:
		x = t.alloc(c, token, id, int32(i+1))
	case t.nodes[x].n > 0:
		t.split(x)
	}
	t.nodes[x].count++
	t.counted(c, x)
	return x
}

// counted updates p after its child c's count grew.
func (t *trie) counted(p, c int32) {
	pn := &t.nodes[p]
	pn.cont++
	if pn.best == none || pn.best != c && t.better(c, pn.best) {
		pn.best = c
	}
}

// split moves x's tail to a new child, so x can count a second occurrence,
// and moves the active places in that tail with it.
func (t *trie) split(x int32) {
	xn := t.nodes[x]
	y := t.alloc(x, t.text(xn.ref)[xn.pos], xn.ref, xn.pos+1)
	t.nodes[y].n = xn.n - 1
	t.nodes[y].count = 1
	t.nodes[x].n = 0
	t.counted(x, y)
	for j, c := range t.active {
		if c == x && int32(j+1) > xn.depth {
			t.active[j] = y
		}
	}
}

// alloc links a new node of count zero under p.
func (t *trie) alloc(p, token, ref, pos int32) int32 {
	n := node{token: token, depth: t.nodes[p].depth + 1, parent: p, best: none, child: none,
		prev: none, next: t.nodes[p].child, ref: ref, pos: pos}
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

// removeOldest removes the oldest text and its counts.
// REQUIRES: len(t.texts) > 0.
func (t *trie) removeOldest() {
	seq, id := t.texts[0], t.base
	var path [maxDepthLimit]int32
	for s := range seq {
		r := seq[s:min(len(seq), s+int(t.depth))]
		k := 0
		for p := int32(0); k < len(r); {
			c := t.child(p, r[k])
			if c == none {
				panic("speculate: removing a path the trie does not hold")
			}
			path[k] = c
			k++
			if cn := &t.nodes[c]; cn.n > 0 {
				// The tail holds the rest of this occurrence.
				if cn.ref != id || int(cn.pos) != s+k || k+int(cn.n) != len(r) {
					panic("speculate: a tail that is not the removed text's")
				}
				break
			}
			p = c
		}
		// Deepest first: a node's count reaches zero only after its children's.
		for j := k - 1; j >= 0; j-- {
			t.uncount(path[j])
		}
	}
	t.texts[0] = nil
	t.texts = t.texts[1:]
	t.base++
	t.tokens -= len(seq)
	if t.base >= t.rebase {
		// Number the texts from 0 again before the ids overflow.
		for i := range t.nodes {
			if t.nodes[i].n > 0 {
				t.nodes[i].ref -= t.base
			}
		}
		t.base = 0
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
	t.nodes[c] = node{token: none, parent: none, best: none, child: none, next: none, prev: none, ref: none}
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

// at is a place in a trie: off tokens into node c's tail.
type at struct{ c, off int32 }

// next returns the token after a, the count of its path and the
// continuation count of a's path, and the place after it; ok is false if
// nothing follows.
func (t *trie) next(a at) (token, count, cont int32, b at, ok bool) {
	cn := &t.nodes[a.c]
	if a.off < cn.n {
		return t.text(cn.ref)[cn.pos+a.off], 1, 1, at{a.c, a.off + 1}, true
	}
	if cn.best == none {
		return 0, 0, 0, a, false
	}
	bn := &t.nodes[cn.best]
	return bn.token, bn.count, cn.cont, at{cn.best, 0}, true
}

// path is the result of walking a trie from a node: how many tokens it
// would draft and their score, the sum of their cumulative probabilities.
type path struct {
	n     int
	score float64
}

// walk follows best continuations from a for at most limit tokens while
// the cumulative empirical probability stays at least minProb.
func (t *trie) walk(a at, limit int, minProb float64) path {
	var r path
	prob := 1.0
	for r.n < limit {
		_, count, cont, b, ok := t.next(a)
		if !ok {
			break
		}
		if prob *= float64(count) / float64(cont); prob < minProb {
			break
		}
		r.n++
		r.score += prob
		a = b
	}
	return r
}

// check verifies the trie's invariants: the root, every live node reachable
// from it exactly once through sibling lists that link both ways, parents
// and depths, the child table equal to the links, counts positive and cont
// equal to the sum of the children's counts, best the children's maximum,
// tails only on leaves of one occurrence, within the depth and equal to
// their text, the free list disjoint from the live nodes, and the token
// count. It is O(nodes + texts).
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
			case cn.n > 0 && (cn.count != 1 || cn.child != none || cn.depth+cn.n > t.depth):
				return fmt.Errorf("node %d: tail of %d under count %d, depth %d", c, cn.n, cn.count, cn.depth)
			case cn.n > 0 && (cn.ref < t.base || int(cn.ref-t.base) >= len(t.texts)):
				return fmt.Errorf("node %d: tail in text %d of %d from %d", c, cn.ref, len(t.texts), t.base)
			}
			if cn.n > 0 {
				if x := t.text(cn.ref); cn.pos < 1 || int(cn.pos+cn.n) > len(x) || x[cn.pos-1] != cn.token {
					return fmt.Errorf("node %d: token %d at %d..%d+1 of a text of %d", c, cn.token, cn.pos-1, cn.pos+cn.n, len(x))
				}
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
	n := 0
	for _, x := range t.texts {
		n += len(x)
	}
	if n != t.tokens {
		return fmt.Errorf("%d tokens counted, %d recounted", t.tokens, n)
	}
	return nil
}

// match fills buf with the places of tail's suffixes, buf[m-1] the end
// of its last m tokens, as far as the trie holds them, and returns it.
func (t *trie) match(tail []int32, buf []at) []at {
	buf = buf[:0]
	for m := 1; m <= len(tail) && m <= int(t.depth); m++ {
		a := at{0, 0}
		for _, tok := range tail[len(tail)-m:] {
			cn := &t.nodes[a.c]
			if a.off < cn.n {
				if t.text(cn.ref)[cn.pos+a.off] != tok {
					return buf
				}
				a.off++
				continue
			}
			if a = (at{t.child(a.c, tok), 0}); a.c == none {
				return buf
			}
		}
		buf = append(buf, a)
	}
	return buf
}

// ends fills buf with the places of the newest text's suffixes, as match
// would for that text's tail, and returns it.
func (t *trie) ends(buf []at) []at {
	buf = buf[:0]
	for _, c := range t.active {
		buf = append(buf, at{c, t.nodes[c].n})
	}
	return buf
}

// follow appends to dst the first n tokens of the best continuation from a.
func (t *trie) follow(dst []int32, a at, n int) []int32 {
	for range n {
		tok, _, _, b, _ := t.next(a)
		dst = append(dst, tok)
		a = b
	}
	return dst
}

// choice is the walk a drafter takes: path.n tokens from a.
type choice struct {
	a at
	path
}

// choose returns, over the matched suffixes (matched[m-1] the node of the
// last m tokens), the walk of the highest score, the longest match on
// ties, drafting at most min(k, factor × m) tokens from a match of m tokens.
func (t *trie) choose(matched []at, k int, factor, minProb float64) choice {
	var best choice
	for i, a := range matched {
		p := t.walk(a, min(k, int(float64(i+1)*factor+1e-9)), minProb)
		if p.n > 0 && p.score >= best.score {
			best = choice{a: a, path: p}
		}
	}
	return best
}
