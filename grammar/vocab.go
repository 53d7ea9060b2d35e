package grammar

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sort"
	"sync"
)

// TokenSource is what a Vocab needs from a tokenizer: the bytes each
// token adds to a decoded text. prefixd's tokenizers (model.Tokenizer,
// bpe.Tokenizer, model.SentencePiece) all implement it: byte-fallback
// tokens <0xNN> give their byte, SentencePiece's ▁ a space, and control
// tokens nothing.
type TokenSource interface {
	// VocabSize is the number of token IDs.
	VocabSize() int
	// AppendPiece appends the bytes token id adds to a text.
	AppendPiece(dst []byte, id int32) []byte
}

// Vocab is a vocabulary prepared for masks: a trie of every token's
// bytes, laid out in preorder. Build it once per tokenizer; it is
// immutable and safe for concurrent use.
type Vocab struct {
	n       int
	stops   []int32 // tokens that end generation: allowed when the grammar can end
	edge    []byte  // the byte on the edge into each trie node (root: unused)
	next    []int32 // preorder index just past each node's subtree
	below   []int32 // index into sets of the bytes on edges strictly below each node
	sets    []byteSet
	tokAt   []int32 // tokens ending at node i are toks[tokAt[i]:tokAt[i+1]]
	toks    []int32
	off     []uint32 // token i's bytes are data[off[i]:off[i+1]]
	data    []byte
	isStop  []bool
	nodeCnt int
}

// NewVocab builds the trie of src's tokens. stops are the tokens that end
// generation (EOS, end-of-turn tokens): a mask allows them exactly when
// the grammar can end. Tokens with no bytes that are not stops are never
// allowed.
func NewVocab(src TokenSource, stops []int32) *Vocab {
	n := src.VocabSize()
	v := &Vocab{n: n, off: make([]uint32, n+1), isStop: make([]bool, n)}
	for _, s := range stops {
		if s >= 0 && int(s) < n && !v.isStop[s] {
			v.isStop[s] = true
			v.stops = append(v.stops, s)
		}
	}
	for i := range n {
		v.data = src.AppendPiece(v.data, int32(i))
		v.off[i+1] = uint32(len(v.data))
	}
	ids := make([]int32, 0, n)
	for i := range n {
		if v.off[i+1] > v.off[i] && !v.isStop[i] {
			ids = append(ids, int32(i))
		}
	}
	sort.SliceStable(ids, func(a, b int) bool { return bytes.Compare(v.piece(ids[a]), v.piece(ids[b])) < 0 })
	// Sorted byte strings give the trie's preorder directly: each token
	// adds the nodes for the bytes it does not share with the previous.
	v.edge = append(v.edge, 0)
	v.tokAt = append(v.tokAt, 0)
	var path []int32 // node of each depth of the previous token
	var prev []byte
	parentsOf := []int32{-1}
	for _, id := range ids {
		p := v.piece(id)
		common := 0
		for common < len(prev) && common < len(p) && prev[common] == p[common] {
			common++
		}
		path = path[:common]
		for d := common; d < len(p); d++ {
			parent := int32(0)
			if d > 0 {
				parent = path[d-1]
			}
			node := int32(len(v.edge))
			v.edge = append(v.edge, p[d])
			parentsOf = append(parentsOf, parent)
			v.tokAt = append(v.tokAt, int32(len(v.toks)))
			path = append(path, node)
		}
		v.toks = append(v.toks, id)
		prev = p
	}
	nodes := len(v.edge)
	v.tokAt = append(v.tokAt, int32(len(v.toks)))
	// tokAt[i] was the token count when node i was made; tokens ending at
	// i were appended before node i+1 was made.
	v.next = make([]int32, nodes)
	belowSets := make([]byteSet, nodes)
	// A node's subtree ends just past its last preorder descendant;
	// children come after parents, so one backward pass finds them.
	last := make([]int32, nodes) // last preorder descendant (itself if leaf)
	for i := range nodes {
		last[i] = int32(i)
	}
	for i := nodes - 1; i >= 1; i-- {
		p := parentsOf[i]
		if last[i] > last[p] {
			last[p] = last[i]
		}
		belowSets[p].add(v.edge[i])
		b := &belowSets[p]
		for w := range b {
			b[w] |= belowSets[i][w]
		}
	}
	setIdx := map[byteSet]int32{}
	v.below = make([]int32, nodes)
	for i := range nodes {
		v.next[i] = last[i] + 1
		id, ok := setIdx[belowSets[i]]
		if !ok {
			id = int32(len(v.sets))
			v.sets = append(v.sets, belowSets[i])
			setIdx[belowSets[i]] = id
		}
		v.below[i] = id
	}
	v.nodeCnt = nodes
	return v
}

