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
	n      int
	stops  []int32 // tokens that end generation: allowed when the grammar can end
	edge   []byte  // the byte on the edge into each trie node (root: unused)
	next   []int32 // preorder index just past each node's subtree
	tokAt  []int32 // tokens ending at node i are toks[tokAt[i]:tokAt[i+1]]
	toks   []int32
	off    []uint32 // token i's bytes are data[off[i]:off[i+1]]
	data   []byte
	isStop []bool
	// below[i] indexes kinds: the characters that the bytes below node i
	// spell, when every token below continues node i with whole valid
	// UTF-8 characters; -1 when one does not. chars[i] is the most
	// characters a token below continues it with (at most maxChars).
	below []int32
	chars []uint8
	kinds []kindSet
	// tokChars[i] is how many whole characters toks[i] ends with (counted
	// back from its end to the first byte that is not one), nodeChars[i]
	// the same for node i's prefix: a token below a node whose tokens
	// continue it with whole characters continues it with
	// tokChars-nodeChars.
	tokChars  []int32
	nodeChars []int32
	bulk      *bulkSets
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
	// A node's subtree ends just past its last preorder descendant;
	// children come after parents, so one backward pass finds them.
	last := make([]int32, nodes) // last preorder descendant (itself if leaf)
	for i := range nodes {
		last[i] = int32(i)
	}
	for i := nodes - 1; i >= 1; i-- {
		if p := parentsOf[i]; last[i] > last[p] {
			last[p] = last[i]
		}
	}
	for i := range nodes {
		v.next[i] = last[i] + 1
	}
	// Each token's path from the root, its prefixes' nodes, tells the
	// summaries what the token continues each of them with.
	sum := newCharSummer(nodes)
	v.tokChars = make([]int32, len(v.toks))
	for n := range int32(nodes) {
		for t := v.tokAt[n]; t < v.tokAt[n+1]; t++ {
			p := v.piece(v.toks[t])
			path = slices.Grow(path[:0], len(p))[:len(p)]
			for d, a := len(p)-1, n; d >= 0; d, a = d-1, parentsOf[a] {
				path[d] = a
			}
			v.tokChars[t] = sum.add(p, path)
		}
	}
	v.below, v.chars, v.kinds = sum.intern()
	v.nodeChars = sum.prefix
	v.bulk = newBulkSets(v)
	return v
}

func (v *Vocab) piece(id int32) []byte { return v.data[v.off[id]:v.off[id+1]] }

// Size is the number of token IDs, the length of a mask in bits.
func (v *Vocab) Size() int { return v.n }

// Nodes is the number of trie nodes.
func (v *Vocab) Nodes() int { return len(v.edge) }

// Constraint pairs a Grammar with a Vocab and caches masks by Matcher
// state, so sequences that share a grammar share the masks. It is safe
// for concurrent use; the Matchers it makes are not.
type Constraint struct {
	g *Grammar
	v *Vocab

	class  [256]uint8 // g.partition()
	nclass int        // the number of classes
	coarse bool       // coarse(&class)
	noBulk bool       // tests: masks without the bulk path

	mu         sync.Mutex
	cache      map[string][]uint64
	cacheBytes int
	maxBytes   int
	hits, miss int64
	pool       sync.Pool // *walker
	// dfa is the walker whose tables persist from mask to mask; dfaMu
	// guards it (a mask that finds it busy uses a fresh walker).
	dfaMu sync.Mutex
	dfa   walker
}

// DefaultMaskCacheBytes bounds a Constraint's mask cache, in bytes of
// masks and keys; a cache that would pass it is emptied and refilled.
const DefaultMaskCacheBytes = 64 << 20

