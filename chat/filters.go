package chat

import (
	"errors"
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// The filters, tests, methods and globals below are the part of Jinja's
// and Python's that chat templates use. Each bounds its work and what it
// builds by the rendering's budget.

// arg returns argument i, or the keyword name, or def.
func arg(args []any, kwargs map[string]any, i int, name string, def any) any {
	if i < len(args) {
		return args[i]
	}
	if v, ok := kwargs[name]; ok {
		return v
	}
	return def
}

func strArg(args []any, kwargs map[string]any, i int, name, def string) (string, error) {
	v := arg(args, kwargs, i, name, def)
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("argument %s must be a string, not %s", name, typeName(v))
	}
	return s, nil
}

func intArg(args []any, kwargs map[string]any, i int, name string, def int) (int, error) {
	v := arg(args, kwargs, i, name, def)
	n, ok := v.(int)
	if !ok {
		return 0, fmt.Errorf("argument %s must be an integer, not %s", name, typeName(v))
	}
	return n, nil
}

// built charges a string a Go function built from bounded inputs.
func (ev *evaluator) built(s string) (any, error) {
	if err := ev.b.str(len(s)); err != nil {
		return nil, err
	}
	return s, nil
}

// strip is Python's str.strip (and lstrip, rstrip): whitespace, or the
// characters of chars.
func strip(s string, chars any, left, right bool) (string, error) {
	cut := unicode.IsSpace
	if c, ok := chars.(string); ok {
		cut = func(r rune) bool { return strings.ContainsRune(c, r) }
	} else if chars != nil {
		if _, ok := chars.(undefined); !ok {
			return "", fmt.Errorf("strip characters must be a string, not %s", typeName(chars))
		}
	}
	if left {
		s = strings.TrimLeftFunc(s, cut)
	}
	if right {
		s = strings.TrimRightFunc(s, cut)
	}
	return s, nil
}

type filterFunc func(ev *evaluator, in any, args []any, kwargs map[string]any) (any, error)

