package grammar

import (
	"cmp"
	"encoding/binary"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// Inside a string most of a large vocabulary is allowed or refused for
// reasons that do not depend on where in the trie a token sits: a token
// of letters is allowed while the string has room for it, one with a
// control character never is. The trie walk pays a node for each such
// token; the bulk path decides them with bitsets over the whole
// vocabulary, as xgrammar and llguidance split tokens into context-
// independent ones and the rest, and steps only the tokens it cannot
// decide (those with a quote or a backslash, and those that are not
// UTF-8) through the walker's transition table.

// bulkSets are a Vocab's token bitsets for the bulk path. Bitsets in
// token ID order have Vocab.MaskWords words; those in trie order (bit i
// is Vocab.toks[i]) have (len(toks)+63)/64.
type bulkSets struct {
	// ascii[c]: the clean tokens holding character c, in ID order; nil
	// when none does. asciiT is the same in trie order.
	ascii, asciiT [128][]uint64
	// nonASCII(T): the clean tokens holding a multi-byte character.
	nonASCII, nonASCIIT []uint64
	// multi: the kinds of the multi-byte characters clean tokens hold,
	// and those their partial characters may become.
	multi kindSet
	// at[i]: the kinds clean tokens hold as their character i (the last
	// one: i or later), from[i] at i or later. A character's role
	// matters only at the levels it is met at.
	at, from [maxBulkLevels + 1]kindSet
	// clean: the tokens in the trie whose bytes are whole valid UTF-8
	// characters, perhaps ending with the start of one (a partial
	// character), in ID order. partialT: those with a partial character;
	// invalidT: the tokens that are not clean; both in trie order.
	clean, partialT, invalidT []uint64
	// partials: the trie indexes of the tokens with a partial character,
	// partialAt the characters before it.
	partials, partialAt []int32
	// Token toks[i]'s bytes are data[off[i]:off[i+1]]: the trie's order.
	data []byte
	off  []uint32
	// shape[i] (trie order) describes a clean token of the form "ASCII
	// letters and digits, one byte, ASCII letters and digits" for
	// stepUndecided (see tokenShape); 0 for other tokens.
	shape []uint32
	// atMost[c]: the clean tokens of at most c characters (a partial
	// one counts) in ID order, for c < len(atMost); long: the longer
	// ones, by characters, with longChars their counts.
	atMost    [][]uint64
	long      []int32
	longChars []int32
}

// bulkCounts is how many character counts get a bitset of their own
// (bulkSets.atMost); longer tokens are listed.
const bulkCounts = 33

// newBulkSets builds v's bulk bitsets. REQUIRES: v's trie is built.
func newBulkSets(v *Vocab) *bulkSets {
	words, wordsT := v.MaskWords(), (len(v.toks)+63)/64
	b := &bulkSets{clean: make([]uint64, words), invalidT: make([]uint64, wordsT), partialT: make([]uint64, wordsT),
		atMost: make([][]uint64, bulkCounts), shape: make([]uint32, len(v.toks))}
	chars := make([]int32, len(v.toks)) // characters of toks[i] (a partial one counts), -1 if invalid
	var ext []int                       // kinds a partial character may become
	b.off = make([]uint32, 1, len(v.toks)+1)
	for i, id := range v.toks {
		p := v.piece(id)
		b.data = append(b.data, p...)
		b.off = append(b.off, uint32(len(b.data)))
		var whole int
		whole, ext = wholePrefix(p, ext[:0])
		if whole < len(p) && len(ext) == 0 {
			chars[i] = -1
			setBit(b.invalidT, int32(i))
			continue
		}
		setBit(b.clean, id)
		b.shape[i] = tokenShape(p)
		n := int32(0)
		for j := 0; j < whole; n++ {
			if p[j] < utf8.RuneSelf {
				b.at[min(n, maxBulkLevels)].add(int(p[j]))
				c := p[j]
				if b.ascii[c] == nil {
					b.ascii[c], b.asciiT[c] = make([]uint64, words), make([]uint64, wordsT)
				}
				setBit(b.ascii[c], id)
				setBit(b.asciiT[c], int32(i))
				j++
				continue
			}
			_, size := utf8.DecodeRune(p[j:])
			b.addMulti(v, id, int32(i), n, charKind(p[j:j+size]))
			j += size
		}
		if whole < len(p) {
			setBit(b.partialT, int32(i))
			b.partials = append(b.partials, int32(i))
			b.partialAt = append(b.partialAt, n)
			for _, k := range ext {
				b.addMulti(v, id, int32(i), n, k)
			}
			n++
		}
		chars[i] = n
	}
	for c := range b.atMost {
		b.atMost[c] = make([]uint64, words)
	}
	var long []int32 // trie indexes of the long tokens
	for i, n := range chars {
		if n >= bulkCounts {
			long = append(long, int32(i))
		} else if n >= 0 {
			setBit(b.atMost[n], v.toks[i])
		}
	}
	slices.SortStableFunc(long, func(a, c int32) int { return cmp.Compare(chars[a], chars[c]) })
	for _, i := range long {
		b.long = append(b.long, v.toks[i])
		b.longChars = append(b.longChars, chars[i])
	}
	b.from[maxBulkLevels] = b.at[maxBulkLevels]
	for i := maxBulkLevels - 1; i >= 0; i-- {
		b.from[i] = b.at[i]
		b.from[i].or(&b.from[i+1])
	}
	for c := 1; c < bulkCounts; c++ {
		for w, x := range b.atMost[c-1] {
			b.atMost[c][w] |= x
		}
	}
	return b
}

// addMulti records that token id (trie index i) holds, as character n,
// one of kind k (a multi-byte kind).
func (b *bulkSets) addMulti(v *Vocab, id, i, n int32, k int) {
	b.multi.add(k)
	b.at[min(n, maxBulkLevels)].add(k)
	if b.nonASCII == nil {
		b.nonASCII, b.nonASCIIT = make([]uint64, v.MaskWords()), make([]uint64, (len(v.toks)+63)/64)
	}
	setBit(b.nonASCII, id)
	setBit(b.nonASCIIT, i)
}

// wholePrefix returns how many bytes of p are whole valid characters
// and, when the rest is the start of a valid character, the kinds that
// character may become (appended to ext); none when p is not whole
// characters and such a start.
func wholePrefix(p []byte, ext []int) (int, []int) {
	whole := 0
	for whole < len(p) {
		r, size := utf8.DecodeRune(p[whole:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		whole += size
	}
	rest := p[whole:]
	if len(rest) == 0 || len(rest) > 3 {
		return whole, ext
	}
	// Complete rest with each class of continuation byte: the valid
	// completions are the kinds it may become.
	var buf [4]byte
	need := 0
	switch c := rest[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 2
	case c >= 0xE0 && c <= 0xEF:
		need = 3
	case c >= 0xF0 && c <= 0xF4:
		need = 4
	}
	if need <= len(rest) {
		return whole, ext
	}
	combos := 1
	for range need - len(rest) {
		combos *= len(contRep)
	}
	for x := range combos {
		ch := append(buf[:0], rest...)
		for y := x; len(ch) < need; y /= len(contRep) {
			ch = append(ch, contRep[y%len(contRep)])
		}
		if r, size := utf8.DecodeRune(ch); size == need && r != utf8.RuneError {
			ext = append(ext, charKind(ch))
		}
	}
	return whole, ext
}

func setBit(s []uint64, i int32) { s[i>>6] |= 1 << (i & 63) }

// tokenShape packs a token made of k ASCII letters and digits, then a
// byte x that is not one, then n more letters and digits (k, n < 256):
// bit 31 set, k in bits 16-23, x in 8-15, n in 0-7. It is 0 for any
// other token.
func tokenShape(p []byte) uint32 {
	k := 0
	for k < len(p) && isAlnum(p[k]) {
		k++
	}
	n := len(p) - k - 1
	if n < 0 || k > 0xFF || n > 0xFF {
		return 0
	}
	for _, c := range p[k+1:] {
		if !isAlnum(c) {
			return 0
		}
	}
	return 1<<31 | uint32(k)<<16 | uint32(p[k])<<8 | uint32(n)
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// maxBulkLevels bounds the chain of uniform successors the bulk path
// follows: a string longer than this is walked.
const maxBulkLevels = 64

// minBulkKinds is the fewest ASCII characters that must lead from the
// root to its uniform successor for the bulk path to pay: inside strings
// nearly all do, elsewhere a handful.
const minBulkKinds = 32

// charRole is what a character kind does along a chain of uniform
// successors.
type charRole uint8

const (
	roleKeep charRole = iota // uniform at every level under the bound, refused at the bound
	roleDead                 // refused at every level
	roleExit                 // anything else: the walk decides
)

// bulk fills w.mask with the tokens that the chain of uniform successors
// from state root decides, and w.undecided (trie order) with the tokens
// it does not; it reports false, doing nothing, when root is not inside
// something string-like enough for that to pay. A token of whole
// characters is allowed when each of its characters is a keep character
// and it has at most bound characters (bound < 0: any number); refused
// when it holds only keep and dead characters otherwise; undecided when
// it holds an exit character or is not whole characters.
func (w *walker) bulk(v *Vocab, root int32) bool {
	b := v.bulk
	// Follow the chain: levels[i] is the state after i characters.
	levels := w.levels[:0]
	bound := -1
	for s := root; ; {
		levels = append(levels, s)
		if len(levels) > maxBulkLevels {
			w.levels = levels
			return false
		}
		if !w.states[s].elected {
			w.elect(s)
		}
		next := w.states[s].succ
		if next < 0 {
			bound = len(levels) - 1
			break
		}
		if next == s {
			break
		}
		s = next
	}
	w.levels, w.bound = levels, bound
	if w.aborted {
		return false
	}
	if bound == 0 { // no character leads on: little to decide
		return w.stringExits(v, root)
	}
	// probe[i]: which leaves of level i take the character that leads
	// to its uniform successor; probeOK[i] false where that cannot be
	// told (see acceptors). Levels whose leaves are the same elements
	// (a string's levels differ only in their stacks below) share
	// acceptors' answers: shape[i] indexes them in w.acc.
	probe, probeOK, shape := w.probe[:0], w.probeOK[:0], w.shape[:0]
	clear(w.shapes)
	w.acc = w.acc[:0]
	for i, s := range levels {
		w.key = w.key[:0]
		st := w.states[s]
		for _, l := range w.leaves[st.off : st.off+st.n] {
			f := w.own.frames[l]
			e := w.s.g.elems[f.pos]
			w.key = binary.AppendUvarint(append(binary.AppendUvarint(w.key, uint64(e.arg)), e.kind), uint64(f.sub))
		}
		id, ok := w.shapes[string(w.key)]
		if !ok {
			id = int32(len(w.acc))
			w.shapes[string(w.key)] = id
			if len(w.acc) < cap(w.acc) {
				w.acc = w.acc[:len(w.acc)+1]
				clear(w.acc[id][:])
			} else {
				w.acc = append(w.acc, [numKinds]accepted{})
			}
		}
		shape = append(shape, id)
		var a uint64
		ok = false
		if i != bound {
			for _, c := range uniformProbes {
				if w.next(s, c) == w.states[s].succ {
					a, ok = w.acceptors(s, []byte{c})
					break
				}
			}
		} else {
			ok = true // nothing is uniform here: only refusal matters
		}
		probe, probeOK = append(probe, a), append(probeOK, ok)
	}
	w.probe, w.probeOK, w.shape = probe, probeOK, shape
	role := func(k int) charRole {
		keep, dead := true, true
		last := len(levels) - 1
		for i, s := range levels {
			// Level i is met by the characters at i; a loop's last
			// level by every later character too.
			if need := b.at[i].has(k) || bound < 0 && i == last && b.from[i].has(k); !need {
				continue
			}
			var uni, d bool
			acc := &w.acc[shape[i]][k]
			if !acc.known {
				w.rep = kindBytes(w.rep[:0], k)
				acc.leaves, acc.ok = w.acceptors(s, w.rep)
				acc.known = true
			}
			if a := acc.leaves; acc.ok && probeOK[i] {
				// The same leaves take it as take the probe: it leads
				// where the probe does.
				uni, d = a != 0 && a == probe[i], a == 0
			} else {
				n := w.kindNext(s, k)
				uni, d = n >= 0 && n == w.states[s].succ, n < 0
			}
			if i == bound { // keep characters are refused here
				keep = keep && d
			} else {
				keep = keep && uni
			}
			dead = dead && d
			if !keep && !dead {
				return roleExit
			}
		}
		switch {
		case keep:
			return roleKeep
		case dead:
			return roleDead
		}
		return roleExit
	}
	var roles [128]charRole
	keeps := 0
	for c := range 128 {
		if b.ascii[c] == nil {
			continue
		}
		roles[c] = role(c)
		if roles[c] == roleKeep {
			keeps++
		}
	}
	if keeps < minBulkKinds || w.aborted {
		return false
	}
	// Multi-byte characters count as one: keep when all are, dead when
	// all are, else exit (also for a grammar that is not coarse, where a
	// kind's representative does not stand for its characters).
	multi := roleKeep
	if b.nonASCII != nil {
		multi = roleExit
		if w.coarse {
			keep, dead := true, true
			for i, word := range b.multi {
				for ; word != 0 && (keep || dead); word &= word - 1 {
					r := role(i*64 + bits.TrailingZeros64(word))
					keep = keep && r == roleKeep
					dead = dead && r == roleDead
				}
			}
			if keep {
				multi = roleKeep
			} else if dead {
				multi = roleDead
			}
		}
		if w.aborted {
			return false
		}
	}
	// Consecutive masks in a string see the same roles: the bitsets
	// they give are kept.
	if sig := (bulkSig{v, roles, multi}); w.sig != sig { // a zero sig has no Vocab
		w.sig = sig
		w.undBase, w.bad = b.exclude(w.undBase, w.bad, &roles, multi)
	}
	und := append(w.undecided[:0], w.undBase...)
	if multi == roleKeep && bound >= 0 {
		// A partial character at the bound: refused characters of its
		// kinds may be refused only at a later byte.
		for i, at := range b.partialAt {
			if int(at) == bound {
				setBit(und, b.partials[i])
			}
		}
	}
	w.undecided = und
	w.shaped = w.alnumKeep(b)
	bad := w.bad
	short := b.atMost[bulkCounts-1]
	if bound >= 0 && bound < bulkCounts {
		short = b.atMost[bound]
	}
	for i, x := range b.clean {
		w.mask[i] |= x & short[i] &^ bad[i]
	}
	for i, id := range b.long {
		if bound >= 0 && int(b.longChars[i]) > bound {
			break
		}
		if b.clean[id>>6]&^bad[id>>6]>>(id&63)&1 != 0 {
			setBit(w.mask, id)
		}
	}
	return true
}

// maxExits bounds the bytes a state at the end of a string may go on
// with for stringExits to step its tokens rather than walk them.
const maxExits = 8

// stringExits handles a state where no character leads on uniformly but
// a few bytes lead into something string-like, as at the longest local
// part of an email address, where only '.' and '@' go on: the walk
// would visit every node below those bytes, while most of their tokens
// are such a byte and then letters and digits, which byShape decides
// with a transition and a run. It leaves every token undecided for
// stepUndecided (which clears those with a refused first byte at once)
// and reports true when no letter or digit goes on here (a token that
// starts with one is refused), every byte that does leads to a state
// where letters and digits lead alike, and one that is not a quote
// leads to a state that takes a letter; false, doing nothing,
// otherwise. Elsewhere the walk is faster: it prunes below punctuation
// at once, and below a quote that opens a JSON string it proves most of
// the subtree whole with span.
func (w *walker) stringExits(v *Vocab, root int32) bool {
	var exits [maxExits]int32
	var quote [maxExits]bool
	n := 0
	for ch := int32(1); ch < v.next[0]; ch = v.next[ch] {
		c := v.edge[ch]
		e := w.next(root, c)
		if e < 0 {
			continue
		}
		if isAlnum(c) || n == maxExits {
			return false
		}
		exits[n], quote[n] = e, c == '"'
		n++
	}
	// Cheap first: one exit that is not a quote must take a letter.
	strs := 0
	for i, e := range exits[:n] {
		if !quote[i] && w.next(e, 'a') >= 0 {
			strs++
		}
	}
	if strs == 0 {
		return false
	}
	for _, e := range exits[:n] {
		if w.alnumNext(e) == -2 {
			return false
		}
	}
	if w.aborted {
		return false
	}
	und := slices.Grow(w.undecided[:0], (len(v.toks)+63)/64)[:(len(v.toks)+63)/64]
	for i := range und {
		und[i] = ^uint64(0)
	}
	if r := len(v.toks) & 63; r != 0 {
		und[len(und)-1] = 1<<r - 1
	}
	w.undecided = und
	w.shaped = true // byShape sees only tokens with k = 0
	return true
}

// acceptors returns which leaves of state s (bit j: its j-th) take the
// whole character ch, without stepping the matcher: the state after ch
// is the union of those leaves' continuations, so characters taken by
// the same leaves lead to the same state, and a character no leaf takes
// is refused. ok is false where a leaf's answer needs the matcher: more
// than 64 leaves, a leaf inside a character, or a byte term that takes
// ch's first byte of several.
func (w *walker) acceptors(s int32, ch []byte) (a uint64, ok bool) {
	st := w.states[s]
	if st.n > 64 {
		return 0, false
	}
	g := w.s.g
	for j, l := range w.leaves[st.off : st.off+st.n] {
		f := w.own.frames[l]
		if f.sub != 0 {
			return 0, false
		}
		e := g.elems[f.pos]
		if e.kind == kTerm {
			if g.sets[e.arg].has(ch[0]) {
				if len(ch) > 1 {
					return 0, false
				}
				a |= 1 << j
			}
			continue
		}
		var sub uint32
		for i, c := range ch {
			done, next := g.cls[e.arg].step(sub, c)
			switch last := i == len(ch)-1; {
			case !done && next == 0: // refused
			case done != last || next != 0 && last:
				return 0, false // a character ending early or going on
			case last:
				a |= 1 << j
			}
			if next == 0 {
				break
			}
			sub = next
		}
	}
	return a, true
}

// accepted memoizes acceptors for one shape of level and one kind.
type accepted struct {
	leaves    uint64
	ok, known bool
}

// bulkSig is what bulkSets.exclude's bitsets depend on.
type bulkSig struct {
	v     *Vocab
	roles [128]charRole
	multi charRole
}

// exclude returns, in und (trie order), the tokens that characters of
// these roles leave undecided: invalid ones, those with an exit (with
// multi dead, those with a partial character too: its character may be
// refused only at a later byte); and in bad (ID order), those that hold
// a character that is not keep. It reuses the buffers.
func (b *bulkSets) exclude(und, bad []uint64, roles *[128]charRole, multi charRole) ([]uint64, []uint64) {
	und = append(und[:0], b.invalidT...)
	bad = slices.Grow(bad[:0], len(b.clean))[:len(b.clean)]
	clear(bad)
	for c, r := range roles {
		if b.ascii[c] == nil {
			continue
		}
		if r == roleExit {
			orInto(und, b.asciiT[c])
		}
		if r != roleKeep {
			orInto(bad, b.ascii[c])
		}
	}
	switch multi {
	case roleExit:
		orInto(und, b.nonASCIIT)
	case roleDead:
		orInto(und, b.partialT)
	}
	if multi != roleKeep {
		orInto(bad, b.nonASCII)
	}
	return und, bad
}

// clearRange clears bits [from, to) of s.
func clearRange(s []uint64, from, to int32) {
	for ; from < to && from&63 != 0; from++ {
		s[from>>6] &^= 1 << (from & 63)
	}
	for ; from+64 <= to; from += 64 {
		s[from>>6] = 0
	}
	for ; from < to; from++ {
		s[from>>6] &^= 1 << (from & 63)
	}
}

// orInto sets in dst the bits of src.
func orInto(dst, src []uint64) {
	for i, x := range src {
		dst[i] |= x
	}
}

// stepUndecided follows each token bulk left undecided from state root
// through the transition table, byte by byte, and marks those that pass.
// Their bytes lie together in trie order (bulkSets.data), and a token
// starts from the state its predecessor reached after the bytes they
// share, so it costs a step per trie node on the way to them without
// the walk's scattered reads of every node. Where bulk allows it
// (walker.shaped), a token of letters and digits, one byte, letters and
// digits is decided by byShape instead.
func (w *walker) stepUndecided(v *Vocab, root int32) {
	b := v.bulk
	// The tokens that start with a refused byte are refused: clear them
	// a first byte at a time.
	for ch := int32(1); ch < v.next[0]; ch = v.next[ch] {
		if w.next(root, v.edge[ch]) < 0 {
			clearRange(w.undecided, v.tokAt[ch], v.tokAt[v.next[ch]])
		}
	}
	path := append(w.path[:0], root) // path[d]: the state after prev[:d]
	var prev []byte
	for i, word := range w.undecided {
		for ; word != 0; word &= word - 1 {
			t := i*64 + bits.TrailingZeros64(word)
			if sh := b.shape[t]; w.shaped && sh != 0 {
				allowed, known := w.byShape(sh)
				if allowed {
					setBit(w.mask, v.toks[t])
				}
				if known || w.aborted {
					continue
				}
			}
			p := b.data[b.off[t]:b.off[t+1]]
			d := 0
			for d < len(path)-1 && d < len(p) && p[d] == prev[d] {
				d++
			}
			path = path[:d+1]
			s := path[d]
			for _, c := range p[d:] {
				if n, ok := w.known(s, c); ok {
					s = n
				} else {
					s = w.next(s, c)
				}
				if s < 0 {
					break
				}
				path = append(path, s)
			}
			if w.aborted {
				w.path = path
				return
			}
			if s >= 0 {
				setBit(w.mask, v.toks[t])
			}
			prev = p
		}
	}
	w.path = path
}

// alnumKeep reports whether every ASCII letter and digit that clean
// tokens hold is a keep character under w.sig's roles: then the letters
// and digits a token starts with lead along the chain of uniform
// successors, level by level, and byShape applies.
func (w *walker) alnumKeep(b *bulkSets) bool {
	for c := range byte(utf8.RuneSelf) {
		if isAlnum(c) && b.ascii[c] != nil && w.sig.roles[c] != roleKeep {
			return false
		}
	}
	return true
}

// byShape decides a token of shape sh (see tokenShape) inside the chain
// bulk followed, where letters and digits are keep characters: its k
// letters and digits lead to level k's state (or meet the chain's bound
// and are refused), its byte x from there by one transition, and the
// letters and digits after it by the run they start there (alnumRun).
// known is false when the run cannot tell: the token must be stepped.
func (w *walker) byShape(sh uint32) (allowed, known bool) {
	k := int(sh >> 16 & 0xFF)
	if w.bound >= 0 && k > w.bound {
		return false, true // a keep character meets the bound
	}
	s, x := w.levels[min(k, len(w.levels)-1)], byte(sh>>8)
	e, ok := w.known(s, x)
	if !ok {
		e = w.next(s, x)
	}
	if e < 0 {
		return false, true
	}
	m := int(sh & 0xFF)
	n, end := w.alnumRun(e, m)
	switch {
	case m <= n || end == runLoops:
		return true, true
	case end == runDies:
		return false, true
	}
	return false, false
}

// alnumRun is what walker.runs keeps for a state.
type alnumRun struct {
	at  int32 // the state after n of them, plus one (0: none yet)
	n   uint8 // how many were followed
	end uint8 // how the run ends
}

// How a run of ASCII letters and digits from a state ends (alnumRun.end).
const (
	runOpen  = iota // followed no further yet
	runDies         // the next one is refused, whichever it is
	runLoops        // any number more are taken
	runMixed        // the next ones do not all lead alike (or the run is too long to follow)
)

// maxAlnumRun bounds how far alnumRun follows a run.
const maxAlnumRun = 0xFF

// alnumRun returns how many ASCII letters and digits in a row state id
// takes while they all lead to one same state, level by level, and what
// comes after: runDies, runLoops or runMixed, or runOpen when it stopped
// looking after want of them. walker.runs keeps what was followed, and
// a later call goes on from there: following a run meets new states,
// and stepping the matcher for their transitions is what a mask pays
// most for, so it follows no further than a token needs.
func (w *walker) alnumRun(id int32, want int) (int, uint8) {
	if int(id) >= len(w.runs) {
		w.runs = append(w.runs, make([]alnumRun, len(w.states)-len(w.runs))...)
	}
	r := w.runs[id]
	if r.end != runOpen || int(r.n) >= want {
		return int(r.n), r.end
	}
	n, end, s := int(r.n), r.end, id
	if r.at > 0 {
		s = r.at - 1
	}
	for end == runOpen && n < want && n < maxAlnumRun && !w.aborted {
		next := w.alnumNext(s)
		switch {
		case next == -1:
			end = runDies
		case next == -2:
			end = runMixed
		case next == s:
			end = runLoops
		default:
			s = next
			n++
		}
	}
	if end == runOpen && n >= maxAlnumRun {
		end = runMixed
	}
	w.runs[id] = alnumRun{at: s + 1, n: uint8(n), end: end}
	return n, end
}

// alnumNext is the state every ASCII letter and digit leads to from
// state id: -1 when all are refused, -2 when they differ.
func (w *walker) alnumNext(id int32) int32 {
	r := int32(-3)
	for _, c := range alnumBytes {
		n, ok := w.known(id, c)
		if !ok {
			n = w.next(id, c)
		}
		if r != -3 && n != r {
			return -2
		}
		r = n
	}
	return r
}

// alnumBytes are the ASCII letters and digits.
var alnumBytes = func() []byte {
	var out []byte
	for c := range byte(utf8.RuneSelf) {
		if isAlnum(c) {
			out = append(out, c)
		}
	}
	return out
}()
