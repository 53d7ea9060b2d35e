package chat

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// statements are the tags a chat template may use, parsed by gonja's
// parsers but for set, whose node gonja keeps private.
var statements = statementSet{
	"if":       gonjaStatement("if"),
	"for":      gonjaStatement("for"),
	"macro":    gonjaStatement("macro"),
	"call":     gonjaStatement("call"),
	"break":    gonjaStatement("break"),
	"continue": gonjaStatement("continue"),
	"do":       gonjaStatement("do"),
	"set":      parseSet,
}

func gonjaStatement(name string) parser.ControlStructureParser {
	p, _ := controlStructures.All.Get(name)
	return p
}

type statementSet map[string]parser.ControlStructureParser

// Get implements parser.ControlStructureGetter.
func (s statementSet) Get(name string) (parser.ControlStructureParser, bool) {
	p, ok := s[name]
	return p, ok && p != nil
}

// parseTemplate lexes and parses source with gonja, as Hugging Face
// configures Jinja (trim_blocks, lstrip_blocks), and refuses what the
// evaluator does not run.
func parseTemplate(source string) (*nodes.Template, error) {
	cfg := config.New()
	cfg.TrimBlocks, cfg.LeftStripBlocks = true, true
	loader, err := loaders.NewMemoryLoader(map[string]string{"/chat": source})
	if err != nil {
		return nil, err
	}
	if err := checkNesting(tokens.LexAll(source, cfg)); err != nil {
		return nil, err
	}
	root, err := parser.NewParser("/chat", tokens.LexAll(source, cfg), cfg, loader, statements).Parse()
	if err != nil {
		return nil, err
	}
	if err := checkNodes(root.Nodes); err != nil {
		return nil, err
	}
	return root, nil
}

// MaxNesting bounds the nesting of brackets, and of blocks, in a
// template's source: gonja's parser recurses per level, and a source of
// 100,000 nested brackets would overflow the Go stack (fatal) in Parse.
const MaxNesting = 200

// blockTags open a block that an end tag closes.
var blockTags = map[string]bool{"if": true, "for": true, "macro": true, "call": true, "filter": true, "with": true, "block": true, "raw": true}

// checkNesting refuses a source that nests deeper than MaxNesting.
func checkNesting(s *tokens.Stream) error {
	brackets, blocks := 0, 0
	for !s.End() {
		tok := s.Next()
		switch tok.Type {
		case tokens.LeftParenthesis, tokens.LeftBracket, tokens.LeftBrace:
			brackets++
		case tokens.RightParenthesis, tokens.RightBracket, tokens.RightBrace:
			brackets--
		case tokens.BlockBegin:
			name := s.Current()
			switch {
			case name.Type != tokens.Name:
			case blockTags[name.Val]:
				blocks++
			case strings.HasPrefix(name.Val, "end"):
				blocks--
			case name.Val == "set":
				// {% set x %} without '=' opens a block.
				assign := false
				for !s.End() && s.Current().Type != tokens.BlockEnd {
					if s.Next().Type == tokens.Assign {
						assign = true
					}
				}
				if !assign {
					blocks++
				}
			}
		}
		if brackets > MaxNesting || blocks > MaxNesting {
			return fmt.Errorf("line %d: nests deeper than %d levels", tok.Line, MaxNesting)
		}
	}
	return nil
}

