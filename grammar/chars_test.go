package grammar

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// classOf is the index in byteClasses of a non-ASCII byte.
func classOf(c byte) int {
	for i, r := range byteClasses {
		if c >= r.lo && c <= r.hi {
			return i
		}
	}
	panic("ASCII byte")
}

// TestCharKinds: every character's kind has a representative of the same
// kind whose bytes fall, byte for byte, in the same classes, and kinds
// fit numKinds.
func TestCharKinds(t *testing.T) {
	var buf [4]byte
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		ch := buf[:utf8.EncodeRune(buf[:], r)]
		k := charKind(ch)
		if k < 0 || k >= numKinds {
			t.Fatalf("%U: kind %d out of range", r, k)
		}
		rep := kindBytes(nil, k)
		if len(rep) != len(ch) || !utf8.Valid(rep) || charKind(rep) != k {
			t.Fatalf("%U (% x): kind %d, representative % x", r, ch, k, rep)
		}
		if k < 128 {
			if rep[0] != ch[0] {
				t.Fatalf("%U: ASCII kind %d, representative % x", r, k, rep)
			}
			continue
		}
		for i := range ch {
			if classOf(ch[i]) != classOf(rep[i]) {
				t.Fatalf("%U (% x): byte %d not in its representative's (% x) class", r, ch, i, rep)
			}
		}
	}
}

