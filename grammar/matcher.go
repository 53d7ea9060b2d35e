package grammar

// frame is one level of a pushdown stack: pos is the next element to
// match in some alternative, parent the frame to return to (-1: the
// bottom). Frames live in an arena and are shared between stacks.
type frame struct {
	pos, parent int32
	// sub is a kClass leaf's progress through a multi-byte character:
	// the bytes consumed in the low 3 bits, above them the class's
	// sequences that still match. 0 at a character's start.
	sub uint32
}

// stackSet is a Matcher state's machinery: an arena of frames and the
// leaves (frames whose element is a byte class) of every live stack.
// Consuming a byte replaces each leaf the byte matches by the leaves its
// continuation expands to.
type stackSet struct {
	g      *Grammar
	frames []frame
	over   bool // a state needed more than MaxStacks leaves
	base   int  // where the leaves of the state being built start in out
	work   int  // stack operations so far, for Limits.MaxMaskWork
	budget int  // expansions left to this step, from Limits.MaxStepWork
}

// expand adds to out the leaves reached from position pos in a frame
// whose parent is parent, and reports whether the stack can empty (the
// grammar can end there).
func (s *stackSet) expand(out []int32, pos, parent int32) ([]int32, bool) {
	g := s.g
	for {
		s.work++
		if s.budget--; s.budget < 0 {
			s.over = true // too many ways through nullable rules
			return out, false
		}
		e := g.elems[pos]
		switch e.kind {
		case kEnd:
			if parent < 0 {
				return out, true
			}
			f := s.frames[parent]
			pos, parent = f.pos, f.parent
		case kTerm, kClass:
			return s.addLeaf(out, pos, parent, 0), false
		default: // kRef
			base := parent
			if g.elems[pos+1].kind != kEnd { // not a tail call: keep the continuation
				base = int32(len(s.frames))
				s.frames = append(s.frames, frame{pos: pos + 1, parent: parent})
			}
			end := false
			for _, a := range g.rules[e.arg] {
				var acc bool
				out, acc = s.expand(out, a, base)
				end = end || acc
			}
			return out, end
		}
	}
}

// addLeaf adds the leaf (pos, parent, sub) unless an equal stack is
// among those the current step added (out[s.base:]).
func (s *stackSet) addLeaf(out []int32, pos, parent int32, sub uint32) []int32 {
	s.work += len(out) - s.base + 1
	for _, l := range out[s.base:] {
		if f := s.frames[l]; f.pos == pos && f.sub == sub && s.sameStack(f.parent, parent) {
			return out
		}
	}
	if len(out)-s.base >= s.g.limits.MaxStacks {
		s.over = true
		return out
	}
	out = append(out, int32(len(s.frames)))
	s.frames = append(s.frames, frame{pos, parent, sub})
	return out
}

// sameStack reports whether frames a and b head equal stacks.
func (s *stackSet) sameStack(a, b int32) bool {
	for a != b {
		if a < 0 || b < 0 {
			return false
		}
		fa, fb := s.frames[a], s.frames[b]
		if fa.pos != fb.pos || fa.sub != fb.sub {
			return false
		}
		a, b = fa.parent, fb.parent
	}
	return true
}

// step appends to out the leaves after consuming c from the state
// leaves, and reports whether the grammar can end after c.
func (s *stackSet) step(out, leaves []int32, c byte) ([]int32, bool) {
	g := s.g
	end := false
	s.base = len(out)
	s.budget = g.limits.MaxStepWork
	for _, l := range leaves {
		f := s.frames[l]
		e := g.elems[f.pos]
		if e.kind == kClass {
			done, sub := g.cls[e.arg].step(f.sub, c)
			if sub != 0 {
				out = s.addLeaf(out, f.pos, f.parent, sub)
			}
			if !done {
				continue
			}
		} else if !g.sets[e.arg].has(c) {
			continue
		}
		var acc bool
		out, acc = s.expand(out, f.pos+1, f.parent)
		end = end || acc
	}
	return out, end
}

// step consumes byte c at progress sub: done says a character is
// complete, next is the progress of those still partial (0: none).
func (u *utf8Class) step(sub uint32, c byte) (done bool, next uint32) {
	idx := int(sub & 7)
	live := sub >> 3
	if idx == 0 {
		live = 1<<len(u.seqs) - 1
	}
	var still uint32
	for i, seq := range u.seqs {
		if live>>i&1 == 0 || idx >= len(seq) || !seq[idx].has(c) {
			continue
		}
		if idx+1 == len(seq) {
			done = true
		} else {
			still |= 1 << i
		}
	}
	if still != 0 {
		next = uint32(idx+1) | still<<3
	}
	return done, next
}

// sameState reports whether the leaf sets a and b hold equal stacks.
func (s *stackSet) sameState(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
outer:
	for _, x := range a {
		fx := s.frames[x]
		for _, y := range b {
			if fy := s.frames[y]; fy.pos == fx.pos && fy.sub == fx.sub && s.sameStack(fx.parent, fy.parent) {
				continue outer
			}
		}
		return false
	}
	return true
}

