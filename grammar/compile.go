package grammar

import (
	"errors"
	"fmt"
	"strings"
)

// Limits bound what compiling user input may cost. The zero value of a
// field means its default.
type Limits struct {
	// MaxElems bounds the compiled grammar's size in elements (one per
	// byte of a literal, per byte class, per rule reference). Default
	// 200,000.
	MaxElems int
	// MaxRules bounds the number of rules. Default 50,000.
	MaxRules int
	// MaxDepth bounds the nesting of a schema, a GBNF expression or a
	// regular expression. Default 64.
	MaxDepth int
	// MaxRepeat bounds one bounded repetition ({m,n}, minLength,
	// maxItems...): counts above it are an error. Default 10,000.
	MaxRepeat int
	// MaxStacks bounds the stacks a Matcher state may hold; a grammar so
	// ambiguous that a state would hold more fails to advance with
	// ErrAmbiguous. Default 512.
	MaxStacks int
	// MaxSchemaNodes bounds the schema objects a JSON Schema may hold,
	// counted as the compiler visits them. Default 10,000.
	MaxSchemaNodes int
	// MaxStepWork bounds the rule expansions one byte may cause (a
	// grammar with many ways to match the empty string can need
	// exponentially many); more is ErrAmbiguous. Default 100,000.
	MaxStepWork int
	// MaxMaskWork bounds the work of computing one mask, in stack
	// operations (a leaf stepped or compared); a grammar whose mask would
	// cost more stops its Matcher with ErrTooCostly instead of stalling
	// decoding. Default 50,000,000 (well under a second).
	MaxMaskWork int
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxElems, 200_000)
	def(&l.MaxRules, 50_000)
	def(&l.MaxDepth, 64)
	def(&l.MaxRepeat, 10_000)
	def(&l.MaxStacks, 512)
	def(&l.MaxSchemaNodes, 10_000)
	def(&l.MaxMaskWork, 50_000_000)
	def(&l.MaxStepWork, 100_000)
	return l
}

// Error is a grammar or schema that cannot be compiled. Path says where:
// a JSON pointer into a schema, a rule name and offset in GBNF, an offset
// in a regular expression.
type Error struct {
	Path string
	Msg  string
}

// Error implements error: "grammar: PATH: MSG".
func (e *Error) Error() string {
	if e.Path == "" {
		return "grammar: " + e.Msg
	}
	return "grammar: " + e.Path + ": " + e.Msg
}