func (v *Vocab) piece(id int32) []byte { return v.data[v.off[id]:v.off[id+1]] }

// Size is the number of token IDs, the length of a mask in bits.
func (v *Vocab) Size() int { return v.n }

// Nodes is the number of trie nodes.
func (v *Vocab) Nodes() int { return v.nodeCnt }

// Constraint pairs a Grammar with a Vocab and caches masks by Matcher
// state, so sequences that share a grammar share the masks. It is safe
// for concurrent use; the Matchers it makes are not.
type Constraint struct {
	g *Grammar
	v *Vocab

	mu         sync.Mutex
	cache      map[string][]uint64
	cacheBytes int
	maxBytes   int
	hits, miss int64
	pool       sync.Pool // *walker
}

// DefaultMaskCacheBytes bounds a Constraint's mask cache.
const DefaultMaskCacheBytes = 64 << 20

// NewConstraint returns a Constraint for g over v.
func NewConstraint(g *Grammar, v *Vocab) *Constraint {
	c := &Constraint{g: g, v: v, cache: map[string][]uint64{}, maxBytes: DefaultMaskCacheBytes}
	c.pool.New = func() any { return &walker{} }
	return c
}

// Grammar returns the Constraint's grammar.
func (c *Constraint) Grammar() *Grammar { return c.g }

// Vocab returns the Constraint's vocabulary.
func (c *Constraint) Vocab() *Vocab { return c.v }

// CacheStats returns how many masks came from the cache and how many
// were computed.
func (c *Constraint) CacheStats() (hits, misses int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.miss
}

// NewMatcher returns a Matcher at the start of the grammar that can
// answer for tokens.
func (c *Constraint) NewMatcher() *Matcher {
	m := c.g.NewMatcher()
	m.c = c
	return m
}

// Allowed reports whether token id may come next. REQUIRES: m was made by
// a Constraint.
func (m *Matcher) Allowed(id int32) bool {
	v := m.c.v
	if id < 0 || int(id) >= v.n {
		return false
	}
	if v.isStop[id] {
		return m.end && m.err == nil
	}
	p := v.piece(id)
	return len(p) > 0 && m.accepts(p)
}

// AcceptToken advances m over token id and reports whether the grammar
// allowed it; on false m is unchanged. A stop token is accepted when the
// grammar can end, and leaves m Closed. REQUIRES: m was made by a
// Constraint.
func (m *Matcher) AcceptToken(id int32) bool {
	v := m.c.v
	if id < 0 || int(id) >= v.n {
		return false
	}
	if v.isStop[id] {
		if !m.end || m.err != nil {
			return false
		}
		m.leaves = m.leaves[:0]
		return true
	}
	p := v.piece(id)
	return len(p) > 0 && m.AcceptBytes(p)
}

// MaskWords is the length in uint64 words of a mask over v.
func (v *Vocab) MaskWords() int { return (v.n + 63) / 64 }

