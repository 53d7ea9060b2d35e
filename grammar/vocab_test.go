package grammar

import (
	"math/bits"
	"math/rand/v2"
	"testing"
)

// pieces is a TokenSource over literal byte strings.
type pieces []string

func (p pieces) VocabSize() int { return len(p) }
func (p pieces) AppendPiece(dst []byte, id int32) []byte {
	if id < 0 || int(id) >= len(p) {
		return dst
	}
	return append(dst, p[id]...)
}

// syntheticVocab has every byte, common JSON pieces, words and random
// strings, an empty control token and EOS (the last token, also empty).
func syntheticVocab(n int, seed uint64) pieces {
	rng := rand.New(rand.NewPCG(seed, 1))
	p := pieces{""} // a control token
	for b := range 256 {
		p = append(p, string(rune(b))[:1])
		p[len(p)-1] = string([]byte{byte(b)})
	}
	p = append(p, `{"`, `":`, `","`, `"}`, `},`, `[{`, `}]`, `":"`, `":[`, `null`, `true`, `false`, "12", "00",
		`"name`, `name`, ` name`, "é", "日本", "\xe6", "\x97\xa5", `\"`, `\n`, `\u00`, `"a"`, `,"`, `"`, `""`)
	alphabet := []byte(`{}[]":,0123456789abcdefghijklmnopqrstuvwxyzABCXYZ-_. \` + "\xc3\xa9\xe6\x97\xa5")
	for len(p) < n-1 {
		l := 1 + rng.IntN(8)
		b := make([]byte, l)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		p = append(p, string(b))
	}
	return append(p, "") // EOS
}

// checkMask compares m.Mask with asking Allowed of every token, and that
// with advancing a clone over the token's bytes.
func checkMask(t *testing.T, m *Matcher, v pieces) []int32 {
	t.Helper()
	mask := m.Mask()
	var allowed []int32
	for id := range int32(len(v)) {
		got := mask[id>>6]>>(id&63)&1 != 0
		want := m.Allowed(id)
		if id > 0 && int(id) < len(v)-1 && v[id] != "" {
			if naive := m.Clone().AcceptBytes([]byte(v[id])); naive != want {
				t.Fatalf("Allowed(%q) = %v, advancing a clone says %v", v[id], want, naive)
			}
		}
		if got != want {
			t.Fatalf("mask says %v for token %d %q, Allowed says %v", got, id, v[id], want)
		}
		if want {
			allowed = append(allowed, id)
		}
	}
	return allowed
}

func TestMaskMatchesAllowed(t *testing.T) {
	v := syntheticVocab(3000, 1)
	eos := int32(len(v) - 1)
	voc := NewVocab(v, []int32{eos})
	grammars := map[string]string{
		"object": `{"type":"object","properties":{"name":{"type":"string","maxLength":6},"n":{"type":"integer","minimum":0,"maximum":500},"tags":{"type":"array","items":{"enum":["a","b","日本"]},"maxItems":3}},"required":["name"]}`,
		"any":    `{}`,
		"number": `{"type":"number","minimum":-5,"maximum":12}`,
	}
	for name, schema := range grammars {
		t.Run(name, func(t *testing.T) {
			g, err := CompileSchema([]byte(schema), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			c := NewConstraint(g, voc)
			rng := rand.New(rand.NewPCG(3, 4))
			for walk := range 20 {
				m := c.NewMatcher()
				for step := 0; step < 60; step++ {
					allowed := checkMask(t, m, v)
					if len(allowed) == 0 {
						t.Fatalf("walk %d: no token allowed", walk)
					}
					id := allowed[rng.IntN(len(allowed))]
					if !m.AcceptToken(id) {
						t.Fatalf("AcceptToken(%q) refused an allowed token", v[id])
					}
					if id == eos {
						if !m.Closed() {
							t.Fatal("not closed after EOS")
						}
						break
					}
				}
			}
			if hits, _ := c.CacheStats(); hits == 0 {
				t.Error("the mask cache never hit")
			}
		})
	}
}

func TestMaskExcludesControlTokens(t *testing.T) {
	v := syntheticVocab(400, 2)
	g := mustGBNF(t, `root ::= "a"*`)
	c := NewConstraint(g, NewVocab(v, []int32{int32(len(v) - 1)}))
	m := c.NewMatcher()
	if m.Allowed(0) || m.Mask()[0]&1 != 0 {
		t.Fatal("the empty control token is allowed")
	}
	if !m.Allowed(int32(len(v) - 1)) {
		t.Fatal("EOS not allowed where the grammar can end")
	}
	if m.Allowed(-1) || m.Allowed(int32(len(v))) {
		t.Fatal("out-of-range IDs allowed")
	}
}

func TestMatcherCloneIndependent(t *testing.T) {
	g := mustGBNF(t, `root ::= "ab" | "ac"`)
	m := g.NewMatcher()
	if !m.AcceptBytes([]byte("a")) {
		t.Fatal("a refused")
	}
	c := m.Clone()
	if !m.AcceptBytes([]byte("b")) || !c.AcceptBytes([]byte("c")) {
		t.Fatal("branches refused")
	}
	if !m.CanEnd() || !c.CanEnd() || m.AcceptBytes([]byte("c")) {
		t.Fatal("branches not independent")
	}
}

func TestMatcherLongRunCompacts(t *testing.T) {
	g := mustGBNF(t, `root ::= ("[" [a-z]* "]")*`)
	m := g.NewMatcher()
	for i := range 100000 {
		b := []byte("[abc]")
		if !m.AcceptBytes(b[i%5 : i%5+1]) {
			t.Fatalf("byte %d refused", i)
		}
	}
	if len(m.s.frames) > 1000 {
		t.Fatalf("%d frames live after a long run: the arena is not compacted", len(m.s.frames))
	}
}

func TestAmbiguityBounded(t *testing.T) {
	// After n a's every sequence of n pending b's and c's is a stack:
	// 2^n of them, so the matcher must give up, not grow without bound.
	g, err := ParseGBNF(`root ::= "a" root "b" | "a" root "c" | ""`, Limits{MaxStacks: 16})
	if err != nil {
		t.Fatal(err)
	}
	m := g.NewMatcher()
	for i := range 10 {
		if !m.AcceptBytes([]byte("a")) {
			if m.Err() != ErrAmbiguous || i > 4 {
				t.Fatalf("refused a at %d with Err() = %v, want ErrAmbiguous by the fifth", i, m.Err())
			}
			return
		}
	}
	t.Fatal("2^10 stacks followed under a limit of 16")
}

func TestChoice(t *testing.T) {
	g, err := Choice([]string{"yes", "no", "maybe so"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{"yes": true, "no": true, "maybe so": true, "maybe": false, "": false, "yesno": false} {
		if g.Match([]byte(s)) != want {
			t.Errorf("Match(%q) = %v", s, !want)
		}
	}
	if _, err := Choice(nil, Limits{}); err == nil {
		t.Error("no options accepted")
	}
}

func TestRegex(t *testing.T) {
	cases := []struct {
		re      string
		yes, no []string
	}{
		{`^\d{3}-\d{4}$`, []string{"555-1234"}, []string{"5551234", "555-12345"}},
		{`(cat|dog)s?`, []string{"cat", "dogs"}, []string{"cats!", "bird"}},
		{`[a-c]+x*`, []string{"abc", "ax", "cxxx"}, []string{"x", ""}},
		{`(?i)hello`, []string{"HeLLo"}, []string{"helo"}},
		{`\w+@\w+\.com`, []string{"a@b.com"}, []string{"a@b.org"}},
		{`.{2,3}`, []string{"ab", "日本語"}, []string{"a", "abcd", "\n\n"}},
	}
	for _, tc := range cases {
		g, err := ParseRegex(tc.re, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", tc.re, err)
		}
		for _, s := range tc.yes {
			if !g.Match([]byte(s)) {
				t.Errorf("%s rejects %q", tc.re, s)
			}
		}
		for _, s := range tc.no {
			if g.Match([]byte(s)) {
				t.Errorf("%s accepts %q", tc.re, s)
			}
		}
	}
	for _, bad := range []string{`a\b`, `a^b`, `(`, `a{20000}`} {
		if _, err := ParseRegex(bad, Limits{}); err == nil {
			t.Errorf("ParseRegex(%q) accepted", bad)
		}
	}
}

func TestUTF8Seqs(t *testing.T) {
	// Every code point in a range must encode to a sentence of the class
	// grammar, and its neighbours outside must not.
	ranges := []runeRange{{0, 0x7F}, {0x80, 0x10FFFF}, {'a', 'é'}, {0x7FF, 0x800}, {0xFFFF, 0x10000}, {0x3040, 0x30FF}, {0xE000, 0xE000}}
	for _, r := range ranges {
		b := newBuilder(Limits{})
		b.define("root", class(r), "t")
		g, err := b.build("root")
		if err != nil {
			t.Fatal(err)
		}
		probe := []rune{r.lo, r.hi, (r.lo + r.hi) / 2, r.lo - 1, r.hi + 1}
		for _, ch := range probe {
			if ch < 0 || ch > 0x10FFFF || ch >= 0xD800 && ch <= 0xDFFF {
				continue
			}
			want := ch >= r.lo && ch <= r.hi
			if got := g.Match([]byte(string(ch))); got != want {
				t.Errorf("range %U-%U: Match(%U) = %v", r.lo, r.hi, ch, got)
			}
		}
	}
}

// TestConstraintConcurrent shares one Constraint between goroutines, as
// the sequences of a batch do; run it with -race.
func TestConstraintConcurrent(t *testing.T) {
	v := syntheticVocab(2000, 5)
	eos := int32(len(v) - 1)
	g, err := CompileSchema([]byte(testSchemas[13].schema), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	c := NewConstraint(g, NewVocab(v, []int32{eos}))
	done := make(chan string, 4)
	for w := range 4 {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(w), 0))
			m := c.NewMatcher()
			for range 40 {
				mask := m.Mask()
				var ids []int32
				for id := range int32(len(v)) {
					if mask[id>>6]>>(id&63)&1 != 0 {
						ids = append(ids, id)
					}
				}
				if len(ids) == 0 {
					done <- "no token allowed"
					return
				}
				id := ids[rng.IntN(len(ids))]
				if !m.AcceptToken(id) {
					done <- "allowed token refused"
					return
				}
				if id == eos {
					break
				}
			}
			done <- ""
		}()
	}
	for range 4 {
		if msg := <-done; msg != "" {
			t.Fatal(msg)
		}
	}
}

// TestHotPathAllocs pins the per-token path the engine runs on every
// step, once warm: checking the sampled token, advancing over it, and
// looking up a cached mask allocate nothing.
func TestHotPathAllocs(t *testing.T) {
	v := syntheticVocab(500, 3)
	g := mustGBNF(t, `root ::= "[" ([a-z]+ ",")* "]"`)
	c := NewConstraint(g, NewVocab(v, []int32{int32(len(v) - 1)}))
	m := c.NewMatcher()
	open, word, comma := int32(-1), int32(-1), int32(-1)
	for id, p := range v {
		switch p {
		case "[":
			open = int32(id)
		case "name":
			word = int32(id)
		case ",":
			comma = int32(id)
		}
	}
	if !m.AcceptToken(open) {
		t.Fatal("[ refused")
	}
	step := func() {
		if !m.Allowed(word) || !m.AcceptToken(word) || !m.AcceptToken(comma) {
			t.Fatal("refused")
		}
	}
	for range 100 {
		step() // warm the buffers
	}
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Errorf("checking and advancing: %v allocations per token, want 0", n)
	}
	m.Mask()
	if n := testing.AllocsPerRun(1000, func() { m.Mask() }); n != 0 {
		t.Errorf("a cached mask: %v allocations, want 0", n)
	}
}

// TestMaskCacheBounded: a cache that would pass its bound is emptied, and
// the masks stay right.
func TestMaskCacheBounded(t *testing.T) {
	v := syntheticVocab(600, 8)
	g := mustGBNF(t, `root ::= [a-z]{0,40}`)
	c := NewConstraint(g, NewVocab(v, []int32{int32(len(v) - 1)}))
	c.maxBytes = 3 * (c.v.MaskWords()*8 + 64)
	m := c.NewMatcher()
	for i := range 40 { // every length is a new state
		checkMask(t, m, v)
		if c.cacheBytes > c.maxBytes || len(c.cache) > 6 {
			t.Fatalf("after %d states the cache holds %d bytes in %d masks, bound %d", i, c.cacheBytes, len(c.cache), c.maxBytes)
		}
		if !m.AcceptBytes([]byte("q")) {
			t.Fatal("q refused")
		}
	}
}

// TestMaskWorkBounded: a grammar too costly to mask stops its matcher
// with ErrTooCostly rather than stalling, and its mask allows nothing.
func TestMaskWorkBounded(t *testing.T) {
	v := syntheticVocab(3000, 4)
	src := `root ::= x x x x x x
x ::= [a-z]* | [a-m]* [a-z]* | [e-z]* [a-z]*`
	for _, lim := range []Limits{{MaxMaskWork: 2000}, {}} {
		g, err := ParseGBNF(src, lim)
		if err != nil {
			t.Fatal(err)
		}
		m := NewConstraint(g, NewVocab(v, []int32{int32(len(v) - 1)})).NewMatcher()
		m.AcceptBytes([]byte("abc"))
		mask := m.Mask()
		n := 0
		for _, w := range mask {
			n += bits.OnesCount64(w)
		}
		if lim.MaxMaskWork != 0 {
			if m.Err() != ErrTooCostly || n != 0 || m.Allowed(int32(1+'a')) {
				t.Fatalf("work bound 2000: Err %v, %d tokens allowed; want ErrTooCostly and none", m.Err(), n)
			}
		} else if m.Err() != nil || n == 0 {
			t.Fatalf("default bound: Err %v, %d tokens allowed", m.Err(), n)
		}
	}
}

// TestNullableBlowupBounded: a grammar with 2^40 ways to match nothing
// is refused at once, not expanded forever.
func TestNullableBlowupBounded(t *testing.T) {
	g, err := ParseGBNF(`root ::= (("a"?) | ("b"?)){0,40} "c"`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if m := g.NewMatcher(); m.Err() != ErrAmbiguous {
		t.Fatalf("Err() = %v, want ErrAmbiguous", m.Err())
	}
}