// NewConstraint returns a Constraint for g over v.
func NewConstraint(g *Grammar, v *Vocab) *Constraint {
	c := &Constraint{g: g, v: v, cache: map[string][]uint64{}, maxBytes: DefaultMaskCacheBytes}
	c.class, c.nclass = g.partition()
	c.coarse = coarse(&c.class)
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
// before. The result is shared and must not be modified. A Matcher that
// has failed (Err: ErrAmbiguous, or ErrTooCostly when computing this very
// mask passed Limits.MaxMaskWork) allows nothing. REQUIRES: m was made by
// a Constraint.
func (m *Matcher) Mask() []uint64 {
	c := m.c
	if m.err != nil {
		return make([]uint64, c.v.MaskWords())
	}
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
	if !m.computeMask(mask) {
		return mask // m failed: nothing is allowed, and nothing is cached
	}
	c.mu.Lock()
	if _, dup := c.cache[string(key)]; !dup {
		if c.cacheBytes+len(mask)*8+len(key) > c.maxBytes {
			// Full: start over, so the states in use now get cached.
			clear(c.cache)
			c.cacheBytes = 0
		}
		c.cache[string(key)] = mask
		c.cacheBytes += len(mask)*8 + len(key)
	}
	c.mu.Unlock()
	return mask
}

// stateKey serializes m's state canonically into m's key buffer.
func (m *Matcher) stateKey() []byte {
	m.key, m.keyTmp = appendKey(m.key[:0], m.keyTmp, &m.s, m.leaves, m.end)
	return m.key
}

// appendKey appends the canonical form of a state to dst: each stack's
// leaf progress and positions from the top down, the stacks sorted, then
// the end flag. Equal keys mean equal states whatever arena holds them.
// tmp is scratch, returned for reuse.
func appendKey(dst, tmp []byte, s *stackSet, leaves []int32, end bool) ([]byte, []byte) {
	var cutsBuf [17]int
	cuts := cutsBuf[:0]
	tmp = tmp[:0]
	for _, l := range leaves {
		cuts = append(cuts, len(tmp))
		tmp = binary.AppendUvarint(tmp, uint64(s.frames[l].sub))
		for f := l; f >= 0; f = s.frames[f].parent {
			tmp = binary.AppendUvarint(tmp, uint64(s.frames[f].pos))
		}
		tmp = append(tmp, 0xFF) // a uvarint never ends in 0xFF
	}
	cuts = append(cuts, len(tmp))
	var orderBuf [16]int
	order := orderBuf[:0]
	for i := range leaves {
		order = append(order, i)
	}
	stack := func(i int) []byte { return tmp[cuts[i]:cuts[i+1]] }
	for i := 1; i < len(order); i++ { // insertion sort: states hold few stacks
		for j := i; j > 0 && bytes.Compare(stack(order[j]), stack(order[j-1])) < 0; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	for _, i := range order {
		dst = append(dst, stack(i)...)
	}
	if end {
		dst = append(dst, 1)
	}
	return dst, tmp
}

// walker computes masks. It interns the states it meets (their stacks
// copied into its own arena) and memoizes their transitions, so the trie
// walk pays for a matcher step only once per distinct (state, byte) and
// otherwise costs a table lookup per trie node: inside a string,
// thousands of subtrees reach the same few states. A Constraint keeps one
// walker's tables from mask to mask (see Constraint.dfa): what it learnt
// about a state holds for every mask that meets it again, as a lexer's
// DFA does, so the second mask in a string no longer steps the matcher.
type walker struct {
	mask    []uint64
	s       *stackSet   // &own
	own     stackSet    // the arena of the states' stacks
	class   *[256]uint8 // the grammar's byte classes
	nclass  int
	coarse  bool // the grammar is coarse: a kind's representative stands for the kind
	states  []wstate
	leaves  []int32 // states' leaves
	trans   []int32 // per state, nclass per byte class: 0 unknown, -1 dead, else state+1
	ids     map[string]int32
	aborted bool // the work passed Limits.MaxMaskWork: the tables may be wrong
	tmp     []int32
	key     []byte
	keyTmp  []byte
	remap   []int32 // intern's scratch
	rep     []byte  // kindNext's scratch
	chains  []chain // span's knowledge, by state (wstate.chain)
	// The bulk path's scratch: the chain's states, the tokens (trie
	// order) it leaves undecided, those it cannot allow, and the states
	// along the token last stepped.
	levels    []int32
	probe     []uint64 // per level, see bulk
	probeOK   []bool
	shape     []int32
	shapes    map[string]int32
	acc       [][numKinds]accepted
	path      []int32
	undecided []uint64
	// undBase and bad are bulkSets.exclude's for sig.
	undBase, bad []uint64
	sig          bulkSig
	bound        int  // the chain's bound (see bulk), -1 for none
	shaped       bool // stepUndecided may decide tokens by byShape
	// runs[s]: how far letters and digits in a row lead alike from state
	// s (see alnumRun); states past its end have none followed yet.
	runs []alnumRun
}

type wstate struct {
	off, n   int32 // leaves[off:off+n]
	elected  bool  // succ is elected (see elect)
	succ     int32 // the uniform successor, -1 if none
	uni, not kindSet
	dead     kindSet // of not, those refused
	chain    int32   // index+1 in walker.chains, 0 if none yet
}

// Bounds on what a walker keeps from mask to mask; past one it starts
// over. They hold a Constraint's tables to about 15 MB (16k states'
// summaries 3 MB and transitions 3 MB at 40 byte classes, the frames
// 6 MB, the chains 1.5 MB), next to its mask cache's 64 MiB.
const (
	maxWalkerStates = 1 << 14
	maxWalkerFrames = 1 << 19
	maxWalkerChains = 1 << 11
)

// reset prepares w for a mask of c, forgetting what it learnt unless
// keep is set and it stayed within bounds (and no mask aborted).
func (w *walker) reset(c *Constraint, keep bool) {
	w.s = &w.own
	w.own.g = c.g
	w.class, w.nclass, w.coarse = &c.class, c.nclass, c.coarse
	if !keep || w.aborted || len(w.states) > maxWalkerStates || len(w.own.frames) > maxWalkerFrames || len(w.chains) > maxWalkerChains {
		w.states = w.states[:0]
		w.leaves = w.leaves[:0]
		w.trans = w.trans[:0]
		w.chains = w.chains[:0]
		w.runs = w.runs[:0]
		w.own.frames = w.own.frames[:0]
		clear(w.ids)
	}
	if w.ids == nil {
		w.ids, w.shapes = map[string]int32{}, map[string]int32{}
	}
	w.aborted = false
	w.own.work = 0
	w.own.over = false
}

// intern returns the state of leaves (frames of src) and end, adding it
// if new.
func (w *walker) intern(src *stackSet, leaves []int32, end bool) int32 {
	w.key, w.keyTmp = appendKey(w.key[:0], w.keyTmp, src, leaves, end)
	if id, ok := w.ids[string(w.key)]; ok {
		return id
	}
	id := int32(len(w.states))
	w.ids[string(w.key)] = id
	w.states = append(w.states, wstate{off: int32(len(w.leaves)), n: int32(len(leaves))})
	if src == &w.own {
		w.leaves = append(w.leaves, leaves...)
	} else {
		w.remap = slices.Grow(w.remap[:0], len(src.frames))[:len(src.frames)]
		for i := range w.remap {
			w.remap[i] = -1
		}
		for _, l := range leaves {
			w.leaves = append(w.leaves, copyStack(&w.own.frames, w.remap, src.frames, l))
		}
	}
	w.trans = append(w.trans, noTrans[:w.nclass]...)
	return id
}

// known is the state after byte c from state id (-1 if none) when the
// transition is memoized; ok is false when it is not. It inlines where
// next does not.
func (w *walker) known(id int32, c byte) (next int32, ok bool) {
	x := w.trans[int(id)*w.nclass+int(w.class[c])]
	return max(x-1, -1), x != 0 // x == -1: dead
}

// next is the state after byte c from state id, -1 if none.
func (w *walker) next(id int32, c byte) int32 {
	if n, ok := w.known(id, c); ok {
		return n
	}
	t := int(id)*w.nclass + int(w.class[c])
	st := w.states[id]
	out, end := w.s.step(w.tmp[:0], w.leaves[st.off:st.off+st.n], c)
	w.tmp = out
	r := int32(-1)
	if w.s.work > w.s.g.limits.MaxMaskWork {
		w.aborted = true
		return -1
	}
	if w.s.over { // too ambiguous to follow: allow nothing through it
		w.s.over = false
	} else if len(out) > 0 || end {
		r = w.intern(w.s, out, end)
	}
	w.trans[t] = r + 1
	if r < 0 {
		w.trans[t] = -1
	}
	return r
}

// noTrans is a row of w.trans with no transition known.
var noTrans [256]int32

func (w *walker) live(id int32) bool { return w.states[id].n > 0 }

// computeMask fills mask (all zero) with the tokens m allows, and
// reports whether the mask is m's state's for good: false when m has
// failed (Err), then the mask allows nothing.
func (m *Matcher) computeMask(mask []uint64) bool {
	c := m.c
	v := c.v
	if m.err != nil {
		return false
	}
	if m.end {
		for _, s := range v.stops {
			mask[s>>6] |= 1 << (s & 63)
		}
	}
	if len(m.leaves) == 0 {
		return true
	}
	var w *walker
	if keep := c.dfaMu.TryLock(); keep {
		defer c.dfaMu.Unlock()
		w = &c.dfa
		w.reset(c, true)
	} else { // another mask holds it: learn from scratch
		w = c.pool.Get().(*walker)
		defer c.pool.Put(w)
		w.reset(c, false)
	}
	w.mask = mask
	root := w.intern(&m.s, m.leaves, m.end)
	if !c.noBulk && w.bulk(v, root) {
		w.stepUndecided(v, root)
	} else {
		w.walk(v, 0, root)
	}
	w.mask = nil
	if w.aborted {
		clear(mask)
		m.err = ErrTooCostly
		return false
	}
	return true
}

// walk marks the tokens below trie node n reachable from state id.
func (w *walker) walk(v *Vocab, n, id int32) {
	for ch := n + 1; ch < v.next[n] && !w.aborted; ch = v.next[ch] {
		nid, ok := w.known(id, v.edge[ch])
		if !ok {
			nid = w.next(id, v.edge[ch])
		}
		if nid < 0 {
			continue
		}
		w.set(v, v.tokAt[ch], v.tokAt[ch+1])
		if !w.live(nid) || v.next[ch] == ch+1 {
			continue
		}
		// Inside a string (or a run of digits) every character below ch
		// usually leads to one same state, level after level: then the
		// whole subtree is allowed without walking it, or (a string
		// with a maximum length) the tokens short enough.
		if v.next[ch]-ch > minSkipNodes {
			if all, limit := w.span(v, ch, nid); all {
				w.set(v, v.tokAt[ch+1], v.tokAt[v.next[ch]])
				continue
			} else if limit >= 0 {
				w.setShort(v, ch, limit)
				continue
			}
		}
		w.walk(v, ch, nid)
	}
}

// setShort marks the tokens below trie node n that continue it with at
// most limit characters.
func (w *walker) setShort(v *Vocab, n int32, limit int) {
	lim := int32(limit) + v.nodeChars[n]
	from, to := v.tokAt[n+1], v.tokAt[v.next[n]]
	for i, c := range v.tokChars[from:to] {
		if c <= lim {
			id := v.toks[from+int32(i)]
			w.mask[id>>6] |= 1 << (id & 63)
		}
	}
}

// minSkipNodes is the subtree size below which walking is cheaper than
// proving the whole subtree allowed.
const minSkipNodes = 8

// set marks the tokens toks[from:to].
func (w *walker) set(v *Vocab, from, to int32) {
	for _, id := range v.toks[from:to] {
		w.mask[id>>6] |= 1 << (id & 63)
	}
}
