package grammar

import (
	"math/bits"
	"unicode/utf8"
)

// A character kind groups the valid UTF-8 characters that no grammar
// tells apart once it is coarse (see coarse): each ASCII
// character is its own kind (0-127); a multi-byte character's kind is its
// lead byte's class and its continuation bytes' classes. Classes split
// the non-ASCII bytes where UTF-8 itself does (overlong forms,
// surrogates, the last plane), so every kind holds only valid characters
// and one representative stands for all of its kind.
const numKinds = 128 + 8*27

// kindSet is a set of character kinds.
type kindSet [(numKinds + 63) / 64]uint64

func (s *kindSet) add(k int)      { s[k>>6] |= 1 << (k & 63) }
func (s *kindSet) has(k int) bool { return s[k>>6]>>(k&63)&1 != 0 }

func (s *kindSet) or(t *kindSet) {
	for i := range s {
		s[i] |= t[i]
	}
}

// ascii reports whether s holds only ASCII characters.
func (s *kindSet) ascii() bool {
	for _, w := range s[2:] {
		if w != 0 {
			return false
		}
	}
	return true
}

// leadClass is the class of a multi-byte character's lead byte, 0-7.
func leadClass(c byte) int {
	switch {
	case c < 0xE0:
		return 0
	case c == 0xE0:
		return 1
	case c < 0xED:
		return 2
	case c == 0xED:
		return 3
	case c < 0xF0:
		return 4
	case c == 0xF0:
		return 5
	case c < 0xF4:
		return 6
	}
	return 7
}

// leadRep and contRep are a representative of each lead and
// continuation byte class (continuations: 80-8F, 90-9F, A0-BF).
var (
	leadRep = [8]byte{0xC2, 0xE0, 0xE1, 0xED, 0xEE, 0xF0, 0xF1, 0xF4}
	contRep = [3]byte{0x80, 0x90, 0xA0}
)

// charKind is the kind of ch, one valid UTF-8 character.
func charKind(ch []byte) int {
	if ch[0] < utf8.RuneSelf {
		return int(ch[0])
	}
	k, mult := 128+leadClass(ch[0])*27, 9
	for _, c := range ch[1:] {
		k += int(min(c-0x80, 0x20)>>4) * mult
		mult /= 3
	}
	return k
}

// kindBytes appends a representative character of kind k to dst.
func kindBytes(dst []byte, k int) []byte {
	if k < 128 {
		return append(dst, byte(k))
	}
	k -= 128
	lead := k / 27
	dst = append(dst, leadRep[lead])
	n := 2 // continuation bytes after the lead
	switch {
	case lead == 0:
		n = 1
	case lead >= 5:
		n = 3
	}
	for i, div := 0, 9; i < n; i, div = i+1, div/3 {
		dst = append(dst, contRep[k/div%3])
	}
	return dst
}

// byteClasses are the ranges of non-ASCII bytes that kinds do not tell
// apart.
var byteClasses = [...]byteRange{{0x80, 0x8F}, {0x90, 0x9F}, {0xA0, 0xBF}, {0xC0, 0xC1}, {0xC2, 0xDF},
	{0xE0, 0xE0}, {0xE1, 0xEC}, {0xED, 0xED}, {0xEE, 0xEF}, {0xF0, 0xF0}, {0xF1, 0xF3}, {0xF4, 0xF4}, {0xF5, 0xFF}}

// partition numbers the n classes of bytes that every byte set of g
// holds all or none of: a matcher step over any byte of a class gives the
// same stacks, so a walk steps each class once.
func (g *Grammar) partition() (class [256]uint8, n int) {
	split := func(s *byteSet) {
		var next [256][2]int16 // (class, in s) → new class + 1
		n := int16(0)
		for c := range 256 {
			in := 0
			if s.has(byte(c)) {
				in = 1
			}
			if next[class[c]][in] == 0 {
				n++
				next[class[c]][in] = n
			}
			class[c] = uint8(next[class[c]][in] - 1)
		}
	}
	for i := range g.sets {
		split(&g.sets[i])
	}
	for _, c := range g.cls {
		for _, seq := range c.seqs {
			for i := range seq {
				split(&seq[i])
			}
		}
	}
	for _, k := range class {
		n = max(n, int(k)+1)
	}
	return class, n
}

