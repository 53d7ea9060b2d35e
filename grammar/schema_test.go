package grammar

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/prefixd/prefixd/internal/schematest"
)

// testSchemas are compiled, walked at random and the results validated
// with a real JSON Schema validator. valid are instances the grammar must
// accept (compact JSON, properties in schema order).
var testSchemas = []struct {
	name, schema string
	valid        []string
}{
	{"string", `{"type":"string","maxLength":5}`, []string{`""`, `"abc"`, `"a\"b"`, `"日本"`}},
	{"bounded-string", `{"type":"string","minLength":2,"maxLength":3}`, []string{`"ab"`, `"\u00e9\n"`}},
	{"integer-range", `{"type":"integer","minimum":-17,"maximum":123}`, []string{"-17", "-1", "0", "9", "99", "123"}},
	{"integer-exclusive", `{"type":"integer","exclusiveMinimum":5,"exclusiveMaximum":1000}`, []string{"6", "999"}},
	{"integer-min", `{"type":"integer","minimum":42}`, []string{"42", "43", "100", "123456789"}},
	{"integer-max", `{"type":"integer","maximum":-3}`, []string{"-3", "-10", "-999"}},
	{"number-range", `{"type":"number","minimum":-2,"maximum":3}`, []string{"-2", "-1.5", "-0.25", "0", "2.999", "3"}},
	{"number", `{"type":"number"}`, []string{"0", "-1.5e10", "3.25E-2", "12"}},
	{"enum", `{"enum":["red","green",3,null,{"a":[1,2]}]}`, []string{`"red"`, "3", "null", `{"a":[1,2]}`}},
	{"const", `{"const":"fixed"}`, []string{`"fixed"`}},
	{"bool-null", `{"type":["boolean","null"]}`, []string{"true", "false", "null"}},
	{"array", `{"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":1,"maxItems":4}`,
		[]string{"[0]", "[1,2,3,4]"}},
	{"tuple", `{"type":"array","prefixItems":[{"type":"string","maxLength":3},{"type":"boolean"}],"items":false}`,
		[]string{`["ab",true]`}},
	{"object", `{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0,"maximum":150},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":3}},"required":["name"],"additionalProperties":false}`,
		[]string{`{"name":"x"}`, `{"name":"bob","age":30}`, `{"name":"","tags":["a","b"]}`, `{"name":"x","age":1,"tags":[]}`}},
	{"all-optional", `{"type":"object","properties":{"a":{"type":"null"},"b":{"type":"boolean"},"c":{"const":1}}}`,
		[]string{`{}`, `{"a":null}`, `{"b":true,"c":1}`, `{"a":null,"c":1}`}},
	{"nested", `{"type":"object","properties":{"user":{"type":"object","properties":{"id":{"type":"integer","minimum":1,"maximum":99999},"email":{"type":"string","format":"email"}},"required":["id","email"]},"items":{"type":"array","items":{"$ref":"#/$defs/item"},"maxItems":3}},"required":["user","items"],"$defs":{"item":{"type":"object","properties":{"sku":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{2}$"},"qty":{"type":"integer","minimum":1,"maximum":10}},"required":["sku","qty"]}}}`,
		[]string{`{"user":{"id":7,"email":"a.b@ex.com"},"items":[{"sku":"ABC-12","qty":3}]}`}},
	{"recursive", `{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"v":{"type":"integer","minimum":0,"maximum":9},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}}}`,
		[]string{`{"v":1}`, `{"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]}`}},
	{"anyOf", `{"anyOf":[{"type":"string","maxLength":3},{"type":"integer","minimum":0,"maximum":5},{"type":"array","items":{"type":"null"},"maxItems":2}]}`,
		[]string{`"ab"`, "5", "[null,null]"}},
	{"formats", `{"type":"array","prefixItems":[{"format":"date"},{"format":"time"},{"format":"date-time"},{"format":"uuid"},{"format":"ipv4"}],"items":false}`,
		[]string{`["2024-02-28","12:30:00Z","1999-12-31T23:59:59.5+01:00","123e4567-e89b-12d3-a456-426614174000","192.168.0.255"]`}},
	{"pattern", `{"type":"string","pattern":"^(\\+1 )?[0-9]{3}-[0-9]{4}$"}`, []string{`"555-1234"`, `"+1 555-1234"`}},
	{"pattern-unanchored", `{"type":"string","pattern":"[0-9]"}`, []string{`"7"`, `"xx5yy"`}},
	{"map", `{"type":"object","additionalProperties":{"type":"integer","minimum":0,"maximum":3}}`, []string{`{}`, `{"a":1,"b":3}`}},
	{"any", `{}`, []string{`{"a":[1,{"b":null}],"c":"d"}`, "1.5", `"x"`}},
	{"empty-object", `{"type":"object","additionalProperties":false}`, []string{`{}`}},
	{"escaped-keys", `{"type":"object","properties":{"a\"b":{"type":"boolean"},"c/d":{"type":"null"}},"required":["a\"b","c/d"]}`,
		[]string{`{"a\"b":true,"c/d":null}`}},
}

