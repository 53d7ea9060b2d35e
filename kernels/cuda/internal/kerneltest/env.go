// Package kerneltest holds the kernel tests that run on every target: the
// CPU emulator in CI (kernels/cuda/emu) and a GPU (kernels/cuda, build tag
// cuda). Each test compares a kernel, launched through package launch,
// with the Go CPU kernels (kernels/cpu) or sample on small random shapes.
package kerneltest

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// Memory is a device the tests can run on: it launches kernels and holds
// buffers.
type Memory interface {
	launch.Device
	// Alloc returns n bytes of device memory.
	Alloc(n int) (launch.Ptr, error)
	// Free releases an allocation.
	Free(p launch.Ptr) error
	// Write copies b to device address p.
	Write(p launch.Ptr, b []byte) error
	// Read copies len(b) bytes from device address p into b.
	Read(b []byte, p launch.Ptr) error
}

// Target is one device to run the tests on.
type Target struct {
	Name string
	// New returns the device; Run frees what the tests allocated on it
	// when each test ends.
	New func(t *testing.T) Memory
}

// Test is one kernel test.
type Test struct {
	Name string
	F    func(t *testing.T, e *Env)
}

// Tests lists every kernel test.
var Tests = []Test{
	{"Convert", Convert}, {"Embed", Embed}, {"RMSNorm", RMSNorm}, {"RoPEAdjacent", RoPEAdjacent},
	{"RoPEHalves", RoPEHalves}, {"SwiGLU", SwiGLU}, {"AddGather", AddGather}, {"Argmax", Argmax},
	{"Attention", Attention}, {"CopyBlocks", CopyBlocks}, {"RoPEAppendKV", RoPEAppendKV},
	{"TensorCores", TensorCores}, {"Sampling", Sampling},
}

// Large lists the kernel tests at the sizes of real models, which take
// seconds on the emulator: run them on one of its targets.
var Large = []Test{{"HeadNormQwen3Step", HeadNormQwen3Step}}

// Run runs each of tests (Tests, Large) on every target, as subtests
// named test/target.
func Run(t *testing.T, targets []Target, tests []Test) {
	for _, test := range tests {
		t.Run(test.Name, func(t *testing.T) {
			for i, tg := range targets {
				t.Run(tg.Name, func(t *testing.T) {
					m := tg.New(t)
					e := &Env{t: t, d: m, dt: m.DType(), rng: rand.New(rand.NewPCG(1, uint64(i)))}
					t.Cleanup(e.free)
					test.F(t, e)
				})
			}
		})
	}
}

// Tolerance is the largest relative error (RelErr) a kernel may show
// against the CPU reference for each element type: f32 only sums in a
// different order; bf16 and f16 round their outputs (the CPU side is given
// the same rounded inputs).
var Tolerance = map[src.DType]float64{src.F32: 1e-4, src.F16: 2e-3, src.BF16: 2e-2}

// Env is one test's device with upload and download helpers; they fail
// the test on a device error.
type Env struct {
	t      *testing.T
	d      Memory
	dt     src.DType
	rng    *rand.Rand
	allocs []launch.Ptr
}

func (e *Env) free() {
	for _, p := range e.allocs {
		if err := e.d.Free(p); err != nil {
			e.t.Error(err)
		}
	}
}

func (e *Env) alloc(n int) launch.Ptr {
	e.t.Helper()
	p, err := e.d.Alloc(n)
	if err != nil {
		e.t.Fatal(err)
	}
	e.allocs = append(e.allocs, p)
	return p
}

func (e *Env) launch(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *Env) write(p launch.Ptr, b []byte) {
	e.t.Helper()
	if err := e.d.Write(p, b); err != nil {
		e.t.Fatal(err)
	}
}

func (e *Env) read(p launch.Ptr, n int) []byte {
	e.t.Helper()
	b := make([]byte, n)
	if err := e.d.Read(b, p); err != nil {
		e.t.Fatal(err)
	}
	return b
}

// upload copies f to the device as elements of t.
func (e *Env) upload(t src.DType, f []float32) launch.Ptr {
	b := make([]byte, len(f)*t.Size())
	launch.Encode(t, b, f)
	p := e.alloc(len(b))
	e.write(p, b)
	return p
}

// floats uploads f as float32s.
func (e *Env) floats(f []float32) launch.Ptr { return e.upload(src.F32, f) }

// elems uploads f in the device's element type.
func (e *Env) elems(f []float32) launch.Ptr { return e.upload(e.dt, f) }

func (e *Env) ints(v []int32) launch.Ptr {
	b := int32Bytes(v)
	p := e.alloc(len(b))
	e.write(p, b)
	return p
}

// int32Bytes returns v as little-endian bytes.
func int32Bytes(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func (e *Env) download(t src.DType, p launch.Ptr, n int) []float32 {
	f := make([]float32, n)
	launch.Decode(t, f, e.read(p, n*t.Size()))
	return f
}

func (e *Env) readFloats(p launch.Ptr, n int) []float32 { return e.download(src.F32, p, n) }

func (e *Env) readElems(p launch.Ptr, n int) []float32 { return e.download(e.dt, p, n) }

func (e *Env) readInts(p launch.Ptr, n int) []int32 {
	b := e.read(p, 4*n)
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// rand returns n values in [-1, 1), rounded to the element type, so that
// the CPU reference sees exactly what the device holds.
func (e *Env) rand(n int) []float32 {
	f := make([]float32, n)
	for i := range f {
		f[i] = launch.Round(e.dt, float32(e.rng.Float64()*2-1))
	}
	return f
}

// randF32 returns n values in [-1, 1) that stay float32.
func (e *Env) randF32(n int) []float32 {
	f := make([]float32, n)
	for i := range f {
		f[i] = float32(e.rng.Float64()*2 - 1)
	}
	return f
}

// RelErr is the largest difference between got and want relative to the
// largest magnitude in want: an error measure that does not blow up on
// elements near zero. A NaN anywhere, or a length mismatch, is an
// infinite error.
func RelErr(got, want []float32) float64 {
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

func (e *Env) close(what string, got, want []float32) {
	e.t.Helper()
	e.within(what, got, want, Tolerance[e.dt])
}

// within fails the test if got is not within tol of want (RelErr).
func (e *Env) within(what string, got, want []float32, tol float64) {
	e.t.Helper()
	if err := RelErr(got, want); err > tol {
		i := worst(got, want)
		e.t.Errorf("%s: relative error %.3g over %.0e (element %d: got %g, want %g)", what, err, tol, i, got[i], want[i])
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

// sub returns e for subtest t: the same device and allocations, failing t.
func (e *Env) sub(t *testing.T) *Env {
	c := *e
	c.t, c.allocs = t, nil
	t.Cleanup(func() { e.allocs = append(e.allocs, c.allocs...) })
	return &c
}
