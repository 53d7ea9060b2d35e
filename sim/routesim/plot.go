package routesim

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePlot draws the hit rate against the replica count, a line per
// routing policy and one for the single replica with all the blocks, to a
// PNG at path.
func WritePlot(path string, results []Result) error {
	var names []string
	lines := map[string]plotter.XYs{}
	for _, r := range results {
		if lines[r.Policy] == nil {
			names = append(names, r.Policy)
		}
		n := r.Replicas
		if r.Policy == referenceName {
			n = r.BlocksPerReplica / results[0].BlocksPerReplica // the replicas whose blocks it has
		}
		lines[r.Policy] = append(lines[r.Policy], plotter.XY{X: float64(n), Y: 100 * r.HitRate})
	}
	p := plot.New()
	p.Title.Text = "Prefix cache hit rate (tokens) by replicas and routing"
	p.X.Label.Text = "replicas (log scale)"
	p.Y.Label.Text = "hit rate %"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 100
	p.Add(plotter.NewGrid())
	for i, name := range names {
		l, pts, err := plotter.NewLinePoints(lines[name])
		if err != nil {
			return fmt.Errorf("routesim: plot: %w", err)
		}
		l.Color, pts.Color, pts.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(name, l, pts)
	}
	p.Legend.Top, p.Legend.Left = false, false
	return p.Save(7*vg.Inch, 4*vg.Inch, path)
}