// utf8Vocab has single bytes, characters of every UTF-8 length and edge
// (the ends of the overlong, surrogate and last-plane splits), JSON
// punctuation, control characters, and random pieces of them, some cut
// inside a character or holding invalid bytes, plus EOS (the last token,
// empty).
func utf8Vocab(n int, seed uint64) pieces {
	rng := rand.New(rand.NewPCG(seed, 7))
	units := []string{"a", "b", "z", "0", "7", " ", `"`, `\`, "\n", "\t", "{", "}", ":", ",", "[", "]", "@", ".",
		"é", "ÿ", "߿", "ࠀ", "日", "\ud7ff", "\ue000", "ｦ", "\uffff", "𐀀", "😀", "\U000fffff", "\U00100000", "\U0010ffff"}
	p := pieces{""} // a control token
	for b := range 256 {
		p = append(p, string([]byte{byte(b)}))
	}
	p = append(p, units...)
	// Families of every string of up to 4 characters over a few
	// alphabets, for subtrees large enough to be proven whole.
	var family func(alpha []string, prefix string, depth int)
	family = func(alpha []string, prefix string, depth int) {
		if depth == 0 {
			return
		}
		for _, a := range alpha {
			p = append(p, prefix+a)
			family(alpha, prefix+a, depth-1)
		}
	}
	family([]string{"é", "ÿ", "߿"}, "", 4)
	family([]string{"a", "日", "😀"}, "", 4)
	family([]string{"0", "5", "\\"}, "", 3)
	family([]string{"b", "\n", "{"}, "~", 4)
	family([]string{"b", "\n", "{"}, "|\n", 4)
	for len(p) < n-1 {
		var sb strings.Builder
		for range 1 + rng.IntN(7) {
			sb.WriteString(units[rng.IntN(len(units))])
		}
		s := sb.String()
		switch rng.IntN(24) {
		case 0: // cut inside a character
			s = s[:rng.IntN(len(s))+1]
		case 1:
			s = s[rng.IntN(len(s)):]
		case 2:
			s += "\xff"
		}
		p = append(p, s)
	}
	return append(p, "") // EOS
}

// TestVocabCharSummary checks each trie node's summary against the
// tokens below it: clean exactly when all continue it with whole valid
// characters, then their kinds, the most characters, and for each token
// tokChars-nodeChars its characters after the node.
func TestVocabCharSummary(t *testing.T) {
	v := utf8Vocab(3000, 1)
	voc := NewVocab(v, []int32{int32(len(v) - 1)})
	prefix := make([][]byte, voc.Nodes()) // each node's bytes
	for n := int32(1); n < int32(voc.Nodes()); n++ {
		// The parent is the nearest earlier node whose subtree holds n.
		p := n - 1
		for voc.next[p] <= n {
			p--
		}
		prefix[n] = append(append([]byte(nil), prefix[p]...), voc.edge[n])
	}
	for n := int32(0); n < int32(voc.Nodes()); n++ {
		clean, most := true, 0
		var kinds kindSet
		for i := voc.tokAt[n+1]; i < voc.tokAt[voc.next[n]]; i++ {
			tok := voc.piece(voc.toks[i])
			suffix := tok[len(prefix[n]):]
			if !utf8.Valid(suffix) {
				clean = false
				continue
			}
			cnt := utf8.RuneCount(suffix)
			most = max(most, cnt)
			for j := 0; j < len(suffix); {
				_, size := utf8.DecodeRune(suffix[j:])
				kinds.add(charKind(suffix[j : j+size]))
				j += size
			}
			if got := voc.tokChars[i] - voc.nodeChars[n]; int(got) != cnt {
				t.Fatalf("node %q token %q: %d characters after the node, summary says %d", prefix[n], tok, cnt, got)
			}
		}
		if clean != (voc.below[n] >= 0) {
			t.Fatalf("node %q: clean %v, summary %d", prefix[n], clean, voc.below[n])
		}
		if clean && (voc.kinds[voc.below[n]] != kinds || int(voc.chars[n]) != most) {
			t.Fatalf("node %q: kinds or count (%d, summary %d) wrong", prefix[n], most, voc.chars[n])
		}
	}
}

// maskGrammars are grammars for FuzzMask: coarse ones (JSON strings with
// and without bounds, character ranges UTF-8 splits at its own
// boundaries, a newline refused at first but not later, a newline
// before the node's state refuses it) and ones that name particular
// non-ASCII characters.
var maskGrammars = []struct {
	name, src string
	kind      string // "schema", "gbnf" or "regex"
	coarse    bool
}{
	{"bounded strings", `{"type":"object","properties":{"s":{"type":"string","maxLength":5},"t":{"type":"string"},"n":{"type":"integer"}},"required":["s"]}`, "schema", true},
	{"enum", `{"type":"array","items":{"enum":["é","日本","a\"b"]},"maxItems":3}`, "schema", false},
	{"gbnf", `root ::= ("é"* [a-z日]{0,4} "x")+`, "gbnf", false},
	{"gbnf any", `root ::= [^\n]{0,9} "\n" root?`, "gbnf", true},
	{"newline after a letter", `root ::= "~" [a-z] ([a-z0-9 \n] | [^\x00-\x7f])*`, "gbnf", true},
	{"newline first", `root ::= "|\n" ([a-z0-9 ] | [^\x00-\x7f])*`, "gbnf", true},
	{"regex", `[\x{80}-\x{7ff}a-c]{0,6}[0-9]*`, "regex", true},
	{"regex latin", `[à-ÿ ]{0,5}"?`, "regex", false},
	// Exits inside a string: '.' and '@' in the address, '-' and '.' in
	// the domain.
	{"email", `{"type":"array","items":{"type":"string","format":"email"}}`, "schema", true},
}

func compileMaskGrammar(t testing.TB, i int) *Grammar {
	mg := maskGrammars[i]
	var g *Grammar
	var err error
	switch mg.kind {
	case "schema":
		g, err = CompileSchema([]byte(mg.src), Limits{})
	case "gbnf":
		g, err = ParseGBNF(mg.src, Limits{})
	default:
		g, err = ParseRegex(mg.src, Limits{})
	}
	if err != nil {
		t.Fatalf("%s: %v", mg.name, err)
	}
	if class, _ := g.partition(); coarse(&class) != mg.coarse {
		t.Fatalf("%s: coarse %v, want %v", mg.name, !mg.coarse, mg.coarse)
	}
	return g
}

// forgetMasks empties c's mask cache, so the next Mask computes, with
// what c's walker learnt before.
func (c *Constraint) forgetMasks() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.cache)
	c.cacheBytes = 0
}