func compileValidatorErr(schema string) (*jsonschema.Schema, error) {
	return schematest.Compile(schema)
}

func validates(sch *jsonschema.Schema, text string) error { return schematest.Validate(sch, text) }

// randomSentence walks g at random, byte by byte, favouring the bytes
// that close strings, arrays and objects so walks end. ok is false when
// it ran out of budget first.
func randomSentence(g *Grammar, rng *rand.Rand, budget int) (string, bool) {
	m := g.NewMatcher()
	var out []byte
	var allowed, closing []byte
	for len(out) < budget {
		if m.CanEnd() && (m.Closed() || rng.IntN(4) == 0) {
			return string(out), true
		}
		allowed, closing = allowed[:0], closing[:0]
		for b := 0; b < 256; b++ {
			if m.accepts([]byte{byte(b)}) {
				allowed = append(allowed, byte(b))
				if strings.IndexByte(`"]}0123456789,tfn`, byte(b)) >= 0 {
					closing = append(closing, byte(b))
				}
			}
		}
		if len(allowed) == 0 {
			return string(out), false // a dead end: the caller reports it
		}
		pick := allowed
		if len(closing) > 0 && rng.IntN(3) > 0 {
			pick = closing
		}
		b := pick[rng.IntN(len(pick))]
		if !m.AcceptBytes([]byte{b}) {
			panic("accepts and AcceptBytes disagree")
		}
		out = append(out, b)
	}
	return string(out), false
}

