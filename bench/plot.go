package bench

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// barMetric is one metric the report plots, a bar per workload and mode.
type barMetric struct {
	file, title, unit string
	value             func(*Result) float64
	keep              func(*Result) bool // nil: every result
}

var barMetrics = []barMetric{
	{"throughput.png", "Generated tokens/s per mode", "tokens/s",
		func(r *Result) float64 { return r.TokensPerSec }, nil},
	{"ttft.png", "Time to first token, p50, per mode", "ms",
		func(r *Result) float64 { return r.TTFTp50 }, nil},
	{"kv-efficiency.png", "KV memory efficiency (slots used / allocated, mean over steps)", "%",
		func(r *Result) float64 { return 100 * r.KVEfficiency }, nil},
	{"concurrency.png", "Peak concurrent sequences per mode", "sequences",
		func(r *Result) float64 { return float64(r.PeakRunning) }, nil},
}

// WritePlots writes the report's PNG plots into dir and returns their
// file names.
func (r *Report) WritePlots(dir string) ([]string, error) {
	var names []string
	for _, m := range barMetrics {
		var vals plotter.Values
		var labels []string
		for i := range r.Results {
			res := &r.Results[i]
			if m.keep != nil && !m.keep(res) {
				continue
			}
			vals = append(vals, m.value(res))
			labels = append(labels, res.Workload+" "+res.Mode)
		}
		if len(vals) == 0 {
			continue
		}
		if err := hbar(filepath.Join(dir, m.file), m.title, m.unit, labels, vals); err != nil {
			return names, err
		}
		names = append(names, m.file)
	}
	return names, nil
}

// hbar saves a horizontal bar chart, the first label at the top.
func hbar(path, title, unit string, labels []string, vals plotter.Values) error {
	n := len(vals)
	rev := make(plotter.Values, n)
	revLabels := make([]string, n)
	for i := range vals {
		rev[n-1-i], revLabels[n-1-i] = vals[i], labels[i]
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = unit
	p.X.Min = 0
	bars, err := plotter.NewBarChart(rev, vg.Points(10))
	if err != nil {
		return fmt.Errorf("bench: plot %s: %w", path, err)
	}
	bars.Horizontal = true
	p.Add(bars)
	p.NominalY(revLabels...)
	p.Add(plotter.NewGrid())
	if err := p.Save(7*vg.Inch, vg.Length(1.2+0.19*float64(n))*vg.Inch, path); err != nil {
		return fmt.Errorf("bench: plot %s: %w", path, err)
	}
	return nil
}
