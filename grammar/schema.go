package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Bounds the JSON grammars put on numbers, so every number they produce
// is exact in a float64 and output ends within a bounded length.
const (
	maxIntDigits  = 15 // integer digits of a number
	maxFracDigits = 15 // fraction digits
	maxExpDigits  = 2  // exponent digits
	intCap        = 999_999_999_999_999
)

// CompileSchema compiles a JSON Schema to a Grammar for the compact JSON
// text (no whitespace between tokens) of values that validate against it.
// Supported: type (one or a list), enum, const, properties with required
// (emitted in schema order, optional ones optional), additionalProperties
// (false, or a schema for objects without properties), items,
// prefixItems, minItems, maxItems, minLength, maxLength, pattern,
// the formats date, time, date-time, uuid, ipv4 and email (other formats
// are annotations and are not enforced), integer minimum and maximum
// (exclusive too), number minimum and maximum when they are integers,
// anyOf, oneOf (as anyOf: the branches should be disjoint), allOf with
// one branch, $ref to "#" or a JSON pointer into the schema ($defs,
// definitions), and boolean schemas. Keywords that would constrain values
// in ways the grammar cannot (not, if, multipleOf, uniqueItems, ...) are
// an error naming their path. Numbers have at most 15 integer and 15
// fraction digits and 2 exponent digits.
func CompileSchema(schema []byte, lim Limits) (*Grammar, error) {
	return CompileSchemaWithin(schema, "", "", lim)
}

// CompileSchemaWithin is CompileSchema for text that wraps the JSON in
// prefix and suffix, as tool calls do (<tool_call>...</tool_call>).
func CompileSchemaWithin(schema []byte, prefix, suffix string, lim Limits) (*Grammar, error) {
	root, err := decodeOrdered(schema)
	if err != nil {
		return nil, errorf("#", "schema is not JSON: %v", err)
	}
	c := &schemaComp{b: newBuilder(lim), root: root, refs: map[string]bool{}}
	e, err := c.value(root, "#", 0)
	if err != nil {
		return nil, err
	}
	c.b.define("root", seq(lit(prefix), e, lit(suffix)), "#")
	return c.b.build("root")
}

// JSONObject returns the grammar of any compact JSON object, for
// response_format json_object.
func JSONObject(lim Limits) (*Grammar, error) {
	c := &schemaComp{b: newBuilder(lim), refs: map[string]bool{}}
	c.anyJSON()
	c.b.define("root", ref("json-object"), "#")
	return c.b.build("root")
}

type schemaComp struct {
	b     *builder
	root  any
	refs  map[string]bool // $ref targets given rules
	nodes int
	any   bool // the any-JSON rules are defined
}

// anyJSON defines the rules for any JSON value and returns its start.
func (c *schemaComp) anyJSON() *expr {
	if !c.any {
		c.any = true
		c.b.define("json-value", alt(ref("json-object"), ref("json-array"), ref("json-string"),
			ref("json-number"), lit("true"), lit("false"), lit("null")), "#")
		member := seq(ref("json-string"), lit(":"), ref("json-value"))
		c.b.define("json-object", seq(lit("{"), opt(seq(member, star(seq(lit(","), member)))), lit("}")), "#")
		c.b.define("json-array", seq(lit("["), opt(seq(ref("json-value"), star(seq(lit(","), ref("json-value"))))), lit("]")), "#")
		c.b.define("json-string", seq(lit(`"`), star(jsonChar()), lit(`"`)), "#")
		c.b.define("json-number", numberExpr(), "#")
	}
	return ref("json-value")
}

