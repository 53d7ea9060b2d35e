package server

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// dashboardPath is the Grafana dashboard shipped for prefixd's metrics.
const dashboardPath = "../deploy/grafana/prefixd.json"

// promqlMetricNames returns the metric names a PromQL expression selects,
// in order of first appearance. It is a lexer, not a parser: it skips
// string literals, label matchers ({...}), range and subquery brackets
// ([...]), numbers and durations, Grafana variables ($x, ${x}), function
// names (an identifier followed by "("), aggregation operators, the label
// lists of by, without, on, ignoring, group_left and group_right, and the
// binary-operator keywords. Every other identifier names a metric.
func promqlMetricNames(expr string) ([]string, error) {
	var names []string
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || 'a' <= c|0x20 && c|0x20 <= 'z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || '0' <= c && c <= '9' }
	skipSpace := func(i int) int {
		for i < len(expr) && strings.IndexByte(" \t\r\n", expr[i]) >= 0 {
			i++
		}
		return i
	}
	// skipQuoted returns the index after the literal that starts at i.
	skipQuoted := func(i int) (int, error) {
		q := expr[i]
		for j := i + 1; j < len(expr); j++ {
			switch {
			case expr[j] == '\\' && q != '`':
				j++
			case expr[j] == q:
				return j + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string at %d in %q", i, expr)
	}
	// skipGroup returns the index after the bracket that closes the one
	// at i, skipping literals inside.
	skipGroup := func(i int, open, close byte) (int, error) {
		depth := 0
		for j := i; j < len(expr); {
			switch c := expr[j]; {
			case c == '"' || c == '\'' || c == '`':
				k, err := skipQuoted(j)
				if err != nil {
					return 0, err
				}
				j = k
				continue
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
			j++
		}
		return 0, fmt.Errorf("unbalanced %c at %d in %q", open, i, expr)
	}
	labelLists := []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
	// Aggregations may be followed by their by/without clause before "(".
	keywords := []string{"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
		"by", "without", "on", "ignoring", "group_left", "group_right",
		"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
		"bottomk", "topk", "quantile", "limitk", "limit_ratio"}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j, err := skipQuoted(i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '{':
			j, err := skipGroup(i, '{', '}')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '[':
			j, err := skipGroup(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				j, err := skipGroup(i, '{', '}')
				if err != nil {
					return nil, err
				}
				i = j
				continue
			}
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
		case '0' <= c && c <= '9' || c == '.':
			// A number (1e-9, 0x1f) or a duration (5m); "1e-9" leaves "-9".
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(expr) && isIdent(expr[j]) {
				j++
			}
			word := expr[i:j]
			next := skipSpace(j)
			switch {
			case slices.Contains(labelLists, strings.ToLower(word)) && next < len(expr) && expr[next] == '(':
				k, err := skipGroup(next, '(', ')')
				if err != nil {
					return nil, err
				}
				i = k
			case next < len(expr) && expr[next] == '(':
				i = next // a function or aggregation
			case slices.Contains(keywords, strings.ToLower(word)):
				i = j
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
				i = j
			}
		default:
			i++
		}
	}
	return names, nil
}

func TestDashboardPromQLLexer(t *testing.T) {
	for _, tc := range []struct {
		name, expr string
		want       []string
	}{
		{"selector", `prefixd_requests_running`, []string{"prefixd_requests_running"}},
		{"matchers and range", `rate(a_total{x="}[{", y=~'b'}[$__rate_interval])`, []string{"a_total"}},
		{"aggregation label list", `sum by (le, tier) (rate(h_bucket[5m])) / ignoring(tier) group_left() sum(q_total)`,
			[]string{"h_bucket", "q_total"}},
		{"trailing by", `sum(rate(c_total[1m])) by (reason) > bool 0.5e-3`, []string{"c_total"}},
		{"quantile", `histogram_quantile(0.99, sum by (le) (rate(x_bucket{instance=~"$instance"}[${__rate_interval}])))`,
			[]string{"x_bucket"}},
		{"set operators", `a and on(job) b or c unless d offset 5m`, []string{"a", "b", "c", "d"}},
		{"at modifier", `x_total @ start() - y:rule:sum @ 1609746000`, []string{"x_total", "y:rule:sum"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := promqlMetricNames(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("promqlMetricNames(%q) = %q, want %q", tc.expr, got, tc.want)
			}
		})
	}
	if _, err := promqlMetricNames(`rate(x{a="b}[5m])`); err == nil {
		t.Fatal("an unterminated string was accepted")
	}
}

// dashboardQueries returns every PromQL expression of the dashboard: the
// panels' targets and the query variables' label_values metrics.
func dashboardQueries(t *testing.T, dash map[string]any) []string {
	t.Helper()
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if e, ok := v["expr"].(string); ok {
				exprs = append(exprs, e)
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(dash["panels"])
	labelValues := regexp.MustCompile(`^\s*label_values\(\s*([^,]+),\s*[a-zA-Z_]\w*\s*\)\s*$`)
	tmpl, _ := dash["templating"].(map[string]any)
	vars, _ := tmpl["list"].([]any)
	for _, v := range vars {
		v, _ := v.(map[string]any)
		if v["type"] != "query" {
			continue
		}
		def, _ := v["definition"].(string)
		m := labelValues.FindStringSubmatch(def)
		if m == nil {
			t.Fatalf("template variable %v: query %q is not label_values(metric, label)", v["name"], def)
		}
		exprs = append(exprs, m[1])
	}
	return exprs
}

// exportedAs says how a metric name the dashboard queries is exported:
// as a family of its own, or as the _bucket, _sum or _count series of a
// histogram (a summary has _sum and _count).
func exportedAs(fams map[string]*dto.MetricFamily, name string) error {
	if f, ok := fams[name]; ok {
		if t := f.GetType(); t == dto.MetricType_HISTOGRAM || t == dto.MetricType_SUMMARY {
			return fmt.Errorf("%s is a %v: query its _bucket, _sum or _count series", name, t)
		}
		return nil
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		f, ok := fams[base]
		if !ok {
			break
		}
		switch t := f.GetType(); {
		case t == dto.MetricType_HISTOGRAM, t == dto.MetricType_SUMMARY && suffix != "_bucket":
			return nil
		default:
			return fmt.Errorf("%s: %s is a %v, which has no %s series", name, base, t, suffix)
		}
	}
	return fmt.Errorf("%s is not exported", name)
}

// loadDashboard reads the Grafana dashboard as JSON.
func loadDashboard(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	return dash
}

// TestDashboardMetricsExported checks that every metric the Grafana
// dashboard queries is one the daemon exports, so a renamed metric breaks
// this test instead of a panel.
func TestDashboardMetricsExported(t *testing.T) {
	dash := loadDashboard(t)
	if v, _ := dash["schemaVersion"].(float64); v < 36 {
		t.Errorf("schemaVersion %v, want at least 36", dash["schemaVersion"])
	}
	checkDatasources(t, dash)

	var names []string
	for _, e := range dashboardQueries(t, dash) {
		ns, err := promqlMetricNames(e)
		if err != nil {
			t.Fatal(err)
		}
		if len(ns) == 0 {
			t.Errorf("query %q selects no metric", e)
		}
		for _, n := range ns {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	// The figures the dashboard exists to show.
	for _, want := range []string{
		"prefixd_cache_hit_tokens_total", "prefixd_cache_query_tokens_total", "prefixd_blocks",
		"prefixd_requests_running", "prefixd_requests_waiting",
		"prefixd_time_to_first_token_seconds_bucket", "prefixd_inter_token_latency_seconds_bucket",
		"prefixd_cache_evicted_blocks_total", "prefixd_cache_hit_age_seconds_bucket",
		"prefixd_prefill_tokens_total", "prefixd_generated_tokens_total",
		"prefixd_remote_tier_tokens_total", "prefixd_remote_tier_fetch_seconds_bucket",
		"prefixd_remote_tier_leases_total",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("the dashboard does not query %s", want)
		}
	}

	// The remote tier's series come from its own collector, which serve
	// registers when --remote-tier is set.
	h := newHarness(t, withServer(func(c *Config) { c.Metrics.Registry().MustRegister(idleRemoteTier(t).Collector()) }))
	// The same prompt twice, so the second hits the cache and the hit-age
	// histogram has a sample too.
	prompt := `{"prompt": "The dashboard reads every metric it shows from here.", "max_tokens": 4}`
	h.generate(prompt)
	h.generate(prompt)
	fams := h.scrapeWhen("histogram samples", func(f map[string]*dto.MetricFamily) bool {
		return metric(f, "prefixd_time_to_first_token_seconds") > 0 && metric(f, "prefixd_cache_hit_age_seconds", "tier", "device") > 0
	})
	for _, n := range names {
		if err := exportedAs(fams, n); err != nil {
			t.Errorf("%s queries a metric the daemon does not export: %v", dashboardPath, err)
		}
	}
	t.Logf("%d metric names checked: %s", len(names), strings.Join(names, " "))
}

// checkDatasources checks that every panel and query uses the templated
// Prometheus data source, so the dashboard imports into any Grafana.
func checkDatasources(t *testing.T, dash map[string]any) {
	t.Helper()
	tmpl, _ := dash["templating"].(map[string]any)
	vars, _ := tmpl["list"].([]any)
	found := false
	for _, v := range vars {
		v, _ := v.(map[string]any)
		if v["name"] == "DS_PROMETHEUS" && v["type"] == "datasource" && v["query"] == "prometheus" {
			found = true
		}
	}
	if !found {
		t.Error("no datasource template variable DS_PROMETHEUS of type prometheus")
	}
	panels, _ := dash["panels"].([]any)
	if len(panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	for _, p := range panels {
		p, _ := p.(map[string]any)
		if p["type"] == "row" {
			continue
		}
		targets, _ := p["targets"].([]any)
		if len(targets) == 0 {
			t.Errorf("panel %q has no queries", p["title"])
		}
		for _, x := range append([]any{p}, targets...) {
			ds, _ := x.(map[string]any)["datasource"].(map[string]any)
			if ds["uid"] != "${DS_PROMETHEUS}" || ds["type"] != "prometheus" {
				t.Errorf("panel %q: datasource %v, want the ${DS_PROMETHEUS} variable", p["title"], ds)
			}
		}
	}
}
