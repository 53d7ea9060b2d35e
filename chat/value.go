package chat

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Template values are Go values: nil (None), bool, int, float64, string,
// *list (lists and tuples), *dict (dicts and namespaces), undefined,
// callable (macros, filters' functions, bound methods) and *loop.
type (
	list struct{ items []any }
	dict struct {
		keys      []any // in insertion order
		vals      map[any]any
		namespace bool // a namespace(): its attributes may be set
	}
	// undefined is a name or attribute that does not exist: it prints as
	// "", is false, and its attributes are undefined too.
	undefined struct{}
	callable  interface {
		call(ev *evaluator, args []any, kwargs map[string]any) (any, error)
	}
	// function is a Go function the template may call.
	function struct {
		name string
		fn   func(ev *evaluator, args []any, kwargs map[string]any) (any, error)
	}
)

func (f *function) call(ev *evaluator, args []any, kwargs map[string]any) (any, error) {
	return f.fn(ev, args, kwargs)
}

func newDict() *dict { return &dict{vals: map[any]any{}} }

func (d *dict) get(k any) (any, bool) {
	v, ok := d.vals[hashKey(k)]
	return v, ok
}

func (d *dict) set(k, v any) {
	k = hashKey(k)
	if _, ok := d.vals[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.vals[k] = v
}

// hashKey maps a float key that holds an integer to that int, as Python
// hashes 1.0 and 1 alike.
func hashKey(k any) any {
	if f, ok := k.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int(f)
	}
	return k
}

func hashable(k any) bool {
	switch k.(type) {
	case nil, bool, int, float64, string:
		return true
	}
	return false
}

// fromGo converts an input value (Vars, messages) to a template value.
// Maps come out with their keys sorted, having no order of their own.
func fromGo(v any, depth int, size *int) (any, error) {
	if depth > 64 {
		return nil, fmt.Errorf("a variable nests deeper than 64 levels")
	}
	switch x := v.(type) {
	case nil, bool, int, float64:
		return x, nil
	case string:
		*size += len(x)
		return x, nil
	case float32:
		return float64(x), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return int(i), nil
		}
		f, err := x.Float64()
		return f, err
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if rv.Uint() > math.MaxInt64 {
			return float64(rv.Uint()), nil
		}
		return int(rv.Uint()), nil
	case reflect.String:
		*size += rv.Len()
		return rv.String(), nil
	case reflect.Slice, reflect.Array:
		l := &list{items: make([]any, rv.Len())}
		for i := range l.items {
			e, err := fromGo(rv.Index(i).Interface(), depth+1, size)
			if err != nil {
				return nil, err
			}
			l.items[i] = e
		}
		*size += 16 * len(l.items)
		return l, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("a map variable has %s keys, not strings", rv.Type().Key())
		}
		keys := rv.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return cmp.Compare(a.String(), b.String()) })
		d := newDict()
		for _, k := range keys {
			e, err := fromGo(rv.MapIndex(k).Interface(), depth+1, size)
			if err != nil {
				return nil, err
			}
			d.set(k.String(), e)
		}
		*size += 16 * len(keys)
		return d, nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return fromGo(rv.Elem().Interface(), depth+1, size)
	}
	return nil, fmt.Errorf("a variable of type %T cannot be given to a template", v)
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil, undefined:
		return false
	case bool:
		return x
	case int:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case *list:
		return len(x.items) > 0
	case *dict:
		return len(x.keys) > 0 || x.namespace
	}
	return true
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "none"
	case undefined:
		return "undefined"
	case bool:
		return "bool"
	case int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case *list:
		return "list"
	case *dict:
		return "dict"
	case *loop:
		return "loop"
	case callable:
		return "function"
	}
	return fmt.Sprintf("%T", v)
}

// formatFloat spells f as Python's repr does.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	if a := math.Abs(f); a != 0 && (a < 1e-4 || a >= 1e16) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Python writes at least two exponent digits, as Go does.
		return s
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// toStr is Jinja's str(v), as {{ v }} prints it.
func (ev *evaluator) toStr(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case undefined:
		return "", nil
	case nil:
		return "None", nil
	}
	var b strings.Builder
	if err := ev.repr(&b, v, false); err != nil {
		return "", err
	}
	return b.String(), ev.b.str(b.Len())
}