// coarse reports whether class (Grammar.partition) never tells apart two
// bytes of one of byteClasses: then a character's kind decides all a
// grammar does with it. A grammar that names particular non-ASCII
// characters (an enum of "é") is not coarse.
func coarse(class *[256]uint8) bool {
	for _, r := range byteClasses {
		for c := int(r.lo); c <= int(r.hi); c++ {
			if class[c] != class[r.lo] {
				return false
			}
		}
	}
	return true
}

// maxChars caps the characters a Vocab counts below a node, and the
// chains a walker follows.
const maxChars = 255

// charSummer gathers, for NewVocab once the trie is built, what each node's
// tokens continue it with: whether always whole characters, their kinds
// and the most characters.
type charSummer struct {
	unclean []bool
	kinds   []kindSet
	chars   []uint8
	prefix  []int32 // Vocab.nodeChars
	cuts    []int32 // add's scratch
}

// newCharSummer returns a charSummer for a trie of n nodes.
func newCharSummer(n int) *charSummer {
	return &charSummer{unclean: make([]bool, n), kinds: make([]kindSet, n), chars: make([]uint8, n), prefix: make([]int32, n)}
}

// add records token p, whose prefix p[:d+1] is node path[d] (the empty
// prefix is the root, node 0). UTF-8 decodes uniquely from the end, so
// the cuts after which p continues with whole characters are those met
// by stepping back a valid character at a time from the end. It returns
// how many whole characters p ends with.
func (s *charSummer) add(p []byte, path []int32) int32 {
	var ks kindSet
	n, total := 0, 0
	next := len(p) // p[next:] is whole characters
	cuts := s.cuts[:0]
	ok := true
	for c := len(p) - 1; c >= 0; c-- {
		node := int32(0)
		if c > 0 {
			node = path[c-1]
		}
		if ok && utf8.RuneStart(p[c]) {
			r, size := utf8.DecodeRune(p[c:next])
			if size != next-c || r == utf8.RuneError && size == 1 {
				ok = false // not a character ending where the next begins
			} else {
				ks.add(charKind(p[c:next]))
				n = min(n+1, maxChars)
				total++
				next = c
				s.kinds[node].or(&ks)
				s.chars[node] = max(s.chars[node], uint8(n))
				cuts = append(cuts, node)
				continue
			}
		}
		s.unclean[node] = true
	}
	// The prefix of the node at each cut ends with the characters p has
	// before it, up to where p's stop being whole.
	for i, node := range cuts {
		s.prefix[node] = int32(total - i - 1)
	}
	s.cuts = cuts
	return int32(total)
}

// intern returns each node's index into the distinct kind sets (-1 for
// an unclean node), its character counts and the sets.
func (s *charSummer) intern() (below []int32, chars []uint8, sets []kindSet) {
	idx := map[kindSet]int32{}
	below = make([]int32, len(s.kinds))
	for i := range s.kinds {
		if s.unclean[i] {
			below[i] = -1
			continue
		}
		id, ok := idx[s.kinds[i]]
		if !ok {
			id = int32(len(sets))
			sets = append(sets, s.kinds[i])
			idx[s.kinds[i]] = id
		}
		below[i] = id
	}
	return below, s.chars, sets
}

// span says which tokens below trie node n state id (reached at n)
// allows, when it can tell without walking: all of them, or those that
// continue n with at most limit characters (limit >= 0). They must all
// continue n with whole characters of kinds that lead, character after
// character, to one same state (each level's uniform successor); where
// that stops, every kind must be refused, so the tokens that go on are.
// limit < 0 (and not all) means walk.
func (w *walker) span(v *Vocab, n, id int32) (all bool, limit int) {
	k := v.below[n]
	h := int(v.chars[n])
	if k < 0 || h == maxChars { // a capped count proves nothing
		return false, -1
	}
	set := &v.kinds[k]
	if !w.coarse && !set.ascii() {
		return false, -1
	}
	c := w.chainOf(id)
	j := h // the fewest levels a kind of set stays uniform, if under h
	for i, word := range set {
		for ; word != 0; word &= word - 1 {
			k := i*64 + bits.TrailingZeros64(word)
			ch := &w.chains[c]
			r := int(ch.run[k])
			if r == int(ch.done[k]) && r != forever && r < h { // not looked at far enough yet
				r = w.run(c, k, h)
				ch = &w.chains[c]
			}
			if r < h && !ch.dead.has(k) { // neither uniform nor refused at level r
				return false, -1
			}
			j = min(j, r)
		}
	}
	if j == h {
		return true, 0
	}
	ch := &w.chains[c]
	for i, word := range set {
		for ; word != 0; word &= word - 1 {
			if k := i*64 + bits.TrailingZeros64(word); int(ch.run[k]) != j || !ch.dead.has(k) {
				return false, -1
			}
		}
	}
	return false, j
}