// Mask returns the tokens that may come next as a bitset (bit id%64 of
// word id/64), from the Constraint's cache when this state was seen
// before. The result is shared and must not be modified. REQUIRES: m was
// made by a Constraint.
func (m *Matcher) Mask() []uint64 {
	c := m.c
	key := m.stateKey()
	c.mu.Lock()
	if mask, ok := c.cache[string(key)]; ok {
		c.hits++
		c.mu.Unlock()
		return mask
	}
	c.miss++
	c.mu.Unlock()
	mask := make([]uint64, c.v.MaskWords())
	m.computeMask(mask)
	c.mu.Lock()
	if c.cacheBytes+len(mask)*8 <= c.maxBytes {
		if _, dup := c.cache[string(key)]; !dup {
			c.cache[string(key)] = mask
			c.cacheBytes += len(mask)*8 + len(key)
		}
	}
	c.mu.Unlock()
	return mask
}

// stateKey serializes m's state canonically: each stack's positions from
// the top down, the stacks sorted, then the end flag.
func (m *Matcher) stateKey() []byte {
	stacks := make([][]byte, len(m.leaves))
	for i, l := range m.leaves {
		var b []byte
		for f := l; f >= 0; f = m.s.frames[f].parent {
			b = binary.AppendUvarint(b, uint64(m.s.frames[f].pos))
		}
		stacks[i] = append(b, 0xFF) // a uvarint never ends in 0xFF
	}
	slices.SortFunc(stacks, bytes.Compare)
	key := bytes.Join(stacks, nil)
	if m.end {
		key = append(key, 1)
	}
	return key
}

// walker is the scratch of one mask computation.
type walker struct {
	mask  []uint64
	buf   []int32
	loop  byteSet // bytes after which the root state recurs
	root  []int32
	calls int
}

// computeMask fills mask (all zero) with the tokens m allows.
func (m *Matcher) computeMask(mask []uint64) {
	c := m.c
	v := c.v
	if m.err != nil {
		return
	}
	if m.end {
		for _, s := range v.stops {
			mask[s>>6] |= 1 << (s & 63)
		}
	}
	if len(m.leaves) == 0 {
		return
	}
	w := c.pool.Get().(*walker)
	defer c.pool.Put(w)
	w.mask = mask
	w.root = append(w.root[:0], m.leaves...)
	mark := len(m.s.frames)
	// The bytes that lead back to this very state (inside a string, a
	// run of digits) let whole subtrees through without walking them.
	w.loop = byteSet{}
	for b := 0; b < 256; b++ {
		next, _ := m.s.step(w.buf[:0], w.root, byte(b))
		w.buf = next
		if m.s.sameState(next, w.root) {
			w.loop.add(byte(b))
		}
		m.s.frames = m.s.frames[:mark]
	}
	m.s.over = false
	w.buf = w.buf[:0]
	w.walk(&m.s, v, 0, w.root)
	m.s.frames = m.s.frames[:mark]
	m.s.over = false
	w.mask = nil
}

// walk marks the tokens below trie node n reachable from the state
// leaves.
func (w *walker) walk(s *stackSet, v *Vocab, n int32, leaves []int32) {
	for ch := n + 1; ch < v.next[n]; ch = v.next[ch] {
		mark := len(s.frames)
		start := len(w.buf)
		next, end := s.step(w.buf, leaves, v.edge[ch])
		w.buf = next
		nl := next[start:]
		if len(nl) > 0 || end {
			w.set(v, v.tokAt[ch], v.tokAt[ch+1])
			if len(nl) > 0 && v.next[ch] > ch+1 {
				if v.sets[v.below[ch]].subsetOf(&w.loop) && s.sameState(nl, w.root) {
					w.set(v, v.tokAt[ch+1], v.tokAt[v.next[ch]])
				} else {
					w.walk(s, v, ch, nl)
				}
			}
		}
		s.over = false
		w.buf = w.buf[:start]
		s.frames = s.frames[:mark]
	}
}

// set marks the tokens toks[from:to].
func (w *walker) set(v *Vocab, from, to int32) {
	for _, id := range v.toks[from:to] {
		w.mask[id>>6] |= 1 << (id & 63)
	}
}
