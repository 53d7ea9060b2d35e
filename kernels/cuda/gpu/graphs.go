package gpu

import (
	"errors"
	"fmt"
	"slices"

	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// Capturer is a Mem that can record its launches and matrix products
// into a graph instead of running them, between BeginCapture and
// EndCapture (CUDA's stream capture): kernels/cuda's Exec and the
// emulator are. A Backend on one replays a step's ops from a graph when
// they repeat (UseGraphs).
type Capturer interface {
	BeginCapture() error
	EndCapture() (launch.Graph, error)
}

// maxGraphs is the most graphs a Backend keeps: decode steps of a few
// batch sizes and attention splits.
const maxGraphs = 8

// graphs runs a step's ops (all but its upload) from a CUDA graph when
// they would launch exactly what an earlier step's launched: the same
// kernels, shapes and parameters, which are the addresses of the step's
// buffers and its sizes, never its data (positions, block tables and
// tokens are in the uploaded arrays). So consecutive decode steps of the
// same rows repeat until attention's split changes, a buffer grows or a
// row joins or leaves, and one graph launch replaces a step's hundreds of
// kernel launches. Each step's launches are first traced on the host
// (cheap next to launching them); a trace seen twice in a row is
// captured, and the maxGraphs most recently used graphs are kept. A
// capture that fails turns graphs off for the Backend (Err says why) and
// the step runs its ops one by one, as without graphs.
type graphs struct {
	off       bool
	err       error
	onOff     func(error) // NotifyGraphsOff's
	rec       recorder
	cur, last trace
	kept      []kept // least recently used first
	stats     GraphStats
}

// kept is a captured graph and the trace it replays.
type kept struct {
	t trace
	g launch.Graph
}

// GraphStats counts a Backend's graphs.
type GraphStats struct {
	Captures   int   // graphs captured
	Replays    int   // steps run from a graph (captures included)
	Live       int   // graphs kept
	Err        error // the capture failure that turned graphs off, if any
	DestroyErr error // the first failure to release a graph dropped from the kept ones
}

// UseGraphs turns graph replay on (the default) or off; graphs are kept
// until Close either way.
func (b *Backend) UseGraphs(on bool) { b.graphs.off = !on }

// NotifyGraphsOff makes a failed capture, which turns graphs off, call f
// with the reason (on the device's thread, during the step): for the
// daemon's log.
func (b *Backend) NotifyGraphsOff(f func(error)) { b.graphs.onOff = f }

// GraphStats returns how the Backend's steps have used graphs.
func (b *Backend) GraphStats() GraphStats {
	s := b.graphs.stats
	s.Live, s.Err = len(b.graphs.kept), b.graphs.err
	return s
}

// runOps runs the step's ops: its upload (ops[0], queued by Begin)
// directly, the rest from a graph where m captures and graphs are on.
func (b *Backend) runOps(m Mem) error {
	ops := b.ops
	if len(ops) > 0 && ops[0].code == opWrite {
		if err := b.run(m, &ops[0]); err != nil {
			return err
		}
		ops = ops[1:]
	}
	if c, ok := m.(Capturer); ok && !b.graphs.off && len(ops) > 0 {
		return b.graphs.run(b, m, c, ops)
	}
	return b.runEach(m, ops)
}

// runEach launches ops one by one on m.
func (b *Backend) runEach(m Mem, ops []op) error {
	for i := range ops {
		if err := b.run(m, &ops[i]); err != nil {
			return err
		}
	}
	return nil
}

// run runs ops from a kept graph if one replays them, captures one if
// the previous step launched the same, else launches them one by one.
func (g *graphs) run(b *Backend, m Mem, c Capturer, ops []op) error {
	g.cur.reset()
	g.rec = recorder{t: &g.cur, dt: b.dt}
	if b.runEach(&g.rec, ops) != nil {
		return b.runEach(m, ops) // the same error, from the device
	}
	for i := range g.kept {
		if k := g.kept[i]; k.t.equal(&g.cur) {
			copy(g.kept[i:], g.kept[i+1:])
			g.kept[len(g.kept)-1] = k
			return g.launch(k.g)
		}
	}
	if !g.cur.equal(&g.last) {
		g.cur, g.last = g.last, g.cur
		return b.runEach(m, ops)
	}
	if err := c.BeginCapture(); err != nil {
		g.fail(err)
		return b.runEach(m, ops)
	}
	// The ops ran on the host alike just before (the trace), so one that
	// fails now fails only under capture (a call the capture refused, or
	// one after it invalidated the capture): the captured ops never ran,
	// and the step runs them directly.
	runErr := b.runEach(m, ops)
	graph, err := c.EndCapture()
	if err = errors.Join(runErr, err); err != nil {
		if graph != nil {
			err = errors.Join(err, graph.Destroy())
		}
		g.fail(err)
		return b.runEach(m, ops)
	}
	if len(g.kept) == maxGraphs {
		old := g.kept[0]
		g.kept = append(g.kept[:0], g.kept[1:]...)
		if err := old.g.Destroy(); err != nil && g.stats.DestroyErr == nil {
			g.stats.DestroyErr = err // the step does not need the old graph
		}
	}
	g.kept = append(g.kept, kept{t: g.cur.clone(), g: graph})
	g.stats.Captures++
	return g.launch(graph)
}

// launch launches graph, counting the step as replayed.
func (g *graphs) launch(graph launch.Graph) error {
	if err := graph.Launch(); err != nil {
		return err
	}
	g.stats.Replays++
	return nil
}

// fail turns graphs off after a capture failed with err.
func (g *graphs) fail(err error) {
	g.off, g.err = true, fmt.Errorf("gpu: graph capture failed, steps launch their kernels one by one: %w", err)
	if g.onOff != nil {
		g.onOff(g.err)
	}
}

// destroy releases every kept graph (Close).
func (g *graphs) destroy() error {
	var errs []error
	for _, k := range g.kept {
		errs = append(errs, k.g.Destroy())
	}
	g.kept = g.kept[:0]
	return errors.Join(errs...)
}

// trace is what a step launches: each call's kernel, grid and block, and
// its parameters one after another.
type trace struct {
	calls []traced
	args  []uint64
}

// traced is one launch of a trace; a matrix product is kernel "MatMulT"
// with its operands as parameters.
type traced struct {
	kernel      string
	grid, block launch.Dim3
	nargs       int
}

func (t *trace) reset() { t.calls, t.args = t.calls[:0], t.args[:0] }

func (t *trace) equal(u *trace) bool {
	return slices.Equal(t.calls, u.calls) && slices.Equal(t.args, u.args)
}

func (t *trace) clone() trace { return trace{slices.Clone(t.calls), slices.Clone(t.args)} }

// recorder is a Mem that adds the launches and products it is given to a
// trace instead of running them. Anything else is not an op a graph
// holds (the step's upload runs before it), and fails.
type recorder struct {
	t  *trace
	dt src.DType
}

var errTraced = errors.New("gpu: only launches and products are traced")

func (r *recorder) DType() src.DType { return r.dt }

func (r *recorder) Launch(kernel string, grid, block launch.Dim3, args ...uint64) error {
	r.t.calls = append(r.t.calls, traced{kernel: kernel, grid: grid, block: block, nargs: len(args)})
	r.t.args = append(r.t.args, args...)
	return nil
}

func (r *recorder) MatMulT(y, a, w launch.Ptr, m, n, k int, beta float32) error {
	return r.Launch("MatMulT", launch.Dim3{}, launch.Dim3{}, launch.P(y), launch.P(a), launch.P(w), launch.L(int64(m)),
		launch.L(int64(n)), launch.L(int64(k)), launch.F(beta))
}

func (r *recorder) Alloc(int) (launch.Ptr, error)      { return 0, errTraced }
func (r *recorder) Free(launch.Ptr) error              { return errTraced }
func (r *recorder) Write(launch.Ptr, []byte) error     { return errTraced }
func (r *recorder) Read([]byte, launch.Ptr) error      { return errTraced }
func (r *recorder) HostAlloc(int) ([]byte, error)      { return nil, errTraced }
func (r *recorder) HostFree([]byte) error              { return errTraced }
func (r *recorder) ReadAsync([]byte, launch.Ptr) error { return errTraced }
func (r *recorder) Synchronize() error                 { return errTraced }