// FuzzMask walks random allowed tokens of a UTF-8-heavy vocabulary
// through each grammar with a fresh (empty) mask cache at every step, and
// compares every mask, with and without the bulk path and with the
// tables a Constraint's walker learnt at the earlier steps, with asking
// Allowed (which advances the matcher over the token's bytes, not the
// trie) of every token; and the bulk path's own decisions with Allowed.
func FuzzMask(f *testing.F) {
	for i := range maskGrammars {
		f.Add(uint64(i), uint8(i))
	}
	v := utf8Vocab(2500, 3)
	voc := NewVocab(v, []int32{int32(len(v) - 1)})
	gs := make([]*Grammar, len(maskGrammars))
	for i := range gs {
		gs[i] = compileMaskGrammar(f, i)
	}
	f.Fuzz(func(t *testing.T, seed uint64, which uint8) {
		g := gs[int(which)%len(gs)]
		rng := rand.New(rand.NewPCG(seed, 2))
		m := NewConstraint(g, voc).NewMatcher()
		name := maskGrammars[int(which)%len(gs)].name
		warm := NewConstraint(g, voc) // keeps its walker's tables, not its masks
		for step := 0; step < 12; step++ {
			checkBulk(t, m, name)
			m.c = NewConstraint(g, voc) // cold: no cached mask
			m.c.noBulk = true
			walked := m.Mask()
			m.c = warm
			warm.forgetMasks()
			learnt := m.Mask()
			m.c = NewConstraint(g, voc)
			mask := m.Mask()
			var allowed []int32
			for id := range int32(len(v)) {
				in := mask[id>>6]>>(id&63)&1 != 0
				if in != m.Allowed(id) || in != (walked[id>>6]>>(id&63)&1 != 0) || in != (learnt[id>>6]>>(id&63)&1 != 0) {
					t.Fatalf("%s, step %d: mask says %v for %q, Allowed %v, without bulk %v, with learnt tables %v", name, step, in, v[id], !in,
						walked[id>>6]>>(id&63)&1 != 0, learnt[id>>6]>>(id&63)&1 != 0)
				}
				if in {
					allowed = append(allowed, id)
				}
			}
			if len(allowed) == 0 {
				return
			}
			id := allowed[rng.IntN(len(allowed))]
			if !m.AcceptToken(id) || m.Closed() {
				return
			}
		}
	})
}

// TestPartition: two bytes share a class exactly when the grammar's
// sets all hold both or neither, and the classes are numbered 0 to n-1.
func TestPartition(t *testing.T) {
	for i := range maskGrammars {
		g := compileMaskGrammar(t, i)
		var sets []*byteSet
		for j := range g.sets {
			sets = append(sets, &g.sets[j])
		}
		for _, c := range g.cls {
			for _, seq := range c.seqs {
				for j := range seq {
					sets = append(sets, &seq[j])
				}
			}
		}
		same := func(a, b byte) bool {
			for _, s := range sets {
				if s.has(a) != s.has(b) {
					return false
				}
			}
			return true
		}
		class, n := g.partition()
		seen := map[uint8]bool{}
		for a := range 256 {
			if int(class[a]) >= n {
				t.Fatalf("%s: byte %#x in class %d of %d", maskGrammars[i].name, a, class[a], n)
			}
			seen[class[a]] = true
			for b := range 256 {
				if (class[a] == class[b]) != same(byte(a), byte(b)) {
					t.Fatalf("%s: bytes %#x and %#x: classes %d and %d", maskGrammars[i].name, a, b, class[a], class[b])
				}
			}
		}
		if len(seen) != n {
			t.Fatalf("%s: %d classes used of %d", maskGrammars[i].name, len(seen), n)
		}
	}
}

// checkBulk checks the bulk path alone at m's state: every token it
// allows is allowed, and every token it leaves out of the walk (decided)
// is allowed exactly when Allowed says so. It reports whether the bulk
// path applied.
func checkBulk(t *testing.T, m *Matcher, name string) bool {
	t.Helper()
	c, v := m.c, m.c.v
	if len(m.leaves) == 0 || m.err != nil {
		return false
	}
	w := &walker{}
	w.reset(c, false)
	w.mask = make([]uint64, v.MaskWords())
	if !w.bulk(v, w.intern(&m.s, m.leaves, m.end)) {
		return false
	}
	if w.aborted {
		t.Fatalf("%s: bulk aborted", name)
	}
	for i, id := range v.toks {
		in := w.mask[id>>6]>>(id&63)&1 != 0
		undecided := w.undecided[i>>6]>>(i&63)&1 != 0
		if allowed := m.Allowed(id); in && !allowed || !undecided && in != allowed {
			t.Fatalf("%s: bulk says %v (undecided %v) for %q, Allowed %v", name, in, undecided, v.piece(id), allowed)
		}
	}
	return true
}