var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"trim": func(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
			s, err := ev.toStr(in)
			if err == nil {
				err = ev.b.scan(len(s))
			}
			if err != nil {
				return nil, err
			}
			return strip(s, arg(args, kw, 0, "chars", nil), true, true)
		},
		"tojson": func(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
			indent := -1
			if v := arg(args, kw, 0, "indent", nil); v != nil {
				n, ok := v.(int)
				if !ok || n < 0 || n > 64 {
					return nil, fmt.Errorf("indent must be an integer in [0, 64], not %v", v)
				}
				indent = n
			}
			var b strings.Builder
			if err := ev.toJSON(&b, in, indent, 0); err != nil {
				return nil, err
			}
			return ev.built(b.String())
		},
		"length": length,
		"count":  length,
		"string": func(ev *evaluator, in any, _ []any, _ map[string]any) (any, error) {
			return ev.toStr(in)
		},
		"upper":      strFunc(strings.ToUpper),
		"lower":      strFunc(strings.ToLower),
		"capitalize": strFunc(capitalize),
		"title":      strFunc(title),
		"first": func(ev *evaluator, in any, _ []any, _ map[string]any) (any, error) {
			items, err := ev.iterate(in)
			if err != nil || len(items) == 0 {
				return undefined{}, err
			}
			return items[0], nil
		},
		"last": func(ev *evaluator, in any, _ []any, _ map[string]any) (any, error) {
			items, err := ev.iterate(in)
			if err != nil || len(items) == 0 {
				return undefined{}, err
			}
			return items[len(items)-1], nil
		},
		"join": func(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
			sep, err := strArg(args, kw, 0, "d", "")
			if err != nil {
				return nil, err
			}
			items, err := ev.attrItems(in, arg(args, kw, 1, "attribute", nil))
			if err != nil {
				return nil, err
			}
			return ev.join(items, sep)
		},
		"default": defaultFilter,
		"d":       defaultFilter,
		"items": func(ev *evaluator, in any, _ []any, _ map[string]any) (any, error) {
			return ev.dictItems(in)
		},
		"list": func(ev *evaluator, in any, _ []any, _ map[string]any) (any, error) {
			items, err := ev.iterate(in)
			if err != nil {
				return nil, err
			}
			if err := ev.b.items(len(items)); err != nil {
				return nil, err
			}
			return &list{items: slices.Clone(items)}, nil
		},
		"selectattr": func(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
			return ev.selectItems(in, args, true, true)
		},
		"rejectattr": func(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
			return ev.selectItems(in, args, true, false)
		},
		"select": func(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
			return ev.selectItems(in, args, false, true)
		},
		"reject": func(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
			return ev.selectItems(in, args, false, false)
		},
		"map": mapFilter,
		"safe": func(_ *evaluator, in any, _ []any, _ map[string]any) (any, error) {
			return in, nil
		},
		"escape": escape,
		"e":      escape,
		"int": func(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
			if err := ev.scanStrs(in); err != nil {
				return nil, err
			}
			def := arg(args, kw, 0, "default", 0)
			switch x := in.(type) {
			case int:
				return x, nil
			case bool:
				return boolInt(x), nil
			case float64:
				if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) >= 1<<63 {
					return def, nil
				}
				return int(x), nil
			case string:
				if i, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
					return i, nil
				}
				if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil && math.Abs(f) < 1<<63 {
					return int(f), nil
				}
			}
			return def, nil
		},
		"float": func(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
			if err := ev.scanStrs(in); err != nil {
				return nil, err
			}
			if f, ok := number(in); ok {
				return f, nil
			}
			if s, ok := in.(string); ok {
				if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
					return f, nil
				}
			}
			return arg(args, kw, 0, "default", 0.0), nil
		},
		"abs": func(_ *evaluator, in any, _ []any, _ map[string]any) (any, error) {
			switch x := in.(type) {
			case int:
				if x == math.MinInt {
					return nil, errors.New("integer overflow")
				}
				return abs(x), nil
			case float64:
				return math.Abs(x), nil
			}
			return nil, fmt.Errorf("abs of a %s", typeName(in))
		},
		"round": func(_ *evaluator, in any, args []any, kw map[string]any) (any, error) {
			f, ok := number(in)
			if !ok {
				return nil, fmt.Errorf("round of a %s", typeName(in))
			}
			prec, err := intArg(args, kw, 0, "precision", 0)
			if err != nil {
				return nil, err
			}
			method, err := strArg(args, kw, 1, "method", "common")
			if err != nil {
				return nil, err
			}
			p := math.Pow(10, float64(min(max(prec, -300), 300)))
			switch method {
			case "common":
				return math.Round(f*p) / p, nil
			case "floor":
				return math.Floor(f*p) / p, nil
			case "ceil":
				return math.Ceil(f*p) / p, nil
			}
			return nil, fmt.Errorf("round method must be common, floor or ceil, not %q", method)
		},
		"replace": func(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
			s, err := ev.toStr(in)
			if err != nil {
				return nil, err
			}
			return ev.replace(s, args, kw)
		},
		"reverse": func(ev *evaluator, in any, _ []any, _ map[string]any) (any, error) {
			if s, ok := in.(string); ok {
				r := []rune(s)
				slices.Reverse(r)
				return string(r), nil
			}
			items, err := ev.iterate(in)
			if err != nil {
				return nil, err
			}
			if err := ev.b.items(len(items)); err != nil {
				return nil, err
			}
			out := slices.Clone(items)
			slices.Reverse(out)
			return &list{items: out}, nil
		},
		"sort": func(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
			items, err := ev.attrItems(in, arg(args, kw, 2, "attribute", nil))
			if err != nil {
				return nil, err
			}
			orig, err := ev.iterate(in)
			if err != nil {
				return nil, err
			}
			idx, err := ev.sortIndex(items, truthy(arg(args, kw, 0, "reverse", false)), truthy(arg(args, kw, 1, "case_sensitive", false)))
			if err != nil {
				return nil, err
			}
			out := &list{items: make([]any, len(idx))}
			for j, i := range idx {
				out.items[j] = orig[i]
			}
			return out, nil
		},
		"dictsort": func(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
			pairs, err := ev.dictItems(in)
			if err != nil {
				return nil, err
			}
			by, err := strArg(args, kw, 1, "by", "key")
			if err != nil {
				return nil, err
			}
			col := 0
			if by == "value" {
				col = 1
			}
			keys := make([]any, len(pairs.items))
			for i, p := range pairs.items {
				keys[i] = p.(*list).items[col]
			}
			idx, err := ev.sortIndex(keys, truthy(arg(args, kw, 2, "reverse", false)), truthy(arg(args, kw, 0, "case_sensitive", false)))
			if err != nil {
				return nil, err
			}
			out := &list{items: make([]any, len(idx))}
			for j, i := range idx {
				out.items[j] = pairs.items[i]
			}
			return out, nil
		},
		"unique": func(ev *evaluator, in any, _ []any, _ map[string]any) (any, error) {
			items, err := ev.iterate(in)
			if err != nil {
				return nil, err
			}
			out := &list{}
			for _, v := range items {
				seen, err := ev.contains(out, v)
				if err != nil {
					return nil, err
				}
				if !seen {
					out.items = append(out.items, v)
				}
			}
			return out, ev.b.items(len(out.items))
		},
		"sum": func(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
			items, err := ev.attrItems(in, arg(args, kw, 0, "attribute", nil))
			if err != nil {
				return nil, err
			}
			total := arg(args, kw, 1, "start", 0)
			for _, v := range items {
				if err := ev.b.step(1); err != nil {
					return nil, err
				}
				if total, err = arith(tokens.Addition, total, v); err != nil {
					return nil, err
				}
			}
			return total, nil
		},
		"min": func(ev *evaluator, in any, _ []any, _ map[string]any) (any, error) {
			return ev.extreme(in, -1)
		},
		"max": func(ev *evaluator, in any, _ []any, _ map[string]any) (any, error) {
			return ev.extreme(in, 1)
		},
		"indent": func(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
			s, err := ev.toStr(in)
			if err != nil {
				return nil, err
			}
			pad := arg(args, kw, 0, "width", 4)
			if w, ok := pad.(int); ok {
				if err := ev.b.str(w); err != nil {
					return nil, err
				}
				pad = strings.Repeat(" ", w)
			}
			p, ok := pad.(string)
			if !ok {
				return nil, fmt.Errorf("indent width must be an integer or a string, not %s", typeName(pad))
			}
			first, blank := truthy(arg(args, kw, 1, "first", false)), truthy(arg(args, kw, 2, "blank", false))
			if err := ev.b.items(strings.Count(s, "\n") + 1); err != nil {
				return nil, err
			}
			lines := strings.Split(s, "\n")
			if err := ev.b.str(len(s) + len(p)*len(lines)); err != nil {
				return nil, err
			}
			var b strings.Builder
			for i, l := range lines {
				if i > 0 {
					b.WriteByte('\n')
				}
				if (i > 0 || first) && (blank || strings.TrimSpace(l) != "") {
					b.WriteString(p)
				}
				b.WriteString(l)
			}
			return b.String(), nil
		},
		"wordcount": func(ev *evaluator, in any, _ []any, _ map[string]any) (any, error) {
			s, err := ev.toStr(in)
			if err == nil {
				err = ev.b.scan(len(s))
			}
			return countFields(s), err
		},
		"attr": func(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
			name, err := strArg(args, kw, 0, "name", "")
			if err != nil {
				return nil, err
			}
			return ev.attr(in, name)
		},
	}
}