// repr writes v as Python's repr does (str for the top-level string when
// quote is false), bounded by the budget.
func (ev *evaluator) repr(b *strings.Builder, v any, quote bool) error {
	if err := ev.b.step(1); err != nil {
		return err
	}
	if err := ev.b.fits(b.Len()); err != nil {
		return err
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case undefined:
		if quote {
			b.WriteString("Undefined")
		}
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int:
		b.WriteString(strconv.Itoa(x))
	case float64:
		b.WriteString(formatFloat(x))
	case string:
		if !quote {
			b.WriteString(x)
			break
		}
		if err := ev.b.fits(b.Len() + 4*len(x)); err != nil {
			return err
		}
		q := "'"
		if strings.Contains(x, "'") && !strings.Contains(x, `"`) {
			q = `"`
		}
		writeQuoted(b, x, q, reprEscapes, `\x%02x`, true)
	case *list:
		return ev.seq(b, "[", "]", len(x.items), ", ", -1, 0, func(i int) error {
			return ev.repr(b, x.items[i], true)
		})
	case *dict:
		open, close := "{", "}"
		if x.namespace {
			open, close = "<Namespace {", "}>"
		}
		return ev.seq(b, open, close, len(x.keys), ", ", -1, 0, func(i int) error {
			if err := ev.repr(b, x.keys[i], true); err != nil {
				return err
			}
			b.WriteString(": ")
			return ev.repr(b, x.vals[x.keys[i]], true)
		})
	case *loop:
		b.WriteString("<LoopContext>")
	case *macro:
		fmt.Fprintf(b, "<Macro '%s'>", x.def.Name)
	case callable:
		b.WriteString("<function>")
	default:
		return fmt.Errorf("cannot print a %T", v)
	}
	return nil
}

// The escapes of Python's repr and of JSON.
var (
	reprEscapes = map[rune]string{'\\': `\\`, '\n': `\n`, '\r': `\r`, '\t': `\t`}
	jsonEscapes = map[rune]string{'"': `\"`, '\\': `\\`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '\b': `\b`, '\f': `\f`}
)

