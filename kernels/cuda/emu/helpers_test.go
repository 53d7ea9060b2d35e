//go:build cgo && amd64

package emu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// tolerance is the largest relative error a kernel may show against the
// CPU reference for each element type: f32 rounds the same inputs in a
// different order; bf16 and f16 round the outputs (and the CPU side is
// given the same rounded inputs).
var tolerance = map[src.DType]float64{src.F32: 1e-4, src.F16: 2e-3, src.BF16: 2e-2}

// each runs f on a device of every element type (forward schedule) and on
// f32 devices with the reverse and a shuffled schedule, which would break
// a kernel that depends on the order its threads run in between barriers.
func each(t *testing.T, f func(t *testing.T, e *env)) {
	type run struct {
		dt    src.DType
		sched Schedule
	}
	runs := []run{{src.BF16, Forward}, {src.F16, Forward}, {src.F32, Forward}, {src.F32, Reverse}, {src.F32, Shuffled + 7}}
	for _, r := range runs {
		t.Run(fmt.Sprintf("%v/sched%d", r.dt, r.sched), func(t *testing.T) {
			d := New(r.dt, r.sched)
			t.Cleanup(func() {
				if err := d.Close(); err != nil {
					t.Error(err)
				}
			})
			f(t, &env{t: t, d: d, dt: r.dt, rng: rand.New(rand.NewPCG(1, uint64(r.sched)))})
		})
	}
}

// env is one test's device with upload and download helpers.
type env struct {
	t   *testing.T
	d   *Device
	dt  src.DType
	rng *rand.Rand
}

func (e *env) alloc(n int) launch.Ptr {
	e.t.Helper()
	p, err := e.d.Alloc(n)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) launch(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// floats uploads f as float32s.
func (e *env) floats(f []float32) launch.Ptr {
	p := e.alloc(4 * len(f))
	launch.Encode(src.F32, e.d.Bytes(p, 4*len(f)), f)
	return p
}

// elems uploads f in the device's element type.
func (e *env) elems(f []float32) launch.Ptr {
	n := len(f) * e.dt.Size()
	p := e.alloc(n)
	launch.Encode(e.dt, e.d.Bytes(p, n), f)
	return p
}

func (e *env) ints(v []int32) launch.Ptr {
	p := e.alloc(4 * len(v))
	b := e.d.Bytes(p, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return p
}

func (e *env) readFloats(p launch.Ptr, n int) []float32 {
	f := make([]float32, n)
	launch.Decode(src.F32, f, e.d.Bytes(p, 4*n))
	return f
}

func (e *env) readElems(p launch.Ptr, n int) []float32 {
	f := make([]float32, n)
	launch.Decode(e.dt, f, e.d.Bytes(p, n*e.dt.Size()))
	return f
}

func (e *env) readInts(p launch.Ptr, n int) []int32 {
	b := e.d.Bytes(p, 4*n)
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// rand returns n values in [-1, 1), rounded to the element type, so that
// the CPU reference sees exactly what the device holds.
func (e *env) rand(n int) []float32 {
	f := make([]float32, n)
	for i := range f {
		f[i] = launch.Round(e.dt, float32(e.rng.Float64()*2-1))
	}
	return f
}

// randF32 returns n values in [-1, 1) that stay float32.
func (e *env) randF32(n int) []float32 {
	f := make([]float32, n)
	for i := range f {
		f[i] = float32(e.rng.Float64()*2 - 1)
	}
	return f
}

// relErr is the largest difference between got and want relative to the
// largest magnitude in want: an error measure that does not blow up on
// elements near zero. A NaN anywhere is an infinite error.
func relErr(got, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var diff, scale float64
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if d != d {
			return math.Inf(1)
		}
		diff = max(diff, d)
		scale = max(scale, math.Abs(float64(want[i])))
	}
	if scale == 0 {
		scale = 1
	}
	return diff / scale
}

func (e *env) close(what string, got, want []float32) {
	e.t.Helper()
	if err := relErr(got, want); err > tolerance[e.dt] {
		i := worst(got, want)
		e.t.Errorf("%s: relative error %.3g over %.0e (element %d: got %g, want %g)", what, err, tolerance[e.dt], i, got[i], want[i])
	}
}

// worst returns the index of the largest difference, or of a NaN.
func worst(got, want []float32) int {
	w, wd := 0, -1.0
	for i := range min(len(got), len(want)) {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if d != d {
			return i
		}
		if d > wd {
			w, wd = i, d
		}
	}
	return w
}