func errorf(path, format string, args ...any) *Error {
	return &Error{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// ErrAmbiguous is returned when a Matcher state would need more stacks
// than Limits.MaxStacks: the grammar is too ambiguous to follow.
var ErrAmbiguous = errors.New("grammar: too ambiguous (a state needs more stacks than the limit)")

// ErrTooCostly is returned when a mask would cost more than
// Limits.MaxMaskWork: the grammar is too ambiguous to mask a vocabulary.
var ErrTooCostly = errors.New("grammar: a token mask would cost more than the limit (the grammar is too ambiguous)")

// elem kinds.
const (
	kEnd   uint8 = iota // the end of an alternative
	kTerm               // one byte from sets[arg]
	kRef                // rule arg
	kClass              // one UTF-8 encoded code point from cls[arg]
)

// maxClassSeqs bounds the byte-range sequences of a kClass, so a leaf's
// partial-character state fits a frame's sub field.
const maxClassSeqs = 28

// utf8Class is a set of code points as the byte-range sequences of their
// UTF-8 encodings. A stack inside a multi-byte character keeps in its
// leaf which sequences the bytes so far still match, so one leaf stands
// for the whole class instead of one per sequence.
type utf8Class struct {
	seqs [][]byteSet
}

type elem struct {
	kind uint8
	arg  int32
}

// Grammar is a compiled context-free grammar over bytes. It is immutable
// and safe for concurrent use.
type Grammar struct {
	elems  []elem    // alternatives, each ended by a kEnd
	sets   []byteSet // the byte sets of kTerm elements
	cls    []utf8Class
	rules  [][]int32 // each rule's alternatives' first elements
	names  []string  // each rule's name
	root   int32
	limits Limits
}

// Rules is the number of rules, Elems the number of elements: the
// grammar's size as Limits counts it.
func (g *Grammar) Rules() int { return len(g.rules) }

// Elems is the number of elements, as Limits.MaxElems counts them.
func (g *Grammar) Elems() int { return len(g.elems) }

// builder lowers named exprs to a Grammar.
type builder struct {
	lim    Limits
	index  map[string]int32 // rule by name
	names  []string
	bodies []*expr // named rules' exprs, nil once lowered
	paths  []string
	g      *Grammar
	setIdx map[byteSet]int32
	anon   int
}

func newBuilder(lim Limits) *builder {
	return &builder{lim: lim.withDefaults(), index: map[string]int32{}, setIdx: map[byteSet]int32{}, g: &Grammar{}}
}

// rule declares (or finds) the rule called name; body may be set later
// with define.
func (b *builder) rule(name string) int32 {
	if id, ok := b.index[name]; ok {
		return id
	}
	id := int32(len(b.names))
	b.index[name] = id
	b.names = append(b.names, name)
	b.bodies = append(b.bodies, nil)
	b.paths = append(b.paths, "")
	return id
}

// define sets rule name's body; path is where it came from, for errors.
func (b *builder) define(name string, body *expr, path string) {
	id := b.rule(name)
	b.bodies[id] = body
	b.paths[id] = path
}

func (b *builder) defined(name string) bool {
	id, ok := b.index[name]
	return ok && b.bodies[id] != nil
}

// build lowers every rule and checks the result, with root as the start.
func (b *builder) build(root string) (*Grammar, error) {
	g := b.g
	g.limits = b.lim
	rootID, ok := b.index[root]
	if !ok {
		return nil, errorf("", "no rule %q", root)
	}
	g.root = rootID
	for i := 0; i < len(b.names); i++ {
		if b.bodies[i] == nil {
			return nil, errorf(b.paths[i], "rule %q is used but not defined", b.names[i])
		}
	}
	g.rules = make([][]int32, len(b.names))
	for i := 0; i < len(b.names); i++ { // lowering may add anonymous rules
		body := b.bodies[i]
		if err := b.lowerRule(int32(i), body, b.paths[i]); err != nil {
			return nil, err
		}
	}
	g.names = b.names
	if err := g.checkLeftRecursion(b.paths); err != nil {
		return nil, err
	}
	return g, nil
}

// lowerRule writes rule id's alternatives.
func (b *builder) lowerRule(id int32, body *expr, path string) error {
	var alts []*expr
	if body.op == opAlt {
		alts = body.subs
	} else {
		alts = []*expr{body}
	}
	for len(b.g.rules) < len(b.names) {
		b.g.rules = append(b.g.rules, nil)
	}
	starts := make([]int32, 0, len(alts))
	for _, a := range alts {
		var els []elem
		els, err := b.lower(els, a, path, 0)
		if err != nil {
			return err
		}
		if len(b.g.elems)+len(els)+1 > b.lim.MaxElems {
			return errorf(path, "grammar larger than %d elements", b.lim.MaxElems)
		}
		starts = append(starts, int32(len(b.g.elems)))
		b.g.elems = append(b.g.elems, els...)
		b.g.elems = append(b.g.elems, elem{kind: kEnd})
	}
	b.g.rules[id] = starts
	return nil
}

// anonRule adds a rule for e and returns a reference to it.
func (b *builder) anonRule(e *expr, path string) (elem, error) {
	if len(b.names) >= b.lim.MaxRules {
		return elem{}, errorf(path, "grammar has more than %d rules", b.lim.MaxRules)
	}
	b.anon++
	name := anonName(path, b.anon)
	id := b.rule(name)
	b.bodies[id] = e
	b.paths[id] = path
	return elem{kind: kRef, arg: id}, nil
}

// anonName names the n-th anonymous rule made for path.
func anonName(path string, n int) string {
	if path == "" {
		path = "anon"
	}
	return fmt.Sprintf("%s~%d", path, n)
}

func (b *builder) term(s byteSet) elem {
	id, ok := b.setIdx[s]
	if !ok {
		id = int32(len(b.g.sets))
		b.g.sets = append(b.g.sets, s)
		b.setIdx[s] = id
	}
	return elem{kind: kTerm, arg: id}
}

// lower appends e's elements to dst, adding rules for nested
// alternatives and repetitions.
func (b *builder) lower(dst []elem, e *expr, path string, depth int) ([]elem, error) {
	if depth > b.lim.MaxDepth*4 {
		return nil, errorf(path, "expression nested deeper than %d", b.lim.MaxDepth*4)
	}
	if len(dst) > b.lim.MaxElems {
		return nil, errorf(path, "grammar larger than %d elements", b.lim.MaxElems)
	}
	switch e.op {
	case opEmpty:
		return dst, nil
	case opBytes:
		for i := 0; i < len(e.lit); i++ {
			var s byteSet
			s.add(e.lit[i])
			dst = append(dst, b.term(s))
		}
		return dst, nil
	case opByteClass:
		return append(dst, b.term(e.bytes)), nil
	case opClass:
		return b.lowerClass(dst, e.ranges, path)
	case opSeq:
		var err error
		for _, s := range e.subs {
			if dst, err = b.lower(dst, s, path, depth+1); err != nil {
				return nil, err
			}
		}
		return dst, nil
	case opAlt:
		r, err := b.anonRule(e, path)
		if err != nil {
			return nil, err
		}
		return append(dst, r), nil
	case opRef:
		id, ok := b.index[e.name]
		if !ok || b.bodies[id] == nil {
			return nil, errorf(path, "rule %q is used but not defined", e.name)
		}
		return append(dst, elem{kind: kRef, arg: id}), nil
	case opRepeat:
		return b.lowerRepeat(dst, e, path, depth)
	}
	return nil, errorf(path, "unknown expression")
}

// lowerRepeat lowers x{min,max}: min copies of x, then for an unbounded
// max the tail-recursive rule R ::= x R | "", else a chain of optional
// rules R_k ::= x R_(k-1) | "" nested max-min deep.
func (b *builder) lowerRepeat(dst []elem, e *expr, path string, depth int) ([]elem, error) {
	if e.min > b.lim.MaxRepeat || e.max > b.lim.MaxRepeat {
		return nil, errorf(path, "repetition count above %d", b.lim.MaxRepeat)
	}
	if e.max >= 0 && e.max < e.min {
		return nil, errorf(path, "repetition {%d,%d} has max below min", e.min, e.max)
	}
	x, err := b.lower(nil, e.subs[0], path, depth+1)
	if err != nil {
		return nil, err
	}
	if len(x) == 0 { // any number of empty strings is one
		return dst, nil
	}
	if len(x) > 1 && (e.min > 1 || e.max != 1) {
		r, err := b.anonRule(e.subs[0], path)
		if err != nil {
			return nil, err
		}
		x = []elem{r}
	}
	if e.min*len(x) > b.lim.MaxElems {
		return nil, errorf(path, "grammar larger than %d elements", b.lim.MaxElems)
	}
	for range e.min {
		dst = append(dst, x...)
	}
	if e.max == e.min {
		return dst, nil
	}
	xe := e.subs[0] // x as an expr for the new rules' bodies
	if x[0].kind == kRef && len(x) == 1 {
		xe = ref(b.names[x[0].arg])
	}
	if e.max < 0 {
		if len(b.names) >= b.lim.MaxRules {
			return nil, errorf(path, "grammar has more than %d rules", b.lim.MaxRules)
		}
		b.anon++
		name := anonName(path, b.anon)
		b.define(name, alt(seq(xe, ref(name)), seq()), path)
		return append(dst, elem{kind: kRef, arg: b.index[name]}), nil
	}
	next := seq()
	for k := 0; k < e.max-e.min; k++ {
		if len(b.names) >= b.lim.MaxRules {
			return nil, errorf(path, "grammar has more than %d rules", b.lim.MaxRules)
		}
		b.anon++
		name := anonName(path, b.anon)
		b.define(name, alt(seq(xe, next), seq()), path)
		next = ref(name)
	}
	return b.lower(dst, next, path, depth+1)
}

// lowerClass lowers a set of code points to their UTF-8 encodings: one
// byte class when all are ASCII, else a rule with one alternative per
// run of encodings that share a length and lead structure.
func (b *builder) lowerClass(dst []elem, rs []runeRange, path string) ([]elem, error) {
	var ascii byteSet
	var multi [][]byteRange
	for _, r := range rs {
		for _, s := range utf8Seqs(r.lo, r.hi, nil) {
			if len(s) == 1 {
				ascii.addRange(s[0].lo, s[0].hi)
			} else {
				multi = append(multi, s)
			}
		}
	}
	if len(multi) == 0 {
		return append(dst, b.term(ascii)), nil
	}
	if len(multi) < maxClassSeqs {
		var seqs [][]byteSet
		if ascii != (byteSet{}) {
			seqs = append(seqs, []byteSet{ascii})
		}
		for _, m := range multi {
			seq := make([]byteSet, len(m))
			for i, r := range m {
				seq[i].addRange(r.lo, r.hi)
			}
			seqs = append(seqs, seq)
		}
		b.g.cls = append(b.g.cls, utf8Class{seqs: seqs})
		return append(dst, elem{kind: kClass, arg: int32(len(b.g.cls) - 1)}), nil
	}
	// Too many sequences for one leaf: a trie of them, so a state holds a
	// stack per distinct next byte range rather than per sequence.
	var alts []*expr
	if ascii != (byteSet{}) {
		alts = append(alts, &expr{op: opByteClass, bytes: ascii})
	}
	alts = append(alts, factorSeqs(multi))
	if len(alts) == 1 {
		return b.lower(dst, alts[0], path, 0)
	}
	r, err := b.anonRule(alt(alts...), path)
	if err != nil {
		return nil, err
	}
	return append(dst, r), nil
}

// factorSeqs is the alternatives of seqs (in code point order, so those
// that share a first byte range are adjacent) factored on their first
// byte range, level after level.
func factorSeqs(seqs [][]byteRange) *expr {
	var alts []*expr
	for i := 0; i < len(seqs); {
		if len(seqs[i]) == 0 {
			alts = append(alts, seq())
			i++
			continue
		}
		j := i + 1
		for j < len(seqs) && len(seqs[j]) > 0 && seqs[j][0] == seqs[i][0] {
			j++
		}
		rest := make([][]byteRange, 0, j-i)
		for _, sq := range seqs[i:j] {
			rest = append(rest, sq[1:])
		}
		var set byteSet
		set.addRange(seqs[i][0].lo, seqs[i][0].hi)
		alts = append(alts, seq(&expr{op: opByteClass, bytes: set}, factorSeqs(rest)))
		i = j
	}
	return alt(alts...)
}

// checkLeftRecursion refuses a rule that can reach itself without
// consuming a byte: the matcher would expand it forever.
func (g *Grammar) checkLeftRecursion(paths []string) error {
	n := len(g.rules)
	nullable := make([]bool, n)
	for changed := true; changed; {
		changed = false
		for r := range n {
			if nullable[r] {
				continue
			}
			for _, a := range g.rules[r] {
				if g.altNullable(a, nullable) {
					nullable[r] = true
					changed = true
					break
				}
			}
		}
	}
	// Left-corner edges: rule r may begin by expanding rule s.
	edges := make([][]int32, n)
	for r := range n {
		for _, a := range g.rules[r] {
			for p := a; g.elems[p].kind == kRef; p++ {
				s := g.elems[p].arg
				edges[r] = append(edges[r], s)
				if !nullable[s] {
					break
				}
			}
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, n)
	var stack []int32
	var visit func(r int32) error
	visit = func(r int32) error {
		color[r] = grey
		stack = append(stack, r)
		for _, s := range edges[r] {
			switch color[s] {
			case grey:
				var cyc []string
				for i := len(stack) - 1; i >= 0; i-- {
					cyc = append(cyc, g.names[stack[i]])
					if stack[i] == s {
						break
					}
				}
				path := paths[s]
				if path == "" {
					path = g.names[s]
				}
				return errorf(path, "left recursion (%s) would never consume input", strings.Join(cyc, " <- "))
			case white:
				if err := visit(s); err != nil {
					return err
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[r] = black
		return nil
	}
	for r := range n {
		if color[r] == white {
			if err := visit(int32(r)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *Grammar) altNullable(p int32, nullable []bool) bool {
	for ; ; p++ {
		switch e := g.elems[p]; e.kind {
		case kEnd:
			return true
		case kTerm, kClass:
			return false
		case kRef:
			if !nullable[e.arg] {
				return false
			}
		}
	}
}