// jsonChar is one character of a JSON string, escaped or not; each
// decodes to one code point (\u escapes of surrogates are not produced).
func jsonChar() *expr {
	hex := class(runeRange{'0', '9'}, runeRange{'a', 'f'}, runeRange{'A', 'F'})
	u := alt(
		seq(class(runeRange{'0', '9'}, runeRange{'a', 'c'}, runeRange{'A', 'C'}, runeRange{'e', 'f'}, runeRange{'E', 'F'}), hex, hex, hex),
		seq(class(runeRange{'d', 'd'}, runeRange{'D', 'D'}), class(runeRange{'0', '7'}), hex, hex))
	return alt(
		class(runeRange{0x20, 0x21}, runeRange{0x23, 0x5B}, runeRange{0x5D, 0x10FFFF}),
		seq(lit(`\`), alt(class(runeRange{'"', '"'}, runeRange{'\\', '\\'}, runeRange{'/', '/'},
			runeRange{'b', 'b'}, runeRange{'f', 'f'}, runeRange{'n', 'n'}, runeRange{'r', 'r'}, runeRange{'t', 't'}),
			seq(lit("u"), u))))
}

func digits(lo, hi int) *expr { return repeat(class(runeRange{'0', '9'}), lo, hi) }

func intPart() *expr {
	return alt(lit("0"), seq(class(runeRange{'1', '9'}), digits(0, maxIntDigits-1)))
}

func fracPart() *expr { return seq(lit("."), digits(1, maxFracDigits)) }

func numberExpr() *expr {
	exp := seq(class(runeRange{'e', 'e'}, runeRange{'E', 'E'}), opt(class(runeRange{'+', '+'}, runeRange{'-', '-'})), digits(1, maxExpDigits))
	return seq(opt(lit("-")), intPart(), opt(fracPart()), opt(exp))
}

// keywords that only annotate, and those we refuse because the grammar
// cannot enforce them.
var (
	annotations = map[string]bool{"title": true, "description": true, "default": true, "examples": true,
		"$schema": true, "$id": true, "$comment": true, "$defs": true, "definitions": true, "deprecated": true,
		"readOnly": true, "writeOnly": true, "format": true, "contentEncoding": true, "contentMediaType": true,
		"$anchor": true, "strict": true, "discriminator": true}
	handled = map[string]bool{"type": true, "enum": true, "const": true, "properties": true, "required": true,
		"additionalProperties": true, "items": true, "prefixItems": true, "minItems": true, "maxItems": true,
		"minLength": true, "maxLength": true, "pattern": true, "minimum": true, "maximum": true,
		"exclusiveMinimum": true, "exclusiveMaximum": true, "anyOf": true, "oneOf": true, "allOf": true, "$ref": true}
)

func ptr(path, key string) string {
	return path + "/" + strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// value compiles the schema s found at path.
func (c *schemaComp) value(s any, path string, depth int) (*expr, error) {
	c.nodes++
	if c.nodes > c.b.lim.MaxSchemaNodes {
		return nil, errorf(path, "schema has more than %d subschemas", c.b.lim.MaxSchemaNodes)
	}
	if depth > c.b.lim.MaxDepth {
		return nil, errorf(path, "schema nested deeper than %d", c.b.lim.MaxDepth)
	}
	switch s := s.(type) {
	case bool:
		if !s {
			return nil, errorf(path, "schema false admits no value")
		}
		return c.anyJSON(), nil
	case *omap:
		return c.object(s.vals, path, depth)
	}
	return nil, errorf(path, "a schema must be an object or a boolean")
}

func (c *schemaComp) object(s map[string]any, path string, depth int) (*expr, error) {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !handled[k] && !annotations[k] {
			return nil, errorf(ptr(path, k), "keyword %q is not supported", k)
		}
	}
	if r, ok := s["$ref"]; ok {
		return c.ref(r, ptr(path, "$ref"), depth)
	}
	if v, ok := s["const"]; ok {
		return lit(compactJSON(v)), nil
	}
	if v, ok := s["enum"]; ok {
		vs, ok := v.([]any)
		if !ok || len(vs) == 0 {
			return nil, errorf(ptr(path, "enum"), "enum must be a non-empty array")
		}
		texts := make([]string, len(vs))
		for i, x := range vs {
			texts[i] = compactJSON(x)
		}
		return literals(texts), nil
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if v, ok := s[k]; ok {
			vs, ok := v.([]any)
			if !ok || len(vs) == 0 {
				return nil, errorf(ptr(path, k), "%s must be a non-empty array", k)
			}
			alts := make([]*expr, len(vs))
			for i, x := range vs {
				e, err := c.value(x, ptr(path, k)+"/"+strconv.Itoa(i), depth+1)
				if err != nil {
					return nil, err
				}
				alts[i] = e
			}
			return alt(alts...), nil
		}
	}
	if v, ok := s["allOf"]; ok {
		vs, ok := v.([]any)
		if !ok || len(vs) != 1 {
			return nil, errorf(ptr(path, "allOf"), "allOf is supported with exactly one schema")
		}
		return c.value(vs[0], ptr(path, "allOf")+"/0", depth+1)
	}
	var types []string
	switch t := s["type"].(type) {
	case nil:
		// Without a type, keep to the types the keywords speak of
		// (a subset of what validates: each applies its keywords).
		for _, k := range []struct {
			typ  string
			keys []string
		}{
			{"object", []string{"properties", "additionalProperties", "required"}},
			{"array", []string{"items", "prefixItems", "minItems", "maxItems"}},
			{"string", []string{"pattern", "format", "minLength", "maxLength"}},
			{"number", []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}},
		} {
			for _, key := range k.keys {
				if _, ok := s[key]; ok {
					types = append(types, k.typ)
					break
				}
			}
		}
		if len(types) == 0 {
			return c.anyJSON(), nil
		}
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			name, ok := x.(string)
			if !ok {
				return nil, errorf(ptr(path, "type"), "type must be a string or an array of strings")
			}
			types = append(types, name)
		}
	default:
		return nil, errorf(ptr(path, "type"), "type must be a string or an array of strings")
	}
	if len(types) == 0 {
		return nil, errorf(ptr(path, "type"), "type is empty")
	}
	alts := make([]*expr, 0, len(types))
	for _, t := range types {
		var e *expr
		var err error
		switch t {
		case "null":
			e = lit("null")
		case "boolean":
			e = alt(lit("true"), lit("false"))
		case "string":
			e, err = c.str(s, path)
		case "integer", "number":
			e, err = c.number(s, path, t == "integer")
		case "array":
			e, err = c.array(s, path, depth)
		case "object":
			e, err = c.obj(s, path, depth)
		default:
			err = errorf(ptr(path, "type"), "unknown type %q", t)
		}
		if err != nil {
			return nil, err
		}
		alts = append(alts, e)
	}
	return alt(alts...), nil
}

// ref compiles a $ref: a named rule per target, so recursive schemas
// become recursive rules.
func (c *schemaComp) ref(r any, path string, depth int) (*expr, error) {
	target, ok := r.(string)
	if !ok {
		return nil, errorf(path, "$ref must be a string")
	}
	if target != "#" && !strings.HasPrefix(target, "#/") {
		return nil, errorf(path, "$ref %q: only references into this schema (# or #/...) are supported", target)
	}
	name := "ref:" + target
	if c.refs[target] {
		return ref(name), nil
	}
	node := c.root
	if target != "#" {
		for _, tok := range strings.Split(target[2:], "/") {
			if u, err := url.PathUnescape(tok); err == nil {
				tok = u
			}
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch n := node.(type) {
			case *omap:
				node, ok = n.vals[tok]
			case []any:
				i, err := strconv.Atoi(tok)
				ok = err == nil && i >= 0 && i < len(n)
				if ok {
					node = n[i]
				}
			default:
				ok = false
			}
			if !ok {
				return nil, errorf(path, "$ref %q does not resolve", target)
			}
		}
	}
	c.refs[target] = true
	c.b.rule(name)
	e, err := c.value(node, target, depth+1)
	if err != nil {
		return nil, err
	}
	c.b.define(name, e, target)
	return ref(name), nil
}

// intField reads a non-negative integer keyword.
func intField(s map[string]any, key, path string, def int) (int, error) {
	v, ok := s[key]
	if !ok {
		return def, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, errorf(ptr(path, key), "%s must be a number", key)
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || i < 0 || i > math.MaxInt32 {
		return 0, errorf(ptr(path, key), "%s must be a non-negative integer", key)
	}
	return int(i), nil
}

// countBounds reads a minimum and maximum count keyword pair (-1: no
// maximum), checking they are ordered and within Limits.MaxRepeat.
func (c *schemaComp) countBounds(s map[string]any, path, minKey, maxKey string) (int, int, error) {
	lo, err := intField(s, minKey, path, 0)
	if err != nil {
		return 0, 0, err
	}
	hi, err := intField(s, maxKey, path, -1)
	if err != nil {
		return 0, 0, err
	}
	if hi >= 0 && hi < lo {
		return 0, 0, errorf(ptr(path, maxKey), "%s %d is below %s %d", maxKey, hi, minKey, lo)
	}
	if lo > c.b.lim.MaxRepeat || hi > c.b.lim.MaxRepeat {
		return 0, 0, errorf(path, "%s or %s above %d is not supported", minKey, maxKey, c.b.lim.MaxRepeat)
	}
	return lo, hi, nil
}

func (c *schemaComp) str(s map[string]any, path string) (*expr, error) {
	lo, hi, err := c.countBounds(s, path, "minLength", "maxLength")
	if err != nil {
		return nil, err
	}
	bounded := lo > 0 || hi >= 0
	if p, ok := s["pattern"]; ok {
		re, ok := p.(string)
		if !ok {
			return nil, errorf(ptr(path, "pattern"), "pattern must be a string")
		}
		if bounded {
			return nil, errorf(ptr(path, "pattern"), "pattern together with minLength or maxLength is not supported")
		}
		// A schema pattern is unanchored: it may match anywhere.
		if !strings.HasPrefix(re, "^") {
			re = "(?s:.*)(?:" + re + ")"
		} else {
			re = "(?:" + re + ")"
		}
		if !strings.HasSuffix(re, "$)") || strings.HasSuffix(re, `\$)`) {
			re += "(?s:.*)"
		}
		e, err := regexExpr(re, c.b.lim, ptr(path, "pattern"), true)
		if err != nil {
			return nil, err
		}
		return seq(lit(`"`), e, lit(`"`)), nil
	}
	if f, ok := s["format"].(string); ok {
		if e := formatExpr(f); e != nil {
			if bounded {
				return nil, errorf(ptr(path, "format"), "format together with minLength or maxLength is not supported")
			}
			return seq(lit(`"`), e, lit(`"`)), nil
		}
	}
	return seq(lit(`"`), repeat(jsonChar(), lo, hi), lit(`"`)), nil
}

// formatExpr is the grammar of a string format we enforce, nil for one
// we treat as an annotation.
func formatExpr(f string) *expr {
	d := class(runeRange{'0', '9'})
	two := func(a, b string) *expr { return seq(lit(a), class(runeRange{rune(b[0]), rune(b[1])})) }
	hex := class(runeRange{'0', '9'}, runeRange{'a', 'f'}, runeRange{'A', 'F'})
	date := func() *expr {
		day28 := alt(seq(lit("0"), class(runeRange{'1', '9'})), seq(class(runeRange{'1', '2'}), d))
		day30 := alt(day28, lit("30"))
		day31 := alt(day30, lit("31"))
		return seq(repeat(d, 4, 4), lit("-"), alt(
			seq(alt(lit("01"), lit("03"), lit("05"), lit("07"), lit("08"), lit("10"), lit("12")), lit("-"), day31),
			seq(alt(lit("04"), lit("06"), lit("09"), lit("11")), lit("-"), day30),
			seq(lit("02-"), day28)))
	}
	hour := alt(seq(class(runeRange{'0', '1'}), d), two("2", "03"))
	minute := seq(class(runeRange{'0', '5'}), d)
	tm := func() *expr {
		return seq(hour, lit(":"), minute, lit(":"), minute, opt(seq(lit("."), repeat(d, 1, 6))),
			alt(lit("Z"), seq(class(runeRange{'+', '+'}, runeRange{'-', '-'}), hour, lit(":"), minute)))
	}
	switch f {
	case "date":
		return date()
	case "time":
		return tm()
	case "date-time":
		return seq(date(), lit("T"), tm())
	case "uuid":
		return seq(repeat(hex, 8, 8), lit("-"), repeat(hex, 4, 4), lit("-"), repeat(hex, 4, 4), lit("-"),
			repeat(hex, 4, 4), lit("-"), repeat(hex, 12, 12))
	case "ipv4":
		octet := alt(d, seq(class(runeRange{'1', '9'}), d), seq(lit("1"), d, d), seq(lit("2"), class(runeRange{'0', '4'}), d), seq(lit("25"), class(runeRange{'0', '5'})))
		return seq(octet, lit("."), octet, lit("."), octet, lit("."), octet)
	case "email":
		atom := repeat(class(runeRange{'a', 'z'}, runeRange{'A', 'Z'}, runeRange{'0', '9'}, runeRange{'_', '_'}, runeRange{'+', '+'}, runeRange{'-', '-'}), 1, 15)
		alnum := class(runeRange{'a', 'z'}, runeRange{'A', 'Z'}, runeRange{'0', '9'})
		label := seq(alnum, opt(seq(repeat(alt(alnum, lit("-")), 0, 30), alnum)))
		return seq(atom, repeat(seq(lit("."), atom), 0, 3), lit("@"), label, repeat(seq(lit("."), label), 1, 3))
	}
	return nil
}

// bound reads a numeric keyword as a float64; ok is false when absent.
func bound(s map[string]any, key, path string) (float64, bool, error) {
	v, present := s[key]
	if !present {
		return 0, false, nil
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return 0, false, errorf(ptr(path, key), "%s must be a number", key)
	}
	f, err := n.Float64()
	if err != nil {
		return 0, false, errorf(ptr(path, key), "%s: %v", key, err)
	}
	return f, true, nil
}

func (c *schemaComp) number(s map[string]any, path string, integer bool) (*expr, error) {
	lo, hi := math.Inf(-1), math.Inf(1)
	for _, k := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		v, ok, err := bound(s, k, path)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if !integer && (strings.HasPrefix(k, "exclusive") || v != math.Trunc(v)) {
			return nil, errorf(ptr(path, k), "number bounds are enforced only as inclusive integers; use minimum/maximum with integers or type integer")
		}
		switch k {
		case "minimum":
			lo = math.Max(lo, math.Ceil(v))
		case "exclusiveMinimum":
			lo = math.Max(lo, math.Floor(v)+1)
		case "maximum":
			hi = math.Min(hi, math.Floor(v))
		case "exclusiveMaximum":
			hi = math.Min(hi, math.Ceil(v)-1)
		}
	}
	if lo > hi {
		return nil, errorf(path, "the bounds admit no %s", map[bool]string{true: "integer", false: "number"}[integer])
	}
	if math.IsInf(lo, -1) && math.IsInf(hi, 1) {
		if integer {
			return seq(opt(lit("-")), intPart()), nil
		}
		return numberExpr(), nil
	}
	clamp := func(f float64) int64 { return int64(math.Max(-intCap, math.Min(intCap, f))) }
	l, h := clamp(lo), clamp(hi)
	if lo > intCap || hi < -intCap {
		return nil, errorf(path, "bounds beyond ±%d are not supported", int64(intCap))
	}
	var alts []*expr
	if integer {
		if l < 0 {
			alts = append(alts, seq(lit("-"), digitRange(uint64(max(1, -h)), uint64(-l))))
		}
		if h >= 0 {
			alts = append(alts, digitRange(uint64(max(0, l)), uint64(h)))
		}
		return alt(alts...), nil
	}
	// A number k.f lies strictly between k and k+1; so a fraction is
	// allowed on integer parts below the far bound, not on the bound.
	if l < 0 {
		kmin := uint64(0)
		if h < 0 {
			kmin = uint64(-h)
		}
		kmax := uint64(-l)
		if kmax > kmin {
			alts = append(alts, seq(lit("-"), digitRange(kmin, kmax-1), opt(fracPart())))
		}
		if kmax >= kmin && kmax > 0 {
			alts = append(alts, seq(lit("-"), digitRange(kmax, kmax)))
		}
	}
	if h >= 0 {
		kmin := uint64(max(0, l))
		kmax := uint64(h)
		if kmax > kmin {
			alts = append(alts, seq(digitRange(kmin, kmax-1), opt(fracPart())))
		}
		alts = append(alts, digitRange(kmax, kmax))
	}
	return alt(alts...), nil
}

// digitRange is the decimal spellings, without leading zeros, of the
// integers lo..hi.
func digitRange(lo, hi uint64) *expr {
	var alts []*expr
	a := strconv.FormatUint(lo, 10)
	for n := len(a); ; n++ {
		top := uint64(math.Pow10(n)) - 1
		from := lo
		if n > len(a) {
			from = uint64(math.Pow10(n - 1))
		}
		to := min(hi, top)
		if from <= to {
			alts = append(alts, sameLen(strconv.FormatUint(from, 10), strconv.FormatUint(to, 10)))
		}
		if hi <= top {
			break
		}
	}
	return alt(alts...)
}

// sameLen is the decimal strings of one length between a and b.
func sameLen(a, b string) *expr {
	if a == "" {
		return seq()
	}
	if a[0] == b[0] {
		return seq(lit(a[:1]), sameLen(a[1:], b[1:]))
	}
	d := class(runeRange{'0', '9'})
	rest := len(a) - 1
	if strings.Trim(a[1:], "0") == "" && strings.Trim(b[1:], "9") == "" {
		return seq(class(runeRange{rune(a[0]), rune(b[0])}), repeat(d, rest, rest))
	}
	alts := []*expr{seq(lit(a[:1]), sameLen(a[1:], strings.Repeat("9", rest)))}
	if b[0]-a[0] > 1 {
		alts = append(alts, seq(class(runeRange{rune(a[0] + 1), rune(b[0] - 1)}), repeat(d, rest, rest)))
	}
	alts = append(alts, seq(lit(b[:1]), sameLen(strings.Repeat("0", rest), b[1:])))
	return alt(alts...)
}

func (c *schemaComp) array(s map[string]any, path string, depth int) (*expr, error) {
	lo, hi, err := c.countBounds(s, path, "minItems", "maxItems")
	if err != nil {
		return nil, err
	}
	var prefix []*expr
	if p, ok := s["prefixItems"]; ok {
		ps, ok := p.([]any)
		if !ok {
			return nil, errorf(ptr(path, "prefixItems"), "prefixItems must be an array")
		}
		if hi >= 0 && len(ps) > hi {
			return nil, errorf(ptr(path, "prefixItems"), "more prefixItems than maxItems is not supported")
		}
		for i, x := range ps {
			e, err := c.value(x, ptr(path, "prefixItems")+"/"+strconv.Itoa(i), depth+1)
			if err != nil {
				return nil, err
			}
			if i > 0 {
				prefix = append(prefix, lit(","))
			}
			prefix = append(prefix, e)
		}
	}
	var item *expr
	if it, ok := s["items"]; ok && it != false {
		if item, err = c.value(it, ptr(path, "items"), depth+1); err != nil {
			return nil, err
		}
	} else if !ok && len(prefix) == 0 {
		item = c.anyJSON()
	}
	np := (len(prefix) + 1) / 2
	if item == nil {
		if lo > np {
			return nil, errorf(path, "minItems %d needs more items than the schema allows", lo)
		}
		return seq(lit("["), seq(prefix...), lit("]")), nil
	}
	lo, hi = max(0, lo-np), hi-np
	if hi < -1 {
		hi = -1
	}
	if np > 0 {
		// Every further item follows a comma.
		more := repeat(seq(lit(","), item), lo, hi)
		return seq(lit("["), seq(prefix...), more, lit("]")), nil
	}
	if hi == 0 {
		return lit("[]"), nil
	}
	nonEmpty := seq(item, repeat(seq(lit(","), item), max(0, lo-1), max(-1, hi-1)))
	if hi < 0 {
		nonEmpty = seq(item, repeat(seq(lit(","), item), max(0, lo-1), -1))
	}
	if lo == 0 {
		return seq(lit("["), opt(nonEmpty), lit("]")), nil
	}
	return seq(lit("["), nonEmpty, lit("]")), nil
}

func (c *schemaComp) obj(s map[string]any, path string, depth int) (*expr, error) {
	props, _ := s["properties"].(*omap)
	if _, ok := s["properties"]; ok && props == nil {
		return nil, errorf(ptr(path, "properties"), "properties must be an object")
	}
	required := map[string]bool{}
	if r, ok := s["required"]; ok {
		rs, ok := r.([]any)
		if !ok {
			return nil, errorf(ptr(path, "required"), "required must be an array of strings")
		}
		for _, x := range rs {
			name, ok := x.(string)
			if !ok {
				return nil, errorf(ptr(path, "required"), "required must be an array of strings")
			}
			if props == nil || props.vals[name] == nil {
				return nil, errorf(ptr(path, "required"), "required property %q has no schema in properties", name)
			}
			required[name] = true
		}
	}
	addl, hasAddl := s["additionalProperties"]
	if props == nil || len(props.keys) == 0 {
		if hasAddl && addl == false {
			return lit("{}"), nil
		}
		val := c.anyJSON()
		if hasAddl && addl != true {
			var err error
			if val, err = c.value(addl, ptr(path, "additionalProperties"), depth+1); err != nil {
				return nil, err
			}
		}
		member := seq(ref("json-string"), lit(":"), val)
		c.anyJSON()
		return seq(lit("{"), opt(seq(member, star(seq(lit(","), member)))), lit("}")), nil
	}
	// Properties come in the schema's order, as models expect to write them.
	names := props.keys
	kv := make([]*expr, len(names))
	for i, k := range names {
		e, err := c.value(props.vals[k], ptr(ptr(path, "properties"), k), depth+1)
		if err != nil {
			return nil, err
		}
		kv[i] = seq(lit(compactJSON(k)+":"), e)
	}
	n := len(names)
	// firstReq[i] is the first required property at or after i (n: none).
	firstReq := make([]int, n+1)
	firstReq[n] = n
	for i := n - 1; i >= 0; i-- {
		firstReq[i] = firstReq[i+1]
		if required[names[i]] {
			firstReq[i] = i
		}
	}
	// Optional properties multiply the alternatives: bound them before
	// building any.
	alts := 0
	for i := 0; i <= n; i++ {
		alts += min(firstReq[i], n-1) - i + 1
	}
	if alts > c.b.lim.MaxElems/4 {
		return nil, errorf(ptr(path, "properties"), "%d properties with so many optional ones need %d alternatives, more than the limit allows", n, alts)
	}
	// rest(i): the properties from i on, after at least one was written.
	// Each is a rule so the choices share their tails.
	base := fmt.Sprintf("%s/properties~rest", path)
	for i := n; i >= 0; i-- {
		var alts []*expr
		for j := i; j <= min(firstReq[i], n-1); j++ {
			alts = append(alts, seq(lit(","), kv[j], ref(fmt.Sprintf("%s%d", base, j+1))))
		}
		if firstReq[i] == n {
			alts = append(alts, seq())
		}
		c.b.define(fmt.Sprintf("%s%d", base, i), alt(alts...), path)
	}
	var first []*expr
	for j := 0; j <= min(firstReq[0], n-1); j++ {
		first = append(first, seq(kv[j], ref(fmt.Sprintf("%s%d", base, j+1))))
	}
	if firstReq[0] == n {
		first = append(first, seq())
	}
	return seq(lit("{"), alt(first...), lit("}")), nil
}

// compactJSON is v's compact JSON text.
func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen for decoded JSON
		panic(err)
	}
	return string(b)
}

// omap is a JSON object that remembers its keys' order.
type omap struct {
	keys []string
	vals map[string]any
}

// MarshalJSON writes the object with its keys in their original order.
func (o *omap) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, k := range o.keys {
		if i > 0 {
			b = append(b, ',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, kb...), ':'), vb...)
	}
	return append(b, '}'), nil
}

// decodeOrdered decodes one JSON value, objects as *omap (a repeated key
// keeps its last value and first position) and numbers as json.Number.
func decodeOrdered(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the schema")
	}
	return v, nil
}

// maxJSONDepth bounds the nesting decodeValue follows.
const maxJSONDepth = 1000

func decodeValue(d *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxJSONDepth)
	}
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		o := &omap{vals: map[string]any{}}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := decodeValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; !dup {
				o.keys = append(o.keys, k)
			}
			o.vals[k] = v
		}
		_, err := d.Token()
		return o, err
	case json.Delim('['):
		a := []any{}
		for d.More() {
			v, err := decodeValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := d.Token()
		return a, err
	}
	return t, nil
}
