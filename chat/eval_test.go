package chat

import "testing"

// TestSemantics renders expressions whose outputs are what Jinja and
// Python (and transformers' tojson) print for them.
func TestSemantics(t *testing.T) {
	cases := []struct{ src, want string }{
		{`{{ [1, 'a', "it's", none, true, 1.5, {'k': [2]}] }}`, `[1, 'a', "it's", None, True, 1.5, {'k': [2]}]`},
		{`{{ {'a': 'x\ny', 'b': [1, 2], 'c': none} | tojson }}`, `{"a": "x\ny", "b": [1, 2], "c": null}`},
		{"{{ {'a': [1, {}], 'b': []} | tojson(indent=2) }}", "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}"},
		{`{{ 'a"b\\c' | tojson }}`, `"a\"b\\c"`},
		{`{{ 3 // 2 }} {{ -3 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 1.0 }} {{ 0.1 + 0.2 }}`, `1 -2 2 1024 3.5 1.0 0.30000000000000004`},
		{`{{ 'a b  c'.split() }} {{ 'a,b,c'.split(',', 1) }} {{ ' x\n'.strip() }} {{ 'xxhixx'.strip('x') }}`, `['a', 'b', 'c'] ['a', 'b,c'] x hi`},
		{`{{ '<x>' | e }} {{ 'hello world' | title }} {{ 'hELLO' | capitalize }} {{ 'abc'[::-1] }} {{ 'abc'[1] }} {{ 'abc'[-1] }}`, `&lt;x&gt; Hello World Hello cba b c`},
		{`{{ 'x'.endswith(('a', 'x')) }} {{ 'q' not in 'xyz' }} {{ 1 in [1, 2] }} {{ 'a' in {'a': 1} }}`, `True True True True`},
		{`{{ '' or 'fb' }} {{ 0 and 1 }} {{ 'a' and 'b' }} {{ x is defined }} {{ none is none }} {{ x is none }}`, `fb 0 b False True False`},
		{`{% for k, v in {'b': 1, 'a': 2} | dictsort %}{{ k }}{{ v }}{% endfor %} {{ [3, 1, 2] | sort(reverse=true) }} {{ ['b', 'A'] | sort }}`, `a2b1 [3, 2, 1] ['A', 'b']`},
		{`{{ range(1, 10, 3) | list }} {{ range(5) | sum }} {{ [3, 5, 1] | max }} {{ ['a', 'b'] | join('-') }} {{ [1, 1, 2] | unique | list }}`, `[1, 4, 7] 10 5 a-b [1, 2]`},
		{`{% set ns = namespace(n=0) %}{% for i in range(5) if i is odd %}{% set ns.n = ns.n + i %}{{ loop.index }}/{{ loop.length }}{% endfor %} {{ ns.n }}`, `1/22/2 4`},
		{`{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}`, `02`},
		{`{% macro f(a, b='x', *rest, **kw) %}[{{ a }}{{ b }}{{ rest }}{{ kw }}]{% endmacro %}{{ f(1) }}{{ f(2, 'y', 3, k=4) }}`, `[1x[]{}][2y[3]{'k': 4}]`},
		{`{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}body{% endcall %}`, `<body>`},
		{`{% set x %}a{{ 1 }}{% endset %}{{ x }}|{% set y = 1 if false else 2 %}{{ y }} {{ 'yes' if y == 2 else 'no' }}`, `a1|2 yes`},
		{`{% set l = [] %}{% do l.append(1) %}{% do l.extend([2, 3]) %}{{ l }} {{ l.pop() }} {{ {'a': 1}.get('b', 'd') }} {{ {'a': 1}.items() | list }}`, `[1, 2, 3] 3 d [['a', 1]]`},
		{`{{ 'a\nb' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}`, "a\n  b|  a\n  b"},
		{`{{ messages | map(attribute='role') | join(',') }} {{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages | rejectattr('role', 'in', ['user']) | map(attribute='role') | first }}`, `system,user,assistant,user 2 system`},
		{`{{ 'ab1' is lower }} {{ 'aB' is lower }} {{ '1' is lower }} {{ 'AB1' is upper }}`, `True False False True`},
		{`[{{ x | trim }}] [{{ none | trim }}] {{ x | wordcount }}`, `[] [None] 0`},
		{`{{ '7' | int + 1 }} {{ '2.5' | float }} {{ 2.567 | round(1) }} {{ -3 | abs }} {{ 'ab' | length }} {{ x | default('d') }} {{ '' | default('e', true) }}`, `8 2.5 2.6 3 2 d e`},
	}
	for _, c := range cases {
		tpl, err := Parse(c.src)
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		got, err := tpl.Render(Input{Messages: conversation})
		if err != nil || got != c.want {
			t.Errorf("%s:\n got  %q, %v\n want %q", c.src, got, err, c.want)
		}
	}
}

// TestEvaluationErrors: operations Python refuses are errors, not values.
func TestEvaluationErrors(t *testing.T) {
	for _, src := range []string{"{{ 1 / 0 }}", "{{ 1 // 0 }}", "{{ 1 % 0 }}", "{{ 'a' + 1 }}", "{{ x() }}", "{{ 9223372036854775807 + 1 }}",
		"{% break %}", "{{ [1] | frobnicate }}", "{{ 1 is frobnicated }}", "{{ range(1, 2, 0) }}", "{{ 'a' < 1 }}"} {
		tpl, err := Parse(src)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if got, err := tpl.Render(Input{}); err == nil {
			t.Errorf("%s rendered %q", src, got)
		}
	}
}
