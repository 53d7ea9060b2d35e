package bench

import (
	"fmt"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
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

// WriteSimPlots writes hit rate and memory held against TTL, a line per
// pool size, to ttl-hit.png and ttl-memory.png in dir, and returns the
// file names.
func WriteSimPlots(dir string, results []SimResult) ([]string, error) {
	type series struct {
		pool int
		hit  plotter.XYs
		mem  plotter.XYs
	}
	var all []*series
	xMin, xMax := math.Inf(1), math.Inf(-1)
	for _, r := range results {
		xMin, xMax = min(xMin, r.TTL.Seconds()), max(xMax, r.TTL.Seconds())
		var s *series
		for _, x := range all {
			if x.pool == r.PoolBlocks {
				s = x
			}
		}
		if s == nil {
			s = &series{pool: r.PoolBlocks}
			all = append(all, s)
		}
		secs := r.TTL.Seconds()
		s.hit = append(s.hit, plotter.XY{X: secs, Y: 100 * r.HitRate})
		s.mem = append(s.mem, plotter.XY{X: secs, Y: r.AvgBlocks})
	}
	files := []struct {
		name, title, unit string
		pts               func(*series) plotter.XYs
	}{
		{"ttl-hit.png", "Prefix cache hit rate (tokens) by TTL", "hit rate %", func(s *series) plotter.XYs { return s.hit }},
		{"ttl-memory.png", "KV blocks held (time-weighted mean) by TTL", "blocks", func(s *series) plotter.XYs { return s.mem }},
	}
	var names []string
	for _, f := range files {
		p := plot.New()
		p.Title.Text = f.title
		p.X.Label.Text = "TTL (s, log scale)"
		p.Y.Label.Text = f.unit
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		// Fixed bounds: with one TTL the automatic range would be x±1,
		// which reaches zero or below for a TTL of a second or less.
		p.X.Min, p.X.Max = xMin/2, xMax*2
		p.Add(plotter.NewGrid())
		for i, s := range all {
			l, pts, err := plotter.NewLinePoints(f.pts(s))
			if err != nil {
				return names, fmt.Errorf("bench: plot %s: %w", f.name, err)
			}
			l.Color = plotutil.Color(i)
			pts.Color = plotutil.Color(i)
			pts.Shape = plotutil.Shape(i)
			p.Add(l, pts)
			p.Legend.Add(fmt.Sprintf("pool %d blocks", s.pool), l, pts)
		}
		p.Legend.Top = true
		p.Legend.Left = true
		if err := p.Save(7*vg.Inch, 4*vg.Inch, filepath.Join(dir, f.name)); err != nil {
			return names, fmt.Errorf("bench: plot %s: %w", f.name, err)
		}
		names = append(names, f.name)
	}
	return names, nil
}