// checkNodes refuses recursive for loops, whose loop() the evaluator
// does not offer.
func checkNodes(ns []nodes.Node) error {
	for _, n := range ns {
		b, ok := n.(*nodes.ControlStructureBlock)
		if !ok {
			continue
		}
		var bodies []*nodes.Wrapper
		switch cs := b.ControlStructure.(type) {
		case *controlStructures.ForControlStructure:
			if cs.Recursive {
				return fmt.Errorf("line %d: recursive for loops are not supported", cs.Position().Line)
			}
			bodies = append(bodies, cs.BodyWrapper, cs.EmptyWrapper)
		case *controlStructures.IfControlStructure:
			bodies = cs.Wrappers
		case *controlStructures.MacroControlStructure:
			bodies = append(bodies, cs.Wrapper)
		case *controlStructures.CallControlStructure:
			bodies = append(bodies, cs.Body)
		case *setStatement:
			bodies = append(bodies, cs.body)
		}
		for _, w := range bodies {
			if w != nil {
				if err := checkNodes(w.Nodes); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// errBreak and errContinue carry {% break %} and {% continue %} to their
// loop.
var (
	errBreak    = errors.New("break outside a loop")
	errContinue = errors.New("continue outside a loop")
)

// evaluator runs one rendering.
type evaluator struct {
	b *budget
	// caller is the body of the {% call %} block whose macro call is being
	// evaluated, for that macro's caller().
	caller callable
}

// scope holds variables; a lookup climbs to the parents.
type scope struct {
	vars   map[string]any
	parent *scope
}

// scope returns a new scope under parent, charging what one costs
// (a macro defined in it keeps it).
func (ev *evaluator) scope(parent *scope) (*scope, error) {
	if err := ev.b.charge(256); err != nil {
		return nil, err
	}
	return &scope{vars: map[string]any{}, parent: parent}, nil
}

func (s *scope) get(name string) (any, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

// macro is a {% macro %} defined in a scope.
type macro struct {
	def   *nodes.Macro
	scope *scope
}

func (m *macro) call(ev *evaluator, args []any, kwargs map[string]any) (any, error) {
	if err := ev.b.enter(); err != nil {
		return nil, err
	}
	defer ev.b.leave()
	sc, err := ev.scope(m.scope)
	if err != nil {
		return nil, err
	}
	params := make([]string, len(m.def.Kwargs))
	for i, p := range m.def.Kwargs {
		params[i] = p.Key.(*nodes.String).Val
	}
	var varargs []any
	for i, a := range args {
		if i < len(params) {
			sc.vars[params[i]] = a
		} else if m.def.VarArgsName != "" {
			varargs = append(varargs, a)
		} else {
			return nil, fmt.Errorf("macro %s takes %d arguments, got %d", m.def.Name, len(params), len(args))
		}
	}
	extra := newDict()
	for _, k := range sortedKeys(kwargs) {
		switch i := slices.Index(params, k); {
		case i >= 0 && i < len(args):
			return nil, fmt.Errorf("macro %s got argument %s twice", m.def.Name, k)
		case i >= 0:
			sc.vars[k] = kwargs[k]
		case m.def.KwArgsName != "":
			extra.set(k, kwargs[k])
		default:
			return nil, fmt.Errorf("macro %s takes no argument %s", m.def.Name, k)
		}
	}
	for i, p := range m.def.Kwargs {
		if _, ok := sc.vars[params[i]]; !ok {
			if p.Value == nil {
				sc.vars[params[i]] = undefined{}
				continue
			}
			v, err := ev.eval(m.scope, p.Value)
			if err != nil {
				return nil, err
			}
			sc.vars[params[i]] = v
		}
	}
	if m.def.VarArgsName != "" {
		sc.vars[m.def.VarArgsName] = &list{items: varargs}
	}
	if m.def.KwArgsName != "" {
		sc.vars[m.def.KwArgsName] = extra
	}
	if ev.caller != nil {
		sc.vars["caller"], ev.caller = ev.caller, nil
	}
	w := &writer{b: ev.b}
	if err := ev.execNodes(w, sc, m.def.Wrapper.Nodes); err != nil {
		if err == errBreak || err == errContinue {
			return nil, fmt.Errorf("macro %s: %w", m.def.Name, err)
		}
		return nil, err
	}
	return w.buf.String(), nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// loop is a for loop's loop variable.
type loop struct {
	items []any
	i     int
}

func (l *loop) attr(name string) any {
	n := len(l.items)
	switch name {
	case "index":
		return l.i + 1
	case "index0":
		return l.i
	case "revindex":
		return n - l.i
	case "revindex0":
		return n - l.i - 1
	case "first":
		return l.i == 0
	case "last":
		return l.i == n-1
	case "length":
		return n
	case "depth":
		return 1
	case "depth0":
		return 0
	case "previtem":
		if l.i > 0 {
			return l.items[l.i-1]
		}
	case "nextitem":
		if l.i < n-1 {
			return l.items[l.i+1]
		}
	case "cycle":
		return &function{name: "loop.cycle", fn: func(_ *evaluator, args []any, _ map[string]any) (any, error) {
			if len(args) == 0 {
				return nil, errors.New("loop.cycle needs at least one argument")
			}
			return args[l.i%len(args)], nil
		}}
	}
	return undefined{}
}

func (ev *evaluator) execNodes(w *writer, s *scope, ns []nodes.Node) error {
	for _, n := range ns {
		if err := ev.exec(w, s, n); err != nil {
			return err
		}
	}
	return nil
}

func (ev *evaluator) exec(w *writer, s *scope, n nodes.Node) error {
	if err := ev.b.step(1); err != nil {
		return err
	}
	if err := ev.b.enter(); err != nil {
		return err
	}
	defer ev.b.leave()
	switch n := n.(type) {
	case *nodes.Comment:
		return nil
	case *nodes.Data:
		if err := ev.b.scan(len(n.Data.Val)); err != nil {
			return err
		}
		return w.write(dataText(n))
	case *nodes.Output:
		expr := n.Expression
		if n.Condition != nil {
			c, err := ev.eval(s, n.Condition)
			if err != nil {
				return err
			}
			if !truthy(c) {
				if n.Alternative == nil {
					return nil
				}
				expr = n.Alternative
			}
		}
		return ev.print(w, s, expr)
	case *nodes.ControlStructureBlock:
		return ev.statement(w, s, n.ControlStructure)
	}
	return fmt.Errorf("unsupported template node %T", n)
}

// print writes the value of expr.
func (ev *evaluator) print(w *writer, s *scope, expr nodes.Expression) error {
	v, err := ev.eval(s, expr)
	if err != nil {
		return err
	}
	text, err := ev.toStr(v)
	if err != nil {
		return err
	}
	return w.write(text)
}

// dataText is a text node's output, trimmed as gonja's renderer trims it.
func dataText(n *nodes.Data) string {
	out := n.Data.Val
	if n.RemoveFirstLineReturn {
		out = strings.TrimPrefix(out, "\r\n")
		out = strings.TrimPrefix(out, "\n")
	}
	if n.Trim.Left {
		out = strings.TrimLeft(out, " \r\n\t")
	}
	if n.Trim.Right {
		out = strings.TrimRight(out, " \r\n\t")
	}
	if n.RemoveTrailingWhiteSpaceFromLastLine {
		i := strings.LastIndexByte(out, '\n') + 1
		out = out[:i] + strings.TrimRight(out[i:], " \n\t\r")
	}
	return out
}

func (ev *evaluator) statement(w *writer, s *scope, cs nodes.ControlStructure) error {
	line := cs.Position().Line
	switch cs := cs.(type) {
	case *controlStructures.IfControlStructure:
		for i, cond := range cs.Conditions {
			c, err := ev.eval(s, cond)
			if err != nil {
				return err
			}
			if truthy(c) {
				return ev.execNodes(w, s, cs.Wrappers[i].Nodes)
			}
		}
		if len(cs.Wrappers) > len(cs.Conditions) {
			return ev.execNodes(w, s, cs.Wrappers[len(cs.Conditions)].Nodes)
		}
		return nil
	case *controlStructures.ForControlStructure:
		return ev.forLoop(w, s, cs)
	case *setStatement:
		return ev.set(s, cs)
	case *controlStructures.MacroControlStructure:
		s.vars[cs.Name] = &macro{def: cs.Macro, scope: s}
		return nil
	case *controlStructures.CallControlStructure:
		body := cs.Body
		ev.caller = &function{name: "caller", fn: func(ev *evaluator, _ []any, _ map[string]any) (any, error) {
			bw := &writer{b: ev.b}
			sc, err := ev.scope(s)
			if err == nil {
				err = ev.execNodes(bw, sc, body.Nodes)
			}
			return bw.buf.String(), err
		}}
		defer func() { ev.caller = nil }()
		return ev.print(w, s, cs.Call)
	case *controlStructures.DoControlStructure:
		_, err := ev.eval(s, cs.Expression)
		return err
	case *controlStructures.BreakControlStructure:
		return errBreak
	case *controlStructures.ContinueControlStructure:
		return errContinue
	}
	return fmt.Errorf("line %d: unsupported statement %T", line, cs)
}

// iterate returns the items a for loop or a filter walks over v.
func (ev *evaluator) iterate(v any) ([]any, error) {
	switch x := v.(type) {
	case *list:
		return slices.Clip(x.items), nil
	case *dict:
		return slices.Clip(x.keys), nil
	case string:
		n := utf8.RuneCountInString(x)
		if err := ev.b.items(n); err != nil {
			return nil, err
		}
		items := make([]any, 0, n)
		for _, r := range x {
			items = append(items, string(r))
		}
		return items, nil
	case undefined:
		return nil, nil
	}
	return nil, fmt.Errorf("a %s is not iterable", typeName(v))
}

func (ev *evaluator) forLoop(w *writer, s *scope, cs *controlStructures.ForControlStructure) error {
	obj, err := ev.eval(s, cs.ObjectEvaluator)
	if err != nil {
		return err
	}
	var items []any
	if d, ok := obj.(*dict); ok && cs.Value != "" {
		// for key, value in dict, as gonja allows.
		if err := ev.b.items(len(d.keys)); err != nil {
			return err
		}
		for _, k := range d.keys {
			items = append(items, &list{items: []any{k, d.vals[k]}})
		}
	} else if items, err = ev.iterate(obj); err != nil {
		return err
	}
	bind := func(sc *scope, item any) error {
		if cs.Value == "" {
			sc.vars[cs.Key] = item
			return nil
		}
		pair, ok := item.(*list)
		if !ok || len(pair.items) != 2 {
			return fmt.Errorf("line %d: cannot unpack a %s into %s, %s", cs.Position().Line, typeName(item), cs.Key, cs.Value)
		}
		sc.vars[cs.Key], sc.vars[cs.Value] = pair.items[0], pair.items[1]
		return nil
	}
	if cs.IfCondition != nil {
		var kept []any
		for _, item := range items {
			if err := ev.b.step(1); err != nil {
				return err
			}
			sc, err := ev.scope(s)
			if err != nil {
				return err
			}
			if err := bind(sc, item); err != nil {
				return err
			}
			c, err := ev.eval(sc, cs.IfCondition)
			if err != nil {
				return err
			}
			if truthy(c) {
				kept = append(kept, item)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		if cs.EmptyWrapper != nil {
			return ev.execNodes(w, s, cs.EmptyWrapper.Nodes)
		}
		return nil
	}
	l := &loop{items: items}
	for i, item := range items {
		if err := ev.b.step(1); err != nil {
			return err
		}
		l.i = i
		sc, err := ev.scope(s)
		if err != nil {
			return err
		}
		sc.vars["loop"] = l
		if err := bind(sc, item); err != nil {
			return err
		}
		err = ev.execNodes(w, sc, cs.BodyWrapper.Nodes)
		if err == errBreak {
			break
		}
		if err != nil && err != errContinue {
			return err
		}
	}
	return nil
}

// setStatement is {% set target = expr [if cond else alt] %} or
// {% set target %}body{% endset %}.
type setStatement struct {
	location                     *tokens.Token
	target                       nodes.Expression
	expr, condition, alternative nodes.Expression
	body                         *nodes.Wrapper
}

// Position and String implement nodes.ControlStructure.
func (s *setStatement) Position() *tokens.Token { return s.location }
func (s *setStatement) String() string          { return fmt.Sprintf("set(line %d)", s.location.Line) }

// parseSet parses a set tag: gonja's setParser (MIT, Copyright (c)
// 2013-2014 Florian Schlachter and the gonja authors) into a node this
// package can read.
func parseSet(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
	st := &setStatement{location: p.Current()}
	target, err := args.ParseVariableOrLiteral()
	if err != nil {
		return nil, fmt.Errorf("set: %w", err)
	}
	switch target.(type) {
	case *nodes.Name, *nodes.GetItem, *nodes.GetAttribute:
		st.target = target
	default:
		return nil, args.Error("set needs a name, an attribute or an item to set", args.Current())
	}
	if args.Match(tokens.Assign) == nil {
		if !args.End() {
			return nil, args.Error("Expected '=' or end of tag for block-set.", args.Current())
		}
		body, endargs, err := p.WrapUntil("endset")
		if err != nil {
			return nil, err
		}
		if !endargs.End() {
			return nil, endargs.Error("endset takes no arguments", nil)
		}
		st.body = body
		return st, nil
	}
	if st.expr, err = args.ParseExpression(); err != nil {
		return nil, err
	}
	if st.condition, st.alternative, err = args.ParseCondition(); err != nil {
		return nil, err
	}
	if st.condition != nil && st.alternative == nil {
		return nil, args.Error("Malformed 'set' if else condition", args.Current())
	}
	if !args.End() {
		return nil, args.Error("Malformed 'set' tag args.", args.Current())
	}
	return st, nil
}

func (ev *evaluator) set(s *scope, st *setStatement) error {
	var v any
	var err error
	switch {
	case st.body != nil:
		w := &writer{b: ev.b}
		if err := ev.execNodes(w, s, st.body.Nodes); err != nil {
			return err
		}
		v = w.buf.String()
	case st.condition != nil:
		c, err := ev.eval(s, st.condition)
		if err != nil {
			return err
		}
		if truthy(c) {
			v, err = ev.eval(s, st.expr)
		} else {
			v, err = ev.eval(s, st.alternative)
		}
		if err != nil {
			return err
		}
	default:
		if v, err = ev.eval(s, st.expr); err != nil {
			return err
		}
	}
	switch t := st.target.(type) {
	case *nodes.Name:
		s.vars[t.Name.Val] = v
		return nil
	case *nodes.GetAttribute:
		obj, err := ev.eval(s, t.Node)
		if err != nil {
			return err
		}
		d, ok := obj.(*dict)
		if !ok || t.Attribute == "" {
			return fmt.Errorf("line %d: cannot set an attribute of a %s", st.location.Line, typeName(obj))
		}
		return ev.store(d, t.Attribute, v)
	case *nodes.GetItem:
		obj, err := ev.eval(s, t.Node)
		if err != nil {
			return err
		}
		k, err := ev.eval(s, t.Arg)
		if err != nil {
			return err
		}
		d, ok := obj.(*dict)
		if !ok || !hashable(k) {
			return fmt.Errorf("line %d: cannot set an item of a %s", st.location.Line, typeName(obj))
		}
		return ev.store(d, k, v)
	}
	return fmt.Errorf("line %d: cannot set a %T", st.location.Line, st.target)
}

// store sets d[k] = v, charging a new key.
func (ev *evaluator) store(d *dict, k, v any) error {
	if _, ok := d.get(k); !ok {
		if err := ev.b.items(1); err != nil {
			return err
		}
	}
	d.set(k, v)
	return nil
}

func (ev *evaluator) eval(s *scope, n nodes.Node) (any, error) {
	if err := ev.b.step(1); err != nil {
		return nil, err
	}
	if err := ev.b.enter(); err != nil {
		return nil, err
	}
	defer ev.b.leave()
	switch n := n.(type) {
	case *nodes.None:
		return nil, nil
	case *nodes.String:
		return n.Val, nil
	case *nodes.Integer:
		return n.Val, nil
	case *nodes.Float:
		return n.Val, nil
	case *nodes.Bool:
		return n.Val, nil
	case *nodes.List:
		return ev.evalList(s, n.Val)
	case *nodes.Tuple:
		return ev.evalList(s, n.Val)
	case *nodes.Dict:
		if err := ev.b.items(len(n.Pairs)); err != nil {
			return nil, err
		}
		d := newDict()
		for _, p := range n.Pairs {
			k, err := ev.eval(s, p.Key)
			if err != nil {
				return nil, err
			}
			if !hashable(k) {
				return nil, fmt.Errorf("a %s cannot be a dict key", typeName(k))
			}
			v, err := ev.eval(s, p.Value)
			if err != nil {
				return nil, err
			}
			d.set(k, v)
		}
		return d, nil
	case *nodes.Name:
		if v, ok := s.get(n.Name.Val); ok {
			return v, nil
		}
		if f, ok := globals[n.Name.Val]; ok {
			return f, nil
		}
		if n.Name.Val == "none" { // gonja parses only None as a literal
			return nil, nil
		}
		return undefined{}, nil
	case *nodes.GetAttribute:
		obj, err := ev.eval(s, n.Node)
		if err != nil {
			return nil, err
		}
		if n.Attribute == "" {
			return ev.item(obj, n.Index)
		}
		return ev.attr(obj, n.Attribute)
	case *nodes.GetItem:
		obj, err := ev.eval(s, n.Node)
		if err != nil {
			return nil, err
		}
		if n.Arg == nil {
			return undefined{}, nil
		}
		k, err := ev.eval(s, n.Arg)
		if err != nil {
			return nil, err
		}
		return ev.item(obj, k)
	case *nodes.GetSlice:
		return ev.slice(s, n)
	case *nodes.Call:
		return ev.callNode(s, n)
	case *nodes.Negation:
		v, err := ev.eval(s, n.Term)
		return !truthy(v), err
	case *nodes.UnaryExpression:
		v, err := ev.eval(s, n.Term)
		if err != nil {
			return nil, err
		}
		switch x := v.(type) {
		case int:
			if n.Negative {
				return -x, nil
			}
			return x, nil
		case float64:
			if n.Negative {
				return -x, nil
			}
			return x, nil
		}
		return nil, fmt.Errorf("bad operand type for unary -: %s", typeName(v))
	case *nodes.BinaryExpression:
		return ev.binary(s, n)
	case *nodes.FilteredExpression:
		v, err := ev.eval(s, n.Expression)
		if err != nil {
			return nil, err
		}
		for _, f := range n.Filters {
			if v, err = ev.filter(s, v, f); err != nil {
				return nil, err
			}
		}
		return v, nil
	case *nodes.TestExpression:
		v, err := ev.eval(s, n.Expression)
		if err != nil {
			return nil, err
		}
		return ev.test(s, v, n.Test)
	case *nodes.Error:
		return nil, n.Error
	}
	return nil, fmt.Errorf("unsupported expression %T", n)
}

func (ev *evaluator) evalList(s *scope, es []nodes.Expression) (any, error) {
	if err := ev.b.items(len(es)); err != nil {
		return nil, err
	}
	l := &list{items: make([]any, len(es))}
	for i, e := range es {
		v, err := ev.eval(s, e)
		if err != nil {
			return nil, err
		}
		l.items[i] = v
	}
	return l, nil
}

// args evaluates a call's arguments.
func (ev *evaluator) args(s *scope, as []nodes.Expression, kws map[string]nodes.Expression) ([]any, map[string]any, error) {
	args := make([]any, len(as))
	for i, a := range as {
		v, err := ev.eval(s, a)
		if err != nil {
			return nil, nil, err
		}
		args[i] = v
	}
	kwargs := make(map[string]any, len(kws))
	keys := make([]string, 0, len(kws))
	for k := range kws {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, err := ev.eval(s, kws[k])
		if err != nil {
			return nil, nil, err
		}
		kwargs[k] = v
	}
	return args, kwargs, nil
}

func (ev *evaluator) callNode(s *scope, n *nodes.Call) (any, error) {
	var fn any
	if ga, ok := n.Func.(*nodes.GetAttribute); ok && ga.Attribute != "" {
		obj, err := ev.eval(s, ga.Node)
		if err != nil {
			return nil, err
		}
		if m := methodOf(obj, ga.Attribute); m != nil {
			args, kwargs, err := ev.args(s, n.Args, n.Kwargs)
			if err != nil {
				return nil, err
			}
			v, err := m(ev, obj, args, kwargs)
			if err != nil {
				return nil, fmt.Errorf("%s.%s(): %w", typeName(obj), ga.Attribute, err)
			}
			return v, nil
		}
		if fn, err = ev.attr(obj, ga.Attribute); err != nil {
			return nil, err
		}
	} else {
		var err error
		if fn, err = ev.eval(s, n.Func); err != nil {
			return nil, err
		}
	}
	c, ok := fn.(callable)
	if !ok {
		return nil, fmt.Errorf("%s is not callable (a %s)", n.Func, typeName(fn))
	}
	args, kwargs, err := ev.args(s, n.Args, n.Kwargs)
	if err != nil {
		return nil, err
	}
	return c.call(ev, args, kwargs)
}

// attr is obj.name.
func (ev *evaluator) attr(obj any, name string) (any, error) {
	switch x := obj.(type) {
	case *dict:
		if v, ok := x.get(name); ok {
			return v, nil
		}
	case *loop:
		return x.attr(name), nil
	}
	return undefined{}, nil
}

// item is obj[k].
func (ev *evaluator) item(obj, k any) (any, error) {
	switch x := obj.(type) {
	case *dict:
		if !hashable(k) {
			return nil, fmt.Errorf("a %s cannot be a dict key", typeName(k))
		}
		if v, ok := x.get(k); ok {
			return v, nil
		}
	case *list:
		if i, ok := k.(int); ok {
			if i < 0 {
				i += len(x.items)
			}
			if i >= 0 && i < len(x.items) {
				return x.items[i], nil
			}
		}
	case string:
		if i, ok := k.(int); ok {
			if err := ev.b.scan(len(x)); err != nil {
				return nil, err
			}
			if i < 0 {
				i += utf8.RuneCountInString(x)
			}
			n := 0
			for _, r := range x {
				if n == i {
					return string(r), nil
				}
				n++
			}
		}
	case *loop:
		if name, ok := k.(string); ok {
			return x.attr(name), nil
		}
	}
	return undefined{}, nil
}

// slice is obj[start:end:step], as Python slices.
func (ev *evaluator) slice(s *scope, n *nodes.GetSlice) (any, error) {
	obj, err := ev.eval(s, n.Node)
	if err != nil {
		return nil, err
	}
	bound := func(e nodes.Node) (int, bool, error) {
		if e == nil {
			return 0, false, nil
		}
		v, err := ev.eval(s, e)
		if err != nil {
			return 0, false, err
		}
		if v == nil {
			return 0, false, nil
		}
		i, ok := v.(int)
		if !ok {
			return 0, false, fmt.Errorf("slice indices must be integers, not %s", typeName(v))
		}
		return i, true, nil
	}
	start, hasStart, err := bound(n.Start)
	if err != nil {
		return nil, err
	}
	end, hasEnd, err := bound(n.End)
	if err != nil {
		return nil, err
	}
	step, hasStep, err := bound(n.Step)
	if err != nil {
		return nil, err
	}
	if !hasStep {
		step = 1
	}
	if step == 0 {
		return nil, errors.New("slice step cannot be zero")
	}
	var items []any
	var str []rune
	switch x := obj.(type) {
	case *list:
		items = x.items
	case string:
		if err := ev.b.items(len(x) / 4); err != nil { // the runes, 4 bytes each
			return nil, err
		}
		str = []rune(x)
	default:
		return nil, fmt.Errorf("cannot slice a %s", typeName(obj))
	}
	length := len(items) + len(str)
	clamp := func(i int, has bool, def int) int {
		if !has {
			return def
		}
		if i < 0 {
			i += length
		}
		lo, hi := 0, length
		if step < 0 {
			lo, hi = -1, length-1
		}
		return min(max(i, lo), hi)
	}
	var idx []int
	if step > 0 {
		for i := clamp(start, hasStart, 0); i < clamp(end, hasEnd, length); i += step {
			idx = append(idx, i)
		}
	} else {
		for i := clamp(start, hasStart, length-1); i > clamp(end, hasEnd, -1); i += step {
			idx = append(idx, i)
		}
	}
	if err := ev.b.items(len(idx)); err != nil {
		return nil, err
	}
	if str != nil || obj == "" {
		out := make([]rune, len(idx))
		for j, i := range idx {
			out[j] = str[i]
		}
		return string(out), nil
	}
	out := &list{items: make([]any, len(idx))}
	for j, i := range idx {
		out.items[j] = items[i]
	}
	return out, nil
}

func (ev *evaluator) binary(s *scope, n *nodes.BinaryExpression) (any, error) {
	a, err := ev.eval(s, n.Left)
	if err != nil {
		return nil, err
	}
	op := n.Operator.Token.Type
	switch op {
	case tokens.And:
		if !truthy(a) {
			return a, nil
		}
		return ev.eval(s, n.Right)
	case tokens.Or:
		if truthy(a) {
			return a, nil
		}
		return ev.eval(s, n.Right)
	}
	b, err := ev.eval(s, n.Right)
	if err != nil {
		return nil, err
	}
	v, err := ev.operate(op, a, b)
	if err != nil {
		return nil, fmt.Errorf("line %d: %s: %w", n.Operator.Token.Line, n.Operator.Token.Val, err)
	}
	return v, nil
}

// operate applies a binary operator, as Python does.
func (ev *evaluator) operate(op tokens.Type, a, b any) (any, error) {
	switch op {
	case tokens.Equals:
		return ev.equal(a, b)
	case tokens.Ne:
		eq, err := ev.equal(a, b)
		return !eq, err
	case tokens.LowerThan, tokens.LowerThanOrEqual, tokens.GreaterThan, tokens.GreaterThanOrEqual:
		if err := ev.scanStrs(a, b); err != nil {
			return nil, err
		}
		c, err := compare(a, b)
		switch op {
		case tokens.LowerThan:
			return c < 0, err
		case tokens.LowerThanOrEqual:
			return c <= 0, err
		case tokens.GreaterThan:
			return c > 0, err
		}
		return c >= 0, err
	case tokens.In:
		return ev.contains(b, a)
	case tokens.Tilde:
		sa, err := ev.toStr(a)
		if err != nil {
			return nil, err
		}
		sb, err := ev.toStr(b)
		if err != nil {
			return nil, err
		}
		return ev.concat(sa, sb)
	case tokens.Addition:
		switch x := a.(type) {
		case string:
			if y, ok := b.(string); ok {
				return ev.concat(x, y)
			}
		case *list:
			if y, ok := b.(*list); ok {
				if err := ev.b.items(len(x.items) + len(y.items)); err != nil {
					return nil, err
				}
				return &list{items: slices.Concat(x.items, y.items)}, nil
			}
		}
	case tokens.Multiply:
		if _, ok := a.(int); ok {
			if _, ok := b.(string); ok {
				a, b = b, a
			} else if _, ok := b.(*list); ok {
				a, b = b, a
			}
		}
		n, isInt := b.(int)
		switch x := a.(type) {
		case string:
			if isInt {
				n = max(n, 0)
				if n > 0 && len(x) > 0 && n > ev.b.lim.MaxOutput/len(x) {
					return nil, ev.b.fail("output size", fmt.Sprintf("%d bytes", ev.b.lim.MaxOutput))
				}
				if err := ev.b.str(len(x) * n); err != nil {
					return nil, err
				}
				return strings.Repeat(x, n), nil
			}
		case *list:
			if isInt {
				n = max(n, 0)
				if n > 0 && len(x.items) > 0 && n > ev.b.lim.MaxSteps/len(x.items) {
					return nil, ev.b.fail("steps", ev.b.lim.MaxSteps)
				}
				if err := ev.b.items(len(x.items) * n); err != nil {
					return nil, err
				}
				return &list{items: slices.Repeat(x.items, n)}, nil
			}
		}
	}
	return arith(op, a, b)
}

// concat is a + b for strings, bounded.
func (ev *evaluator) concat(a, b string) (string, error) {
	if err := ev.b.str(len(a) + len(b)); err != nil {
		return "", err
	}
	return a + b, nil
}

// arith is Python's arithmetic on ints and floats. Integer results that
// overflow int64 are errors rather than Python's big integers.
func arith(op tokens.Type, a, b any) (any, error) {
	ia, aInt := a.(int)
	ib, bInt := b.(int)
	if x, ok := a.(bool); ok {
		ia, aInt = boolInt(x), true
	}
	if y, ok := b.(bool); ok {
		ib, bInt = boolInt(y), true
	}
	fa, aNum := number(a)
	fb, bNum := number(b)
	if !aNum || !bNum {
		return nil, fmt.Errorf("unsupported operand types %s and %s", typeName(a), typeName(b))
	}
	if aInt && bInt {
		switch op {
		case tokens.Addition:
			if r := ia + ib; (r > ia) == (ib > 0) {
				return r, nil
			}
			return nil, errors.New("integer overflow")
		case tokens.Subtraction:
			if r := ia - ib; (r < ia) == (ib > 0) {
				return r, nil
			}
			return nil, errors.New("integer overflow")
		case tokens.Multiply:
			if ia == 0 || ib == 0 {
				return 0, nil
			}
			if r := ia * ib; r/ib == ia && !(ia == -1 && ib == math.MinInt) && !(ib == -1 && ia == math.MinInt) {
				return r, nil
			}
			return nil, errors.New("integer overflow")
		case tokens.FloorDivision, tokens.Modulo:
			if ib == 0 {
				return nil, errors.New("integer division or modulo by zero")
			}
			if ia == math.MinInt && ib == -1 {
				return nil, errors.New("integer overflow")
			}
			q, r := ia/ib, ia%ib
			if r != 0 && (r < 0) != (ib < 0) {
				q, r = q-1, r+ib
			}
			if op == tokens.Modulo {
				return r, nil
			}
			return q, nil
		case tokens.Power:
			if ib >= 0 {
				return intPow(ia, ib)
			}
		}
	}
	switch op {
	case tokens.Addition:
		return fa + fb, nil
	case tokens.Subtraction:
		return fa - fb, nil
	case tokens.Multiply:
		return fa * fb, nil
	case tokens.Division:
		if fb == 0 {
			return nil, errors.New("division by zero")
		}
		return fa / fb, nil
	case tokens.FloorDivision:
		if fb == 0 {
			return nil, errors.New("float floor division by zero")
		}
		return math.Floor(fa / fb), nil
	case tokens.Modulo:
		if fb == 0 {
			return nil, errors.New("float modulo by zero")
		}
		r := math.Mod(fa, fb)
		if r != 0 && (r < 0) != (fb < 0) {
			r += fb
		}
		return r, nil
	case tokens.Power:
		if fa == 0 && fb < 0 {
			return nil, errors.New("zero to a negative power")
		}
		return math.Pow(fa, fb), nil
	}
	return nil, errors.New("unsupported operator")
}

// intPow is a**b for b >= 0, an error past int64.
func intPow(a, b int) (any, error) {
	switch {
	case b == 0 || a == 1:
		return 1, nil
	case a == 0:
		return 0, nil
	case a == -1:
		return 1 - 2*(b%2), nil
	}
	r := 1
	for range b { // |a| >= 2: at most 63 rounds before overflow
		if r > math.MaxInt/abs(a) || r < -(math.MaxInt/abs(a)) {
			return nil, errors.New("integer overflow")
		}
		r *= a
	}
	return r, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// scanStrs charges scanning the strings among vs.
func (ev *evaluator) scanStrs(vs ...any) error {
	n := 0
	for _, v := range vs {
		if s, ok := v.(string); ok {
			n += len(s)
		}
	}
	return ev.b.scan(n)
}

// contains is Python's needle in haystack.
func (ev *evaluator) contains(haystack, needle any) (bool, error) {
	if err := ev.scanStrs(haystack); err != nil {
		return false, err
	}
	switch h := haystack.(type) {
	case string:
		n, ok := needle.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' requires a string, not %s", typeName(needle))
		}
		return strings.Contains(h, n), nil
	case *list:
		for _, e := range h.items {
			if eq, err := ev.equal(e, needle); err != nil || eq {
				return eq, err
			}
		}
		return false, nil
	case *dict:
		if !hashable(needle) {
			return false, nil
		}
		_, ok := h.get(needle)
		return ok, nil
	case undefined:
		return false, nil
	}
	return false, fmt.Errorf("a %s has no members", typeName(haystack))
}