func length(ev *evaluator, in any, _ []any, _ map[string]any) (any, error) {
	switch x := in.(type) {
	case string:
		return utf8.RuneCountInString(x), ev.b.scan(len(x))
	case *list:
		return len(x.items), nil
	case *dict:
		return len(x.keys), nil
	case undefined:
		return 0, nil
	}
	return nil, fmt.Errorf("a %s has no length", typeName(in))
}

func strFunc(f func(string) string) filterFunc {
	return func(ev *evaluator, in any, _ []any, _ map[string]any) (any, error) {
		s, err := ev.toStr(in)
		if err != nil {
			return nil, err
		}
		return ev.built(f(s))
	}
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + strings.ToLower(s[n:])
}

// title upper-cases each word's first letter and lower-cases the rest, as
// Python's str.title does.
func title(s string) string {
	var b strings.Builder
	prev := false
	for _, r := range s {
		if unicode.IsLetter(r) {
			if prev {
				r = unicode.ToLower(r)
			} else {
				r = unicode.ToTitle(r)
			}
			prev = true
		} else {
			prev = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

func defaultFilter(_ *evaluator, in any, args []any, kw map[string]any) (any, error) {
	_, undef := in.(undefined)
	if undef || truthy(arg(args, kw, 1, "boolean", false)) && !truthy(in) {
		return arg(args, kw, 0, "default_value", ""), nil
	}
	return in, nil
}

func escape(ev *evaluator, in any, _ []any, _ map[string]any) (any, error) {
	s, err := ev.toStr(in)
	if err != nil {
		return nil, err
	}
	if err := ev.b.str(6 * len(s)); err != nil {
		return nil, err
	}
	return html.EscapeString(s), nil
}

// join joins items' strings with sep, bounded before building.
func (ev *evaluator) join(items []any, sep string) (any, error) {
	if err := ev.b.step(len(items)); err != nil {
		return nil, err
	}
	strs := make([]string, len(items))
	n := 0
	if len(items) > 1 {
		n = len(sep) * (len(items) - 1)
	}
	for i, v := range items {
		s, err := ev.toStr(v)
		if err != nil {
			return nil, err
		}
		strs[i] = s
		if n += len(s); n > ev.b.lim.MaxOutput {
			break
		}
	}
	if err := ev.b.str(n); err != nil {
		return nil, err
	}
	return strings.Join(strs, sep), nil
}

// attrItems iterates in, taking each item's attribute attr if not nil
// (a dotted path, as Jinja's attribute arguments are).
func (ev *evaluator) attrItems(in, attr any) ([]any, error) {
	items, err := ev.iterate(in)
	if err != nil || attr == nil {
		return items, err
	}
	path, ok := attr.(string)
	if !ok {
		return nil, fmt.Errorf("attribute must be a string, not %s", typeName(attr))
	}
	if err := ev.b.items(len(items)); err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	for i, v := range items {
		if out[i], err = ev.path(v, path); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// path follows a dotted attribute path.
func (ev *evaluator) path(v any, path string) (any, error) {
	for part := range strings.SplitSeq(path, ".") {
		if err := ev.b.step(1); err != nil {
			return nil, err
		}
		var err error
		if i, aerr := strconv.Atoi(part); aerr == nil {
			v, err = ev.item(v, i)
		} else {
			v, err = ev.attr(v, part)
		}
		if err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (ev *evaluator) dictItems(in any) (*list, error) {
	d, ok := in.(*dict)
	if !ok {
		if _, undef := in.(undefined); undef {
			return &list{}, nil
		}
		return nil, fmt.Errorf("items of a %s", typeName(in))
	}
	if err := ev.b.items(3 * len(d.keys)); err != nil {
		return nil, err
	}
	out := &list{items: make([]any, len(d.keys))}
	for i, k := range d.keys {
		out.items[i] = &list{items: []any{k, d.vals[k]}}
	}
	return out, nil
}

// selectItems is select, reject, selectattr and rejectattr: args are the
// attribute (for the attr forms), then the test's name and arguments.
func (ev *evaluator) selectItems(in any, args []any, byAttr, keep bool) (any, error) {
	items, err := ev.iterate(in)
	if err != nil {
		return nil, err
	}
	vals := items
	if byAttr {
		if len(args) == 0 {
			return nil, errors.New("selectattr and rejectattr need an attribute")
		}
		if vals, err = ev.attrItems(in, args[0]); err != nil {
			return nil, err
		}
		args = args[1:]
	}
	var t testFunc
	if len(args) > 0 {
		name, ok := args[0].(string)
		if t = tests[name]; !ok || t == nil {
			return nil, fmt.Errorf("no test named %v", args[0])
		}
		args = args[1:]
	}
	out := &list{}
	for i, v := range vals {
		if err := ev.b.step(1); err != nil {
			return nil, err
		}
		ok := truthy(v)
		if t != nil {
			if ok, err = t(ev, v, args); err != nil {
				return nil, err
			}
		}
		if ok == keep {
			out.items = append(out.items, items[i])
		}
	}
	return out, ev.b.items(len(out.items))
}

func mapFilter(ev *evaluator, in any, args []any, kw map[string]any) (any, error) {
	if attr, ok := kw["attribute"]; ok {
		items, err := ev.attrItems(in, attr)
		if err != nil {
			return nil, err
		}
		if def, ok := kw["default"]; ok {
			for i, v := range items {
				if _, undef := v.(undefined); undef {
					items[i] = def
				}
			}
		}
		return &list{items: items}, nil
	}
	if len(args) == 0 {
		return nil, errors.New("map needs a filter name or attribute=")
	}
	name, _ := args[0].(string)
	f := filters[name]
	if f == nil {
		return nil, fmt.Errorf("no filter named %v", args[0])
	}
	items, err := ev.iterate(in)
	if err != nil {
		return nil, err
	}
	if err := ev.b.items(len(items)); err != nil {
		return nil, err
	}
	out := &list{items: make([]any, len(items))}
	for i, v := range items {
		if err := ev.b.step(1); err != nil {
			return nil, err
		}
		if out.items[i], err = f(ev, v, args[1:], nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sortIndex returns the order that sorts keys, charging n log n steps
// first; strings compare case-blind unless caseSensitive.
func (ev *evaluator) sortIndex(keys []any, reverse, caseSensitive bool) ([]int, error) {
	n := len(keys)
	if err := ev.b.items(n); err != nil {
		return nil, err
	}
	if err := ev.b.step(n * (1 + bitsLen(n))); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if s, ok := k.(string); ok {
			// Each key is compared about log n times.
			if err := ev.b.scan(len(s) * bitsLen(n)); err != nil {
				return nil, err
			}
		}
	}
	if !caseSensitive {
		keys = slices.Clone(keys)
		for i, k := range keys {
			if s, ok := k.(string); ok {
				keys[i] = strings.ToLower(s)
			}
		}
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	var cmpErr error
	slices.SortStableFunc(idx, func(a, b int) int {
		c, err := compare(keys[a], keys[b])
		if err != nil && cmpErr == nil {
			cmpErr = err
		}
		if reverse {
			return -c
		}
		return c
	})
	return idx, cmpErr
}

func bitsLen(n int) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}

// extreme is min (sign -1) or max (sign 1).
func (ev *evaluator) extreme(in any, sign int) (any, error) {
	items, err := ev.iterate(in)
	if err != nil || len(items) == 0 {
		return undefined{}, err
	}
	best := items[0]
	for _, v := range items[1:] {
		if err := ev.b.step(1); err != nil {
			return nil, err
		}
		c, err := compare(v, best)
		if err != nil {
			return nil, err
		}
		if c*sign > 0 {
			best = v
		}
	}
	return best, nil
}

// replace is str.replace(old, new[, count]), bounded before building.
func (ev *evaluator) replace(s string, args []any, kw map[string]any) (any, error) {
	old, err := strArg(args, kw, 0, "old", "")
	if err != nil {
		return nil, err
	}
	repl, err := strArg(args, kw, 1, "new", "")
	if err != nil {
		return nil, err
	}
	count, err := intArg(args, kw, 2, "count", -1)
	if err != nil {
		return nil, err
	}
	if err := ev.b.scan(len(s)); err != nil {
		return nil, err
	}
	n := strings.Count(s, old) // for old == "", runes + 1, as Python inserts
	if count >= 0 {
		n = min(n, count)
	}
	if err := ev.b.str(len(s) + n*(len(repl)-len(old))); err != nil {
		return nil, err
	}
	return strings.Replace(s, old, repl, count), nil
}

type testFunc func(ev *evaluator, v any, args []any) (bool, error)

func (ev *evaluator) test(s *scope, v any, t *nodes.TestCall) (any, error) {
	f := tests[t.Name]
	if f == nil {
		return nil, fmt.Errorf("no test named %s", t.Name)
	}
	args, _, err := ev.args(s, t.Args, nil)
	if err != nil {
		return nil, err
	}
	ok, err := f(ev, v, args)
	if err != nil {
		return nil, fmt.Errorf("test %s: %w", t.Name, err)
	}
	return ok, nil
}

func (ev *evaluator) filter(s *scope, v any, f *nodes.FilterCall) (any, error) {
	fn := filters[f.Name]
	if fn == nil {
		return nil, fmt.Errorf("no filter named %s", f.Name)
	}
	args, kwargs, err := ev.args(s, f.Args, f.Kwargs)
	if err != nil {
		return nil, err
	}
	out, err := fn(ev, v, args, kwargs)
	if err != nil {
		return nil, fmt.Errorf("filter %s: %w", f.Name, err)
	}
	return out, nil
}

func typeTest(pred func(any) bool) testFunc {
	return func(_ *evaluator, v any, _ []any) (bool, error) { return pred(v), nil }
}

func compareTest(op tokens.Type) testFunc {
	return func(ev *evaluator, v any, args []any) (bool, error) {
		if len(args) != 1 {
			return false, errors.New("needs one argument")
		}
		r, err := ev.operate(op, v, args[0])
		return truthy(r), err
	}
}

var tests map[string]testFunc

func init() {
	isInt := func(v any) bool { _, ok := v.(int); return ok }
	tests = map[string]testFunc{
		"defined":   typeTest(func(v any) bool { _, ok := v.(undefined); return !ok }),
		"undefined": typeTest(func(v any) bool { _, ok := v.(undefined); return ok }),
		"none":      typeTest(func(v any) bool { return v == nil }),
		"string":    typeTest(func(v any) bool { _, ok := v.(string); return ok }),
		"number": typeTest(func(v any) bool {
			switch v.(type) {
			case int, float64:
				return true
			}
			return false
		}),
		"integer":  typeTest(isInt),
		"float":    typeTest(func(v any) bool { _, ok := v.(float64); return ok }),
		"boolean":  typeTest(func(v any) bool { _, ok := v.(bool); return ok }),
		"true":     typeTest(func(v any) bool { return v == true }),
		"false":    typeTest(func(v any) bool { return v == false }),
		"mapping":  typeTest(func(v any) bool { _, ok := v.(*dict); return ok }),
		"sequence": typeTest(iterable),
		"iterable": typeTest(iterable),
		"callable": typeTest(func(v any) bool { _, ok := v.(callable); return ok }),
		"lower":    caseTest(unicode.IsLower, unicode.IsUpper),
		"upper":    caseTest(unicode.IsUpper, unicode.IsLower),
		"odd":      typeTest(func(v any) bool { return isInt(v) && v.(int)%2 != 0 }),
		"even":     typeTest(func(v any) bool { return isInt(v) && v.(int)%2 == 0 }),
		"divisibleby": func(_ *evaluator, v any, args []any) (bool, error) {
			a, ok1 := v.(int)
			b, ok2 := arg(args, nil, 0, "num", nil).(int)
			if !ok1 || !ok2 || b == 0 {
				return false, errors.New("divisibleby needs a nonzero integer")
			}
			return a%b == 0, nil
		},
		"sameas": func(ev *evaluator, v any, args []any) (bool, error) {
			if len(args) != 1 {
				return false, errors.New("needs one argument")
			}
			switch v.(type) {
			case *list, *dict:
				return v == args[0], nil
			}
			return ev.equal(v, args[0])
		},
		"in": func(ev *evaluator, v any, args []any) (bool, error) {
			if len(args) != 1 {
				return false, errors.New("needs one argument")
			}
			return ev.contains(args[0], v)
		},
	}
	for op, names := range map[tokens.Type][]string{
		tokens.Equals: {"eq", "equalto", "=="}, tokens.Ne: {"ne", "!="},
		tokens.LowerThan: {"lt", "lessthan", "<"}, tokens.LowerThanOrEqual: {"le", "<="},
		tokens.GreaterThan: {"gt", "greaterthan", ">"}, tokens.GreaterThanOrEqual: {"ge", ">="},
	} {
		for _, n := range names {
			tests[n] = compareTest(op)
		}
	}
}

// caseTest is Python's str.islower (is: unicode.IsLower, isNot:
// unicode.IsUpper) or isupper: a cased letter, none of the other case.
func caseTest(is, isNot func(rune) bool) testFunc {
	return func(ev *evaluator, v any, _ []any) (bool, error) {
		s, ok := v.(string)
		if !ok {
			return false, nil
		}
		if err := ev.b.scan(len(s)); err != nil {
			return false, err
		}
		return strings.IndexFunc(s, is) >= 0 && strings.IndexFunc(s, isNot) < 0, nil
	}
}

func iterable(v any) bool {
	switch v.(type) {
	case string, *list, *dict:
		return true
	}
	return false
}

// methodFunc is a method of a value: str.split, dict.items, list.append.
type methodFunc func(ev *evaluator, self any, args []any, kwargs map[string]any) (any, error)

// methodOf returns obj's method name, nil if it has none (a dict's item
// of that name is then read instead).
func methodOf(obj any, name string) methodFunc {
	switch obj.(type) {
	case string:
		if m := strMethods[name]; m != nil {
			// A string method scans the string, and maybe its arguments.
			return func(ev *evaluator, self any, args []any, kw map[string]any) (any, error) {
				if err := ev.scanStrs(append([]any{self}, args...)...); err != nil {
					return nil, err
				}
				return m(ev, self, args, kw)
			}
		}
		return nil
	case *dict:
		if d := obj.(*dict); d.namespace {
			return nil
		}
		return dictMethods[name]
	case *list:
		return listMethods[name]
	}
	return nil
}

var strMethods = map[string]methodFunc{
	"strip":  stripMethod(true, true),
	"lstrip": stripMethod(true, false),
	"rstrip": stripMethod(false, true),
	"split": func(ev *evaluator, self any, args []any, kw map[string]any) (any, error) {
		return ev.split(self.(string), args, kw)
	},
	"startswith": affixMethod(strings.HasPrefix),
	"endswith":   affixMethod(strings.HasSuffix),
	"replace": func(ev *evaluator, self any, args []any, kw map[string]any) (any, error) {
		return ev.replace(self.(string), args, kw)
	},
	"upper":      strMethod(strings.ToUpper),
	"lower":      strMethod(strings.ToLower),
	"title":      strMethod(title),
	"capitalize": strMethod(capitalize),
	"find": func(_ *evaluator, self any, args []any, kw map[string]any) (any, error) {
		sub, err := strArg(args, kw, 0, "sub", "")
		if err != nil {
			return nil, err
		}
		i := strings.Index(self.(string), sub)
		if i > 0 {
			i = utf8.RuneCountInString(self.(string)[:i])
		}
		return i, nil
	},
	"count": func(_ *evaluator, self any, args []any, kw map[string]any) (any, error) {
		sub, err := strArg(args, kw, 0, "sub", "")
		if err != nil {
			return nil, err
		}
		return strings.Count(self.(string), sub), nil
	},
	"join": func(ev *evaluator, self any, args []any, kw map[string]any) (any, error) {
		items, err := ev.iterate(arg(args, kw, 0, "iterable", nil))
		if err != nil {
			return nil, err
		}
		return ev.join(items, self.(string))
	},
	"splitlines": func(ev *evaluator, self any, _ []any, _ map[string]any) (any, error) {
		if err := ev.b.items(strings.Count(self.(string), "\n") + 1); err != nil {
			return nil, err
		}
		if err := ev.b.str(len(self.(string))); err != nil { // the copy without \r
			return nil, err
		}
		lines := strings.Split(strings.ReplaceAll(self.(string), "\r\n", "\n"), "\n")
		if len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		return strList(lines), nil
	},
	"isdigit": func(_ *evaluator, self any, _ []any, _ map[string]any) (any, error) {
		s := self.(string)
		return s != "" && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsDigit(r) }) < 0, nil
	},
}

func stripMethod(left, right bool) methodFunc {
	return func(_ *evaluator, self any, args []any, kw map[string]any) (any, error) {
		return strip(self.(string), arg(args, kw, 0, "chars", nil), left, right)
	}
}

func strMethod(f func(string) string) methodFunc {
	return func(ev *evaluator, self any, _ []any, _ map[string]any) (any, error) {
		return ev.built(f(self.(string)))
	}
}

// affixMethod is startswith or endswith: a string or a tuple of them.
func affixMethod(has func(s, affix string) bool) methodFunc {
	return func(ev *evaluator, self any, args []any, kw map[string]any) (any, error) {
		switch a := arg(args, kw, 0, "prefix", nil).(type) {
		case string:
			return has(self.(string), a), nil
		case *list:
			if err := ev.b.step(len(a.items)); err != nil {
				return nil, err
			}
			for _, e := range a.items {
				if s, ok := e.(string); ok && has(self.(string), s) {
					return true, nil
				}
			}
			return false, nil
		default:
			return nil, fmt.Errorf("takes a string or a tuple of strings, not %s", typeName(a))
		}
	}
}

// split is Python's str.split(sep=None, maxsplit=-1).
func (ev *evaluator) split(s string, args []any, kw map[string]any) (any, error) {
	maxsplit, err := intArg(args, kw, 1, "maxsplit", -1)
	if err != nil {
		return nil, err
	}
	sep := arg(args, kw, 0, "sep", nil)
	if sep == nil {
		if err := ev.b.items(countFields(s)); err != nil {
			return nil, err
		}
		fields := strings.Fields(s)
		if maxsplit >= 0 && len(fields) > maxsplit {
			// Python keeps the rest, from the start of field maxsplit.
			rest := strings.TrimLeftFunc(s, unicode.IsSpace)
			for range maxsplit {
				i := strings.IndexFunc(rest, unicode.IsSpace)
				rest = strings.TrimLeftFunc(rest[i:], unicode.IsSpace)
			}
			fields = append(fields[:maxsplit], strings.TrimRightFunc(rest, unicode.IsSpace))
		}
		return strList(fields), nil
	}
	sp, ok := sep.(string)
	if !ok || sp == "" {
		return nil, errors.New("the separator must be a non-empty string")
	}
	n := -1
	if maxsplit >= 0 {
		n = maxsplit + 1
	}
	if err := ev.b.items(strings.Count(s, sp) + 1); err != nil {
		return nil, err
	}
	return strList(strings.SplitN(s, sp, n)), nil
}

// countFields counts what strings.Fields(s) would return, building
// nothing.
func countFields(s string) int {
	n, in := 0, false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

// strList makes a list of strs, already charged as items by its caller
// before it built them.
func strList(strs []string) *list {
	l := &list{items: make([]any, len(strs))}
	for i, s := range strs {
		l.items[i] = s
	}
	return l
}

var dictMethods = map[string]methodFunc{
	"items": func(ev *evaluator, self any, _ []any, _ map[string]any) (any, error) {
		return ev.dictItems(self)
	},
	"keys": func(ev *evaluator, self any, _ []any, _ map[string]any) (any, error) {
		d := self.(*dict)
		return &list{items: slices.Clone(d.keys)}, ev.b.items(len(d.keys))
	},
	"values": func(ev *evaluator, self any, _ []any, _ map[string]any) (any, error) {
		d := self.(*dict)
		out := &list{items: make([]any, len(d.keys))}
		for i, k := range d.keys {
			out.items[i] = d.vals[k]
		}
		return out, ev.b.items(len(d.keys))
	},
	"get": func(_ *evaluator, self any, args []any, kw map[string]any) (any, error) {
		k := arg(args, kw, 0, "key", nil)
		if !hashable(k) {
			return nil, fmt.Errorf("a %s cannot be a dict key", typeName(k))
		}
		if v, ok := self.(*dict).get(k); ok {
			return v, nil
		}
		return arg(args, kw, 1, "default", nil), nil
	},
}

var listMethods = map[string]methodFunc{
	"append": func(ev *evaluator, self any, args []any, _ map[string]any) (any, error) {
		if len(args) != 1 {
			return nil, errors.New("takes one argument")
		}
		l := self.(*list)
		l.items = append(l.items, args[0])
		return nil, ev.b.items(1)
	},
	"extend": func(ev *evaluator, self any, args []any, _ map[string]any) (any, error) {
		if len(args) != 1 {
			return nil, errors.New("takes one argument")
		}
		items, err := ev.iterate(args[0])
		if err != nil {
			return nil, err
		}
		if err := ev.b.items(len(items)); err != nil {
			return nil, err
		}
		l := self.(*list)
		l.items = append(l.items, items...)
		return nil, nil
	},
	"pop": func(ev *evaluator, self any, args []any, kw map[string]any) (any, error) {
		l := self.(*list)
		i, err := intArg(args, kw, 0, "index", -1)
		if err != nil {
			return nil, err
		}
		if i < 0 {
			i += len(l.items)
		}
		if i < 0 || i >= len(l.items) {
			return nil, errors.New("pop index out of range")
		}
		if err := ev.b.scan(16 * (len(l.items) - i)); err != nil { // the items moved
			return nil, err
		}
		v := l.items[i]
		l.items = slices.Delete(l.items, i, i+1)
		return v, nil
	},
	"index": func(ev *evaluator, self any, args []any, _ map[string]any) (any, error) {
		if len(args) != 1 {
			return nil, errors.New("takes one argument")
		}
		for i, e := range self.(*list).items {
			if eq, err := ev.equal(e, args[0]); err != nil || eq {
				return i, err
			}
		}
		return nil, errors.New("value not in list")
	},
	"count": func(ev *evaluator, self any, args []any, _ map[string]any) (any, error) {
		if len(args) != 1 {
			return nil, errors.New("takes one argument")
		}
		n := 0
		for _, e := range self.(*list).items {
			eq, err := ev.equal(e, args[0])
			if err != nil {
				return nil, err
			}
			if eq {
				n++
			}
		}
		return n, nil
	},
}

// globals are the functions every template may call.
var globals = map[string]*function{
	"raise_exception": {name: "raise_exception", fn: func(ev *evaluator, args []any, _ map[string]any) (any, error) {
		msg := "raise_exception called"
		if len(args) > 0 {
			var err error
			if msg, err = ev.toStr(args[0]); err != nil {
				return nil, err
			}
		}
		return nil, &raised{msg}
	}},
	"range": {name: "range", fn: func(ev *evaluator, args []any, _ map[string]any) (any, error) {
		var start, stop, step = 0, 0, 1
		ints := make([]int, len(args))
		for i, a := range args {
			n, ok := a.(int)
			if !ok {
				return nil, fmt.Errorf("range takes integers, not %s", typeName(a))
			}
			ints[i] = n
		}
		switch len(ints) {
		case 1:
			stop = ints[0]
		case 2:
			start, stop = ints[0], ints[1]
		case 3:
			start, stop, step = ints[0], ints[1], ints[2]
		default:
			return nil, errors.New("range takes 1 to 3 arguments")
		}
		if step == 0 {
			return nil, errors.New("range step must not be zero")
		}
		n := 0
		if step > 0 && stop > start {
			n = int((uint(stop-start) + uint(step) - 1) / uint(step))
		} else if step < 0 && start > stop {
			n = int((uint(start-stop) + uint(-step) - 1) / uint(-step))
		}
		if n < 0 || n > ev.b.lim.MaxSteps {
			return nil, ev.b.fail("steps", ev.b.lim.MaxSteps)
		}
		if err := ev.b.items(n); err != nil {
			return nil, err
		}
		l := &list{items: make([]any, n)}
		for i := range l.items {
			l.items[i] = start + i*step
		}
		return l, nil
	}},
	"namespace": {name: "namespace", fn: func(ev *evaluator, args []any, kwargs map[string]any) (any, error) {
		return newMapping(ev, args, kwargs, true)
	}},
	"dict": {name: "dict", fn: func(ev *evaluator, args []any, kwargs map[string]any) (any, error) {
		return newMapping(ev, args, kwargs, false)
	}},
}

// newMapping is namespace(...) or dict(...): from a dict argument, then
// keyword arguments.
func newMapping(ev *evaluator, args []any, kwargs map[string]any, namespace bool) (any, error) {
	d := newDict()
	d.namespace = namespace
	if len(args) > 1 {
		return nil, errors.New("takes at most one positional argument")
	}
	if len(args) == 1 {
		src, ok := args[0].(*dict)
		if !ok {
			return nil, fmt.Errorf("takes a dict, not %s", typeName(args[0]))
		}
		if err := ev.b.items(len(src.keys)); err != nil {
			return nil, err
		}
		for _, k := range src.keys {
			d.set(k, src.vals[k])
		}
	}
	if err := ev.b.items(len(kwargs)); err != nil {
		return nil, err
	}
	for _, k := range sortedKeys(kwargs) {
		d.set(k, kwargs[k])
	}
	return d, nil
}

// raised is a raise_exception call.
type raised struct{ msg string }

func (r *raised) Error() string { return r.msg }