// TestBulkApplies: the bulk path decides masks inside JSON strings, with
// and without a maximum length, and each decision agrees with Allowed.
func TestBulkApplies(t *testing.T) {
	v := utf8Vocab(2500, 3)
	voc := NewVocab(v, []int32{int32(len(v) - 1)})
	g := compileMaskGrammar(t, 0) // bounded strings
	for _, prefix := range []string{`{"s":"`, `{"s":"ab`, `{"s":"abcd`, `{"s":"a","t":"`, `{"s":"a","t":"é日😀`} {
		m := NewConstraint(g, voc).NewMatcher()
		if !m.AcceptBytes([]byte(prefix)) {
			t.Fatalf("%q refused", prefix)
		}
		if !checkBulk(t, m, prefix) {
			t.Errorf("after %q the bulk path did not apply", prefix)
		}
	}
	m := NewConstraint(g, voc).NewMatcher()
	if m.AcceptBytes([]byte(`{"s":"a","n":1`)); checkBulk(t, m, "number") {
		t.Error("the bulk path applied inside a number")
	}
}

// TestStringExits: at the end of a bounded string, where only a few
// bytes go on, the bulk path still applies (stringExits) and the mask,
// which byShape decides in part, agrees with Allowed token by token; so
// do masks a level before the end, where letters and digits are keep
// characters and byShape decides tokens with an exit after them.
func TestStringExits(t *testing.T) {
	v := utf8Vocab(2500, 3)
	v = append(v, "ab.cd", ".x", ".xyz", "@ex", "x@y", "a-b", "-", "com", "ab", "abcdefghij", "klmnop", ".com", "q.r.s",
		"-z", "z-", "9.9", "@", ".", "A0.B1", "x\"", "x\",", "b.c@d")
	voc := NewVocab(v, []int32{0})
	email, err := CompileSchema([]byte(`{"type":"array","items":{"type":"string","format":"email"}}`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	label := strings.Repeat("d", 32)
	const chain, exits, walk = "chain", "exits", "walk" // how bulk should take the state
	for _, tc := range []struct {
		g            *Grammar
		prefix, want string
	}{
		{compileMaskGrammar(t, 0), `{"s":"abc`, chain},
		{compileMaskGrammar(t, 0), `{"s":"abcde`, walk}, // only a quote goes on
		{email, `["abcdefghijklmn`, chain},
		{email, `["abcdefghijklmno`, exits},
		{email, `["ab.cdefghijklmnopq`, exits},
		{email, `["a@` + label[:30], chain},
		{email, `["a@` + label, exits},
		{email, `["a@b.` + label, exits},
	} {
		m := NewConstraint(tc.g, voc).NewMatcher()
		if !m.AcceptBytes([]byte(tc.prefix)) {
			t.Fatalf("%q refused", tc.prefix)
		}
		w := &walker{}
		w.reset(m.c, false)
		w.mask = make([]uint64, voc.MaskWords())
		got := walk
		if w.bulk(voc, w.intern(&m.s, m.leaves, m.end)) {
			got = chain
			if w.bound == 0 {
				got = exits
			}
			if !w.shaped {
				t.Errorf("after %q: byShape does not apply", tc.prefix)
			}
		}
		if got != tc.want {
			t.Errorf("after %q: bulk took the state as %s, want %s", tc.prefix, got, tc.want)
		}
		mask := m.Mask()
		for id := range int32(len(v)) {
			if in := mask[id>>6]>>(id&63)&1 != 0; in != m.Allowed(id) {
				t.Fatalf("after %q: mask says %v for %q, Allowed %v", tc.prefix, in, v[id], !in)
			}
		}
	}
}
