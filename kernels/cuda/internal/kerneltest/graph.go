package kerneltest

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/kernels/cuda/launch"
)

// Capturing is a device that records launches and products into a graph
// between BeginCapture and EndCapture instead of running them: CUDA's
// stream capture (kernels/cuda's Exec) or the emulator's.
type Capturing interface {
	launch.Device
	MatMulT(y, a, w launch.Ptr, m, n, k int, beta float32) error
	BeginCapture() error
	EndCapture() (launch.Graph, error)
	Synchronize() error
}

// Graph checks a device's graphs: a captured kernel launch and matrix
// product do not run while they are recorded, and each launch of the
// graph runs them again over what their buffers hold by then (an input
// rewritten between two launches is read anew; an output accumulated
// into keeps accumulating). run runs f with the capturing device (on a
// GPU, in one hand-over to its thread); d copies between launches.
func Graph(t *testing.T, d Memory, run func(f func(c Capturing) error) error) {
	dt := d.DType()
	e := &Env{t: t, d: d, dt: dt, rng: rand.New(rand.NewPCG(5, 6))}
	t.Cleanup(e.free)
	const n, rows, cols, depth = 300, 5, 7, 64
	x0, y1 := e.randF32(n), e.randF32(n)
	a1, a2, w := e.rand(rows*depth), e.rand(rows*depth), e.rand(cols*depth)
	px, py := e.floats(x0), e.floats(y1)
	pa, pw, pout := e.elems(a1), e.elems(w), e.floats(make([]float32, rows*cols))
	var g launch.Graph
	e.launch(run(func(c Capturing) error {
		// The product runs once first, as a step does before the Backend
		// captures it: cuBLAS makes its handle and loads its kernels
		// outside the capture.
		if err := c.MatMulT(pout, pa, pw, rows, cols, depth, 0); err != nil {
			return err
		}
		if err := c.BeginCapture(); err != nil {
			return err
		}
		errAdd := launch.Add(c, px, py, n)
		errMul := c.MatMulT(pout, pa, pw, rows, cols, depth, 1)
		var err error
		g, err = c.EndCapture()
		if err := errors.Join(errAdd, errMul); err != nil {
			if g != nil {
				err = errors.Join(err, g.Destroy())
			}
			return err
		}
		return err
	}))
	defer func() { e.launch(run(func(Capturing) error { return g.Destroy() })) }()
	product := func(a []float32) []float32 {
		p := make([]float32, rows*cols)
		for i, v := range productT(a, w, rows, cols, depth) {
			p[i] = float32(v)
		}
		return p
	}
	want, wantOut := slices.Clone(x0), product(a1)
	check := func(when string) {
		t.Helper()
		if got := e.readFloats(px, n); !slices.Equal(got, want) {
			t.Errorf("%s: the captured add left x %v..., want %v...", when, got[:4], want[:4])
		}
		if err := RelErr(e.readFloats(pout, rows*cols), wantOut); err > Tolerance[dt] {
			t.Errorf("%s: the captured product's output has relative error %.3g", when, err)
		}
	}
	check("after the capture") // nothing ran: x as written, the product as its first run left it
	replay := func() {
		t.Helper()
		e.launch(run(func(c Capturing) error { return errors.Join(g.Launch(), c.Synchronize()) }))
	}
	replay()
	for i := range want {
		want[i] += y1[i]
	}
	p1 := product(a1)
	for i := range wantOut {
		wantOut[i] += p1[i]
	}
	check("after one launch")
	y2 := e.randF32(n)
	e.write(py, encode(launch.F32, y2))
	e.write(pa, encode(dt, a2))
	replay()
	p2 := product(a2)
	for i := range want {
		want[i] += y2[i]
	}
	for i := range wantOut {
		wantOut[i] += p2[i]
	}
	check("after a second launch over new inputs")
}