func TestSchemaRandomWalksValidate(t *testing.T) {
	walks := 200
	if testing.Short() {
		walks = 20
	}
	for _, tc := range testSchemas {
		t.Run(tc.name, func(t *testing.T) {
			g, err := CompileSchema([]byte(tc.schema), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			sch := schematest.MustCompile(t, tc.schema)
			for _, v := range tc.valid {
				if err := validates(sch, v); err != nil {
					t.Fatalf("test bug: %s does not validate: %v", v, err)
				}
				if !g.Match([]byte(v)) {
					t.Errorf("grammar rejects valid %s", v)
				}
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
			finished := 0
			for range walks {
				s, ok := randomSentence(g, rng, 400)
				if !ok {
					if m := g.NewMatcher(); m.AcceptBytes([]byte(s)) && len(m.leaves) == 0 && !m.CanEnd() {
						t.Fatalf("dead end after %q", s)
					}
					continue
				}
				finished++
				if err := validates(sch, s); err != nil {
					t.Fatalf("grammar produced %s, which does not validate: %v", s, err)
				}
			}
			if finished < walks/2 {
				t.Errorf("only %d of %d walks finished", finished, walks)
			}
		})
	}
}

// TestSchemaMutationsSound mutates valid instances: whatever mutant the
// grammar still accepts must validate.
func TestSchemaMutationsSound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	alphabet := []byte(`{}[]",:0123456789-.eEabcnultrf\ `)
	for _, tc := range testSchemas {
		g, err := CompileSchema([]byte(tc.schema), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		sch := schematest.MustCompile(t, tc.schema)
		for _, v := range tc.valid {
			for range 300 {
				b := []byte(v)
				switch i := rng.IntN(len(b) + 1); rng.IntN(3) {
				case 0:
					b = append(b[:i:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i:]...)...)
				case 1:
					if i < len(b) {
						b = append(b[:i:i], b[i+1:]...)
					}
				case 2:
					if i < len(b) {
						b[i] = alphabet[rng.IntN(len(alphabet))]
					}
				}
				if g.Match(b) {
					if err := validates(sch, string(b)); err != nil {
						t.Errorf("%s: grammar accepts %s, which does not validate: %v", tc.name, b, err)
					}
				}
			}
		}
	}
}

func TestSchemaErrors(t *testing.T) {
	deep := strings.Repeat(`{"type":"array","items":`, 100) + `{"type":"null"}` + strings.Repeat("}", 100)
	cases := []struct{ schema, path, msg string }{
		{`{"type":"strin"}`, "#/type", "unknown type"},
		{`{"properties":{"a":{"not":{}}}}`, "#/properties/a/not", "not supported"},
		{`{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`, "#/required", "no schema"},
		{`{"$ref":"#/$defs/missing"}`, "#/$ref", "does not resolve"},
		{`{"$ref":"http://x/y"}`, "#/$ref", "only references"},
		{`{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`, "#/$defs/", "left recursion"},
		{`{"type":"string","maxLength":1,"minLength":2}`, "#/maxLength", "below"},
		{`{"type":"number","minimum":0.5}`, "#/minimum", "inclusive integers"},
		{`{"type":"integer","minimum":5,"maximum":4}`, "#", "admit no"},
		{`{"type":"string","pattern":"(?<=a)b"}`, "#/pattern", "bad regular expression"},
		{`{"type":"string","pattern":"a\\bb"}`, "#/pattern", "word boundaries"},
		{deep, "#/items/items", "deeper than"},
		{`{"type":"array","maxItems":100000}`, "#", "above"},
		{`{"anyOf":[]}`, "#/anyOf", "non-empty"},
		{`false`, "#", "admits no value"},
		{`{"type":"object"`, "#", "not JSON"},
		{`{"properties":{"a":{"multipleOf":2}}}`, "#/properties/a/multipleOf", "not supported"},
	}
	for _, tc := range cases {
		_, err := CompileSchema([]byte(tc.schema), Limits{})
		var ge *Error
		if !errors.As(err, &ge) || !strings.HasPrefix(ge.Path, tc.path) || !strings.Contains(ge.Msg, tc.msg) {
			t.Errorf("CompileSchema(%.60s) = %v, want an error at %s saying %q", tc.schema, err, tc.path, tc.msg)
		}
	}
}

func TestSchemaTooLarge(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range 3000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"p` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + `` + string(rune('0'+i%10)) + `":{"type":"string","maxLength":500}`)
	}
	b.WriteString("}}")
	_, err := CompileSchema([]byte(b.String()), Limits{MaxElems: 100_000})
	var ge *Error
	if !errors.As(err, &ge) || !strings.Contains(ge.Msg, "more than") && !strings.Contains(ge.Msg, "larger than") {
		t.Fatalf("got %v, want a too-large error", err)
	}
}

func TestJSONObject(t *testing.T) {
	g, err := JSONObject(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"b":[true,null,"x",-0.5e3]}}`} {
		if !g.Match([]byte(s)) {
			t.Errorf("rejects %s", s)
		}
	}
	for _, s := range []string{`[]`, `1`, `{"a":}`, `{"a":1,}`, `{a:1}`} {
		if g.Match([]byte(s)) {
			t.Errorf("accepts %s", s)
		}
	}
}

func TestCompileSchemaWithin(t *testing.T) {
	g, err := CompileSchemaWithin([]byte(`{"type":"integer","minimum":1,"maximum":3}`), "<x>\n", "\n</x>", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{"<x>\n2\n</x>": true, "2": false, "<x>\n4\n</x>": false, "<x>\n1\n</x>\n": false} {
		if g.Match([]byte(s)) != want {
			t.Errorf("Match(%q) = %v", s, !want)
		}
	}
}

// TestManyOptionalPropertiesBounded: optional properties cost a number of
// alternatives quadratic in their count; too many is an error, found
// before building them.
func TestManyOptionalPropertiesBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range 2000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d":{"type":"null"}`, i)
	}
	b.WriteString("}}")
	_, err := CompileSchema([]byte(b.String()), Limits{})
	var ge *Error
	if !errors.As(err, &ge) || ge.Path != "#/properties" || !strings.Contains(ge.Msg, "alternatives") {
		t.Fatalf("got %v, want an error at #/properties about alternatives", err)
	}
}