// Matcher follows a Grammar through a byte string. It is not safe for
// concurrent use; Clone gives an independent copy (for n choices and
// beam branches).
type Matcher struct {
	s      stackSet
	leaves []int32
	end    bool // the bytes so far are a complete sentence
	err    error
	c      *Constraint // nil for a Matcher made by Grammar.NewMatcher

	scratch []int32
	remap   []int32
	spare   []frame // compact's other arena
	key     []byte  // stateKey's buffers
	keyTmp  []byte
}

// NewMatcher returns a Matcher at the start of g.
func (g *Grammar) NewMatcher() *Matcher {
	m := &Matcher{s: stackSet{g: g, budget: g.limits.MaxStepWork}}
	for _, a := range g.rules[g.root] {
		var acc bool
		m.leaves, acc = m.s.expand(m.leaves, a, -1)
		m.end = m.end || acc
	}
	if m.s.over {
		m.err = ErrAmbiguous
	}
	return m
}

// Err is the error that stopped the Matcher (ErrAmbiguous), nil if none.
func (m *Matcher) Err() error { return m.err }

// CanEnd reports whether the bytes accepted so far are a complete
// sentence of the grammar.
func (m *Matcher) CanEnd() bool { return m.end }

// Closed reports whether no byte can follow: the sentence is complete and
// the only way on is to end.
func (m *Matcher) Closed() bool { return len(m.leaves) == 0 }

// Clone returns an independent copy of m.
func (m *Matcher) Clone() *Matcher {
	c := &Matcher{s: stackSet{g: m.s.g, over: m.s.over}, end: m.end, err: m.err, c: m.c}
	c.s.frames = append([]frame(nil), m.s.frames...)
	c.leaves = append([]int32(nil), m.leaves...)
	return c
}

// AcceptBytes advances m over p and reports whether the grammar accepts
// it; on false m is unchanged (unless the grammar proved too ambiguous:
// then Err says so).
func (m *Matcher) AcceptBytes(p []byte) bool {
	mark := len(m.s.frames)
	cur, end, ok := m.run(p, true)
	if !ok {
		m.s.frames = m.s.frames[:mark]
		return false
	}
	if len(p) > 0 {
		m.leaves = append(m.leaves[:0], cur...)
		m.end = end
		m.compact()
	}
	return true
}

// accepts reports whether p could follow, leaving m unchanged.
func (m *Matcher) accepts(p []byte) bool {
	mark := len(m.s.frames)
	_, _, ok := m.run(p, false)
	m.s.frames = m.s.frames[:mark]
	return ok
}

// run steps over p from m's state without committing: it returns the
// leaves (in a scratch buffer) and end flag after p, and whether p is
// acceptable. A step that needs too many stacks refuses p; when commit
// is set it also stops the Matcher with ErrAmbiguous.
func (m *Matcher) run(p []byte, commit bool) ([]int32, bool, bool) {
	if m.err != nil {
		return nil, false, false
	}
	a, b := m.scratch[:0], m.remap[:0]
	cur, end := m.leaves, m.end
	for i, c := range p {
		a, end = m.s.step(a[:0], cur, c)
		if m.s.over {
			m.s.over = false
			if commit {
				m.err = ErrAmbiguous
			}
			m.scratch, m.remap = a, b
			return nil, false, false
		}
		if len(a) == 0 && (!end || i < len(p)-1) {
			m.scratch, m.remap = a, b
			return nil, false, false
		}
		cur = a
		a, b = b, a
	}
	m.scratch, m.remap = a, b
	return cur, end, true
}

// compact copies the live stacks into the spare arena so frames left by
// earlier steps do not accumulate; the arenas swap, so it allocates only
// while they grow.
func (m *Matcher) compact() {
	old := m.s.frames
	if len(old) < 4*len(m.leaves)+16 {
		return
	}
	m.remap = m.remap[:0]
	for range old {
		m.remap = append(m.remap, -1)
	}
	m.spare = m.spare[:0]
	for k, l := range m.leaves {
		m.leaves[k] = copyStack(&m.spare, m.remap, old, l)
	}
	m.s.frames, m.spare = m.spare, old
	m.remap = m.remap[:0]
}

// copyStack copies frame i of from and its parents into *dst, once each
// (remap[j] is frame j's index in *dst, -1 until it is copied), and
// returns i's index there.
func copyStack(dst *[]frame, remap []int32, from []frame, i int32) int32 {
	if i < 0 {
		return -1
	}
	if remap[i] >= 0 {
		return remap[i]
	}
	p := copyStack(dst, remap, from, from[i].parent)
	remap[i] = int32(len(*dst))
	*dst = append(*dst, frame{from[i].pos, p, from[i].sub})
	return remap[i]
}

// Match reports whether s is a complete sentence of g.
func (g *Grammar) Match(s []byte) bool {
	m := g.NewMatcher()
	return m.AcceptBytes(s) && m.CanEnd()
}