// writeQuoted writes s between quotes q, with the escapes esc, q escaped
// by a backslash, and other control characters (and DEL if del) in
// the format ctrl.
func writeQuoted(b *strings.Builder, s, q string, esc map[rune]string, ctrl string, del bool) {
	b.WriteString(q)
	for _, r := range s {
		switch e, ok := esc[r]; {
		case ok:
			b.WriteString(e)
		case string(r) == q:
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || del && r == 0x7f:
			fmt.Fprintf(b, ctrl, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString(q)
}

// equal is Python's ==, bounded by the budget.
func (ev *evaluator) equal(a, b any) (bool, error) {
	if err := ev.b.step(1); err != nil {
		return false, err
	}
	if fa, ok := number(a); ok {
		if fb, ok := number(b); ok {
			if ia, ok := a.(int); ok {
				if ib, ok := b.(int); ok {
					return ia == ib, nil
				}
			}
			return fa == fb, nil
		}
		return false, nil
	}
	switch x := a.(type) {
	case nil:
		return b == nil, nil
	case undefined:
		_, ok := b.(undefined)
		return ok, nil
	case string:
		y, ok := b.(string)
		if !ok {
			return false, nil
		}
		if err := ev.b.scan(len(x)); err != nil {
			return false, err
		}
		return x == y, nil
	case *list:
		y, ok := b.(*list)
		if !ok || len(x.items) != len(y.items) {
			return false, nil
		}
		return ev.allEqual(len(x.items), func(i int) (any, any, bool) { return x.items[i], y.items[i], true })
	case *dict:
		y, ok := b.(*dict)
		if !ok || len(x.keys) != len(y.keys) {
			return false, nil
		}
		return ev.allEqual(len(x.keys), func(i int) (any, any, bool) {
			yv, ok := y.vals[x.keys[i]]
			return x.vals[x.keys[i]], yv, ok
		})
	}
	return a == b, nil
}

// allEqual reports whether each of n pairs (pair(i); false if b lacks
// it) is equal, a level deeper in the budget.
func (ev *evaluator) allEqual(n int, pair func(i int) (a, b any, ok bool)) (bool, error) {
	if err := ev.b.enter(); err != nil {
		return false, err
	}
	defer ev.b.leave()
	for i := range n {
		a, b, ok := pair(i)
		if !ok {
			return false, nil
		}
		if eq, err := ev.equal(a, b); err != nil || !eq {
			return false, err
		}
	}
	return true, nil
}

// number returns a number's value (bools count, as in Python).
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case float64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// compare orders two numbers or two strings.
func compare(a, b any) (int, error) {
	if ia, ok := a.(int); ok {
		if ib, ok := b.(int); ok {
			return cmp.Compare(ia, ib), nil
		}
	}
	if fa, ok := number(a); ok {
		if fb, ok := number(b); ok {
			return cmp.Compare(fa, fb), nil
		}
	}
	if sa, ok := a.(string); ok {
		if sb, ok := b.(string); ok {
			return strings.Compare(sa, sb), nil
		}
	}
	return 0, fmt.Errorf("cannot compare %s with %s", typeName(a), typeName(b))
}

// seq writes n items (item(i) writes each) between open and close, sep
// between them, each on a line of its own indented to level+1 if
// indent >= 0; a container nests a level deeper in the budget.
func (ev *evaluator) seq(b *strings.Builder, open, close string, n int, sep string, indent, level int, item func(i int) error) error {
	if err := ev.b.enter(); err != nil {
		return err
	}
	defer ev.b.leave()
	newline := func(level int) error {
		if indent < 0 || n == 0 {
			return nil
		}
		if err := ev.b.fits(b.Len() + 1 + indent*level); err != nil {
			return err
		}
		b.WriteByte('\n')
		b.WriteString(strings.Repeat(" ", indent*level))
		return nil
	}
	b.WriteString(open)
	for i := range n {
		if i > 0 {
			b.WriteString(sep)
		}
		if err := newline(level + 1); err != nil {
			return err
		}
		if err := item(i); err != nil {
			return err
		}
	}
	if err := newline(level); err != nil {
		return err
	}
	b.WriteString(close)
	return nil
}

// toJSON writes v as Python's json.dumps does with ensure_ascii=False
// (transformers' tojson filter): ", " and ": " separators, or newlines and
// indent spaces per level if indent >= 0.
func (ev *evaluator) toJSON(b *strings.Builder, v any, indent, level int) error {
	if err := ev.b.step(1); err != nil {
		return err
	}
	if err := ev.b.fits(b.Len()); err != nil {
		return err
	}
	sep := ", "
	if indent >= 0 {
		sep = ","
	}
	switch x := v.(type) {
	case nil, undefined:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case float64:
		switch {
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		case math.IsNaN(x):
			b.WriteString("NaN")
		default:
			b.WriteString(formatFloat(x))
		}
	case string:
		if err := ev.b.fits(b.Len() + 6*len(x) + 2); err != nil {
			return err
		}
		writeQuoted(b, x, `"`, jsonEscapes, `\u%04x`, false)
	case *list:
		return ev.seq(b, "[", "]", len(x.items), sep, indent, level, func(i int) error {
			return ev.toJSON(b, x.items[i], indent, level+1)
		})
	case *dict:
		return ev.seq(b, "{", "}", len(x.keys), sep, indent, level, func(i int) error {
			k := x.keys[i]
			var ks string
			switch k := k.(type) {
			case string:
				ks = k
			case nil:
				ks = "null"
			case bool:
				ks = strconv.FormatBool(k)
			default:
				var err error
				if ks, err = ev.toStr(k); err != nil {
					return err
				}
			}
			if err := ev.toJSON(b, ks, indent, level+1); err != nil {
				return err
			}
			b.WriteString(": ")
			return ev.toJSON(b, x.vals[k], indent, level+1)
		})
	default:
		return fmt.Errorf("tojson: a %s is not JSON serializable", typeName(v))
	}
	return nil
}
