package chat

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// hostile are templates that, before the evaluator bounded them, killed
// the process (the macro recursion: a fatal Go stack overflow, which no
// test can run in-process), ran on for tens of seconds at gigabytes
// (the range loop, which then ignored SIGTERM), allocated gigabytes (the
// repetition) or failed as a server error (the division).
var hostile = []struct {
	name, src, bound string
}{
	{"macro recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recursion depth"},
	{"billion iterations", "{% for i in range(1000000000) %}x{% endfor %}", "steps"},
	{"string repetition", `{{ "a"*2000000000 }}`, "output size"},
	{"division by zero", "{{ 1/0 }}", ""},
}

func TestHostileTemplates(t *testing.T) {
	for _, c := range hostile {
		t.Run(c.name, func(t *testing.T) {
			tpl, err := Parse(c.src)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tpl.Render(Input{Messages: conversation, AddGenerationPrompt: true})
			if err == nil {
				t.Fatal("rendered")
			}
			var be *BoundError
			switch {
			case c.bound == "" && errors.Is(err, ErrBound):
				t.Fatalf("error %v, want an evaluation error", err)
			case c.bound == "":
				if !strings.Contains(err.Error(), "division by zero") {
					t.Fatalf("error %v, want division by zero", err)
				}
			case !errors.As(err, &be) || be.Bound != c.bound:
				t.Fatalf("error %v, want the bound on %s", err, c.bound)
			}
		})
	}
}

// TestBounds drives each bound past a small limit with templates that
// would otherwise run much longer or build much more.
func TestBounds(t *testing.T) {
	cases := []struct {
		name, src string
		lim       Limits
		bound     string
	}{
		{"nested loops over a list", "{% set l = range(1000) %}{% for a in l %}{% for b in l %}{% for c in l %}{% endfor %}{% endfor %}{% endfor %}",
			Limits{MaxSteps: 100000}, "steps"},
		{"doubling a string", "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
			Limits{MaxOutput: 1 << 20}, "output size"},
		{"join with a long separator", "{{ range(100000) | join('x' * 1000) }}", Limits{MaxOutput: 1 << 20}, "output size"},
		{"replace into a long string", "{{ ('a' * 1000) .replace('a', 'b' * 1000) }}", Limits{MaxOutput: 1 << 19}, "output size"},
		{"indent", "{{ ('a\\n' * 1000) | indent(1000) }}", Limits{MaxOutput: 1 << 19}, "output size"},
		{"many strings kept", "{% set l = [] %}{% for i in range(10000) %}{% do l.append('x' * 100000 ~ i) %}{% endfor %}",
			Limits{MaxBytes: 64 << 20}, "bytes built"},
		{"output", "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", Limits{MaxOutput: 1 << 20}, "output size"},
		{"deep data printed", "{% set ns = namespace(x=[]) %}{% for i in range(10000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
			Limits{MaxDepth: 100}, "recursion depth"},
		{"a namespace holding itself", "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", Limits{}, "recursion depth"},
		{"a namespace holding itself, as JSON", "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns | tojson }}", Limits{}, "recursion depth"},
		{"a namespace holding itself, compared", "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns == ns }}", Limits{}, "recursion depth"},
		{"call block recursion", "{% macro f() %}{{ caller() }}{% endmacro %}{% macro g() %}{% call f() %}{{ g() }}{% endcall %}{% endmacro %}{{ g() }}",
			Limits{}, "recursion depth"},
		{"time", "{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}",
			Limits{MaxTime: time.Millisecond, MaxSteps: 1 << 62, MaxBytes: 1 << 50}, "time"},
		{"sorting", "{{ range(100000) | sort }}", Limits{MaxSteps: 100000}, "steps"},
		{"list repetition", "{{ [1, 2] * 1000000000 }}", Limits{}, "steps"},
		{"splitting into many pieces", "{{ ('a,' * 100000).split(',') | length }}", Limits{MaxSteps: 50000}, "steps"},
		// 640 KB of list items, and 20,000 loop scopes each kept alive by
		// the macro defined in it.
		{"scopes kept by macros", "{% set l = [] %}{% for i in range(20000) %}{% macro m() %}{% endmacro %}{% do l.append(m) %}{% endfor %}",
			Limits{MaxBytes: 1 << 20}, "bytes built"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tpl, err := Parse(c.src)
			if err != nil {
				t.Fatal(err)
			}
			lim := c.lim
			if lim.MaxTime == 0 {
				lim.MaxTime = time.Hour // the bound tested, not the machine's speed, must stop it
			}
			_, err = tpl.WithLimits(lim).Render(Input{Messages: conversation})
			var be *BoundError
			if !errors.As(err, &be) || be.Bound != c.bound || !errors.Is(err, ErrBound) {
				t.Fatalf("error %v, want the bound on %s", err, c.bound)
			}
		})
	}
}

// TestRealTemplatesWithinBounds renders the model templates on a long
// conversation under default limits, and checks that limits a little
// below what they need stop them (so that the defaults are not vacuous).
func TestRealTemplatesWithinBounds(t *testing.T) {
	var msgs []Message
	for range 200 {
		msgs = append(msgs, Message{"user", strings.Repeat("question ", 100)}, Message{"assistant", "<think>\nr\n</think>\n\n" + strings.Repeat("answer ", 100)})
	}
	for _, name := range []string{"llama3", "qwen3"} {
		tpl := modelTemplate(t, name)
		in := Input{Messages: msgs, AddGenerationPrompt: true, BOS: "<s>"}
		if _, err := tpl.WithLimits(Limits{MaxTime: time.Hour}).Render(in); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := tpl.WithLimits(Limits{MaxSteps: 1000}).Render(in); !errors.Is(err, ErrBound) {
			t.Fatalf("%s under 1000 steps: %v", name, err)
		}
	}
}

// TestParseNesting: sources nesting deeper than MaxNesting are refused
// before gonja's parser, which recurses per level, would overflow the
// stack on them (100,000 brackets killed the test binary); MaxNesting
// levels parse.
func TestParseNesting(t *testing.T) {
	nest := func(open, inner, close string, n int) string {
		return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
	}
	for _, c := range []struct{ open, inner, close string }{
		{"{{ (", "1", ") }}"}, // built below: {{ once, brackets nested
		{"{% if true %}", "x", "{% endif %}"},
		{"{% for x in y %}", "x", "{% endfor %}"},
		{"{% set x %}", "x", "{% endset %}"},
		{"{% macro f() %}", "x", "{% endmacro %}"},
		{"{% if x %}{% elif y %}", "x", "{% endif %}"},
	} {
		deep := nest(c.open, c.inner, c.close, 100000)
		if c.open == "{{ (" {
			deep = "{{ " + nest("(", "1", ")", 100000) + " }}"
		}
		if _, err := Parse(deep); err == nil || !strings.Contains(err.Error(), "nests deeper than") {
			t.Errorf("%s nested 100000 deep: %v", c.open, err)
		}
		ok := nest(c.open, c.inner, c.close, MaxNesting)
		if c.open == "{{ (" {
			ok = "{{ " + nest("(", "1", ")", MaxNesting) + " }}"
		}
		if _, err := Parse(ok); err != nil {
			t.Errorf("%s nested %d deep: %v", c.open, MaxNesting, err)
		}
	}
}
