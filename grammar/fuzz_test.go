package grammar

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fuzzLimits keep fuzzed inputs cheap to compile and follow.
var fuzzLimits = Limits{MaxElems: 20_000, MaxRules: 2_000, MaxRepeat: 200, MaxStacks: 64, MaxSchemaNodes: 500}

// FuzzGBNF parses arbitrary grammars. One that parses must produce
// sentences it matches, fed whole or byte by byte alike.
func FuzzGBNF(f *testing.F) {
	f.Add(`root ::= "a" | [b-d]+ ("x" root)?`, uint64(1))
	f.Add("root ::= x y\nx ::= \"\\x41\"? # c\ny ::= [^\\n]{1,3}", uint64(2))
	f.Add(`root ::= ("(" root ")")*`, uint64(3))
	f.Add(`root ::= .`, uint64(4))
	f.Fuzz(func(t *testing.T, src string, seed uint64) {
		g, err := ParseGBNF(src, fuzzLimits)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		checkSentences(t, g, seed)
	})
}

// checkSentences walks g at random and checks each sentence is matched,
// and that splitting it differently does not change the answer.
func checkSentences(t *testing.T, g *Grammar, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0))
	for range 4 {
		s, ok := randomSentence(g, rng, 64)
		if !ok {
			continue
		}
		if !g.Match([]byte(s)) {
			t.Fatalf("sentence %q not matched", s)
		}
		m := g.NewMatcher()
		for i := 0; i < len(s); {
			n := 1 + rng.IntN(len(s)-i)
			if !m.AcceptBytes([]byte(s[i : i+n])) {
				t.Fatalf("sentence %q refused in pieces at %d", s, i)
			}
			i += n
		}
		if !m.CanEnd() {
			t.Fatalf("sentence %q incomplete in pieces", s)
		}
	}
}

// FuzzSchema compiles arbitrary schemas. What compiles must generate
// JSON that a real validator accepts.
func FuzzSchema(f *testing.F) {
	for _, tc := range testSchemas {
		f.Add(tc.schema, uint64(len(tc.name)))
	}
	f.Fuzz(func(t *testing.T, schema string, seed uint64) {
		g, err := CompileSchema([]byte(schema), fuzzLimits)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		sch, err := tryValidator(schema)
		if err != nil {
			return // a schema the validator refuses: nothing to compare
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		for range 4 {
			s, ok := randomSentence(g, rng, 200)
			if !ok {
				continue
			}
			if err := validates(sch, s); err != nil {
				t.Fatalf("schema %s produced %s: %v", schema, s, err)
			}
		}
	})
}

// FuzzMatcher feeds arbitrary bytes to fixed grammars: feeding them in
// two pieces must agree with feeding them whole, a clone must not be
// disturbed, and a token mask must agree with Allowed.
func FuzzMatcher(f *testing.F) {
	f.Add([]byte(`{"name":"x","n":12,"tags":["a"]}`), 3)
	f.Add([]byte(`{"a":[1,{"b":null}],"c":"\u00e9"}`), 7)
	f.Add([]byte("\xe6\x97\xa5\xff"), 1)
	g1, _ := CompileSchema([]byte(testSchemas[13].schema), Limits{})
	g2, _ := JSONObject(Limits{})
	v := syntheticVocab(500, 9)
	c1 := NewConstraint(g1, NewVocab(v, []int32{int32(len(v) - 1)}))
	c2 := NewConstraint(g2, NewVocab(v, []int32{int32(len(v) - 1)}))
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		for _, c := range []*Constraint{c1, c2} {
			whole := c.NewMatcher()
			okWhole := whole.AcceptBytes(in)
			m := c.NewMatcher()
			k := 0
			if len(in) > 0 {
				k = int(uint(cut) % uint(len(in)+1))
			}
			ok1 := m.AcceptBytes(in[:k])
			snapshot := m.Clone()
			ok2 := ok1 && m.AcceptBytes(in[k:])
			if okWhole != ok2 {
				t.Fatalf("%q whole %v, in pieces at %d %v", in, okWhole, k, ok2)
			}
			if okWhole && whole.CanEnd() != m.CanEnd() {
				t.Fatalf("%q: CanEnd differs", in)
			}
			if ok1 {
				again := c.NewMatcher()
				again.AcceptBytes(in[:k])
				if !bytes.Equal(snapshot.stateKey(), again.stateKey()) {
					t.Fatalf("clone of the state after %q changed", in[:k])
				}
				mask := snapshot.Mask()
				for id := range int32(len(v)) {
					if (mask[id>>6]>>(id&63)&1 != 0) != snapshot.Allowed(id) {
						t.Fatalf("after %q mask and Allowed differ on %q", in[:k], v[id])
					}
				}
			}
		}
	})
}

// tryValidator compiles schema with the reference validator, turning a
// panic on a strange schema into an error.
func tryValidator(schema string) (sch *jsonschema.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("the validator panicked")
		}
	}()
	return compileValidatorErr(schema)
}