// chain is what span learns about the chain of uniform successors from
// one state, kind by kind.
type chain struct {
	states []int32 // the chain's states, as far as it was followed
	// Kind k leads to the uniform successor at the levels under run[k];
	// levels under done[k] were looked at: run[k] < done[k] means that
	// at level run[k] it does not, and dead says whether it is refused
	// there. forever (as run) marks a kind uniform for good.
	run, done [numKinds]uint8
	dead      kindSet
}

// forever is a run that never ends: the chain loops.
const forever = 255

// chainOf returns the index in w.chains of state id's chain, made empty
// the first time.
func (w *walker) chainOf(id int32) int32 {
	st := &w.states[id]
	if st.chain == 0 {
		if len(w.chains) < cap(w.chains) {
			w.chains = w.chains[:len(w.chains)+1]
			c := &w.chains[len(w.chains)-1]
			c.states = c.states[:0]
			c.run, c.done, c.dead = [numKinds]uint8{}, [numKinds]uint8{}, kindSet{}
		} else {
			w.chains = append(w.chains, chain{})
		}
		w.chains[len(w.chains)-1].states = append(w.chains[len(w.chains)-1].states, id)
		st.chain = int32(len(w.chains))
	}
	return st.chain - 1
}

// run is how many levels of chain c kind k leads to the uniform
// successor, looked at to level h at least (forever for a loop).
func (w *walker) run(c int32, k, h int) int {
	ch := &w.chains[c]
	if ch.run[k] < ch.done[k] || ch.run[k] == forever || int(ch.done[k]) >= h {
		return int(ch.run[k])
	}
	for i := int(ch.done[k]); i < h; i++ {
		if i == len(ch.states) { // the kind was uniform at i-1, so the chain goes on
			ch.states = append(ch.states, w.states[ch.states[i-1]].succ)
		}
		s := ch.states[i]
		uni, dead := w.classify(s, k)
		ch = &w.chains[c] // classify may grow w.chains' states (not w.chains)
		if !uni {
			ch.run[k], ch.done[k] = uint8(i), uint8(i+1)
			if dead {
				ch.dead.add(k)
			}
			return i
		}
		if w.states[s].succ == s {
			ch.run[k], ch.done[k] = forever, forever
			return forever
		}
	}
	ch.run[k], ch.done[k] = uint8(h), uint8(h)
	return h
}

// uniformProbes are the characters whose successors elect a state's
// uniform successor: a letter, a digit and a space, so inside strings it
// is the next character's state and inside numbers the next digit's.
var uniformProbes = [...]byte{'a', 'e', '0', '5', ' '}

// classify reports whether kind k leads from state id to its uniform
// successor, and if not, whether it is refused. Kinds are classified
// lazily and remembered per state, so a state pays matcher steps only
// for the kinds the trie actually offers below it.
func (w *walker) classify(id int32, k int) (uni, dead bool) {
	if !w.states[id].elected {
		w.elect(id)
	}
	st := &w.states[id]
	if !st.uni.has(k) && !st.not.has(k) {
		s := w.kindNext(id, k)
		st = &w.states[id] // kindNext may grow w.states
		switch {
		case s >= 0 && s == st.succ:
			st.uni.add(k)
		case s < 0:
			st.dead.add(k)
			fallthrough
		default:
			st.not.add(k)
		}
	}
	return st.uni.has(k), st.dead.has(k)
}

// elect sets state id's uniform successor: the live state most probes
// lead to, -1 if none.
func (w *walker) elect(id int32) {
	var cand [len(uniformProbes)]int32
	best, bestN := int32(-1), 0
	for i, c := range uniformProbes {
		cand[i] = w.next(id, c)
		if cand[i] < 0 || !w.live(cand[i]) {
			continue
		}
		n := 0
		for _, x := range cand[:i+1] {
			if x == cand[i] {
				n++
			}
		}
		if n > bestN {
			best, bestN = cand[i], n
		}
	}
	w.states[id].elected = true
	w.states[id].succ = best
}

// kindNext is the state after kind k's representative from state id, -1
// if none.
func (w *walker) kindNext(id int32, k int) int32 {
	w.rep = kindBytes(w.rep[:0], k)
	for _, c := range w.rep {
		if id = w.next(id, c); id < 0 {
			return -1
		}
	}
	return id
}
