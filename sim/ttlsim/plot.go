package ttlsim

import (
	"fmt"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePlots writes hit rate and memory held against TTL, a line per
// pool size, to ttl-hit.png and ttl-memory.png in dir, and returns the
// file names.
func WritePlots(dir string, results []Result) ([]string, error) {
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
				return names, fmt.Errorf("ttlsim: plot %s: %w", f.name, err)
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
			return names, fmt.Errorf("ttlsim: plot %s: %w", f.name, err)
		}
		names = append(names, f.name)
	}
	return names, nil
}
