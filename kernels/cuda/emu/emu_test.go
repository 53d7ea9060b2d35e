//go:build cgo && amd64

package emu

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/kernels/cuda/internal/kerneltest"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// TestKernels runs every kernel test on devices of every element type
// (forward schedule) and on f32 devices with the reverse and a shuffled
// schedule, which break a kernel that depends on the order its threads
// run in between barriers.
func TestKernels(t *testing.T) {
	var targets []kerneltest.Target
	for _, r := range []struct {
		dt    src.DType
		sched Schedule
	}{{src.BF16, Forward}, {src.F16, Forward}, {src.F32, Forward}, {src.F32, Reverse}, {src.F32, Shuffled + 7}} {
		targets = append(targets, kerneltest.Target{
			Name: fmt.Sprintf("%v-sched%d", r.dt, r.sched),
			New: func(t *testing.T) kerneltest.Memory {
				d := New(r.dt, r.sched)
				t.Cleanup(func() {
					if err := d.Close(); err != nil {
						t.Error(err)
					}
				})
				return d
			},
		})
	}
	kerneltest.Run(t, targets, kerneltest.Tests)
}

// TestKernelsLarge runs the kernel tests at real models' sizes once, on
// a bf16 device (the default), as the GPU runs them.
func TestKernelsLarge(t *testing.T) {
	kerneltest.Run(t, []kerneltest.Target{{Name: "bf16", New: func(t *testing.T) kerneltest.Memory {
		d := New(src.BF16, Forward)
		t.Cleanup(func() {
			if err := d.Close(); err != nil {
				t.Error(err)
			}
		})
		return d
	}}}, kerneltest.Large)
}

func TestKernelsRegistered(t *testing.T) {
	got, want := Kernels(), slices.Clone(src.Kernels)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("emulator has %v, src.Kernels %v", got, want)
	}
}

// TestLaunchErrors checks the launcher refuses what cuLaunchKernel would:
// the limits of launch.GPULimits and of each kernel's launch bounds fail
// with launch.ErrLimits before anything runs.
func TestLaunchErrors(t *testing.T) {
	d := New(src.F32, Forward)
	one, warp := launch.Dim3{X: 1, Y: 1, Z: 1}, launch.Dim3{X: 32, Y: 1, Z: 1}
	for name, err := range map[string]error{
		"unknown kernel":    d.Launch("nope", one, warp),
		"missing parameter": d.Launch("add", one, warp, 0, 0),
	} {
		if err == nil {
			t.Errorf("%s: launched", name)
		}
	}
	d.AssumeRegisters("attn_wide", 79)
	for name, err := range map[string]error{
		"block over 1,024":      d.Launch("add", one, launch.Dim3{X: 1025, Y: 1, Z: 1}, 0, 0, 0),
		"empty grid":            d.Launch("add", launch.Dim3{X: 0, Y: 1, Z: 1}, warp, 0, 0, 0),
		"negative dimension":    d.Launch("add", launch.Dim3{X: 1, Y: -1, Z: 1}, warp, 0, 0, 0),
		"grid y over 65,535":    d.Launch("swiglu", launch.Dim3{X: 1, Y: 65536, Z: 1}, warp, 0, 0, 0, 0, 0),
		"grid z over 65,535":    d.Launch("attn", launch.Dim3{X: 1, Y: 1, Z: 65536}, warp, make([]uint64, 15)...),
		"over the launch bound": d.Launch("attn", one, launch.Dim3{X: 26 * 32, Y: 1, Z: 1}, make([]uint64, 15)...),
		"registers × threads":   d.Launch("attn_wide", one, launch.Dim3{X: 1024, Y: 1, Z: 1}, make([]uint64, 15)...),
	} {
		if !errors.Is(err, launch.ErrLimits) {
			t.Errorf("%s: %v, want launch.ErrLimits", name, err)
		}
	}
}

// TestMemory checks that reads and writes outside an allocation fail.
func TestMemory(t *testing.T) {
	d := New(src.F32, Forward)
	defer d.Close()
	p, err := d.Alloc(10)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Write(p+4, make([]byte, 6)); err != nil {
		t.Errorf("write of the last 6 bytes: %v", err)
	}
	if err := d.Write(p+5, make([]byte, 6)); err == nil {
		t.Error("write past the end succeeded")
	}
	if err := d.Read(make([]byte, 1), p-1); err == nil {
		t.Error("read before the start succeeded")
	}
	if err := d.Free(p); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(p); err == nil {
		t.Error("double free succeeded")
	}
}

func TestKVStore(t *testing.T) {
	for _, dt := range src.DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			d := New(dt, Forward)
			defer d.Close()
			lay := launch.KVLayout{Layers: 3, KVHeads: 2, HeadDim: 8, BlockSize: 5, NumBlocks: 9}
			s, err := NewKVStore(d, lay)
			if err != nil {
				t.Fatal(err)
			}
			kerneltest.KVStore(t, s, lay, dt.Size())
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if d.Live() != 0 {
				t.Errorf("%d allocations left after Close", d.Live())
			}
		})
	}
}

func TestMatMulT(t *testing.T) {
	for _, dt := range src.DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			d := New(dt, Forward)
			t.Cleanup(func() { d.Close() }) // after MatMulT's own cleanup frees its buffers
			kerneltest.MatMulT(t, d, d.MatMulT)
		})
	}
}

// TestGraph runs the graph test kernels/cuda runs on a GPU: a captured
// launch and product run only when the graph is launched, over what
// their buffers hold then.
func TestGraph(t *testing.T) {
	for _, dt := range src.DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			d := New(dt, Forward)
			t.Cleanup(func() {
				if n := d.GraphsLive(); n != 0 {
					t.Errorf("%d graphs left", n)
				}
				d.Close()
			})
			kerneltest.Graph(t, d, func(f func(kerneltest.Capturing) error) error { return f(d) })
		})
	}
}

// TestCaptureRefuses checks what the emulator refuses as a GPU's stream
// capture does: a copy, an allocation or a synchronisation while
// recording (which also fails the capture), a capture inside a capture,
// an EndCapture without a BeginCapture, and a graph launched after
// Destroy or while capturing.
func TestCaptureRefuses(t *testing.T) {
	d := New(src.F32, Forward)
	defer d.Close()
	p, err := d.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	host, err := d.HostAlloc(8)
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"Write":       func() error { return d.Write(p, make([]byte, 4)) },
		"Read":        func() error { return d.Read(make([]byte, 4), p) },
		"ReadAsync":   func() error { return d.ReadAsync(host[:4], p) },
		"Copy":        func() error { return d.Copy(p, p+32, 4) },
		"Alloc":       func() error { _, err := d.Alloc(4); return err },
		"Free":        func() error { return d.Free(p) },
		"HostAlloc":   func() error { _, err := d.HostAlloc(4); return err },
		"Synchronize": d.Synchronize,
	} {
		if err := d.BeginCapture(); err != nil {
			t.Fatal(err)
		}
		if err := launch.Add(d, p, p+32, 8); err != nil {
			t.Fatal(err)
		}
		if call() == nil {
			t.Errorf("%s while capturing: no error", name)
		}
		if g, err := d.EndCapture(); err == nil || g != nil {
			t.Errorf("%s while capturing: the capture still made a graph", name)
		}
	}
	if _, err := d.EndCapture(); err == nil {
		t.Error("EndCapture without BeginCapture: no error")
	}
	if err := d.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if d.BeginCapture() == nil {
		t.Error("a capture inside a capture: no error")
	}
	g, err := d.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if g.Launch() == nil {
		t.Error("a graph launched while capturing: no error")
	}
	empty, err := d.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	if d.GraphsLive() != 2 {
		t.Errorf("%d graphs live, want 2", d.GraphsLive())
	}
	if err := errors.Join(g.Destroy(), empty.Destroy()); err != nil {
		t.Fatal(err)
	}
	if g.Launch() == nil || g.Destroy() == nil {
		t.Error("a destroyed graph launched or destroyed again: no error")
	}
	if err := errors.Join(d.Free(p), d.HostFree(host)); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkDecodeAttention is kernels/cuda's benchmark of the same name
// at a tiny shape (8 sequences of 64 tokens, 8 query heads over 2 KV
// heads of 64, which attn_decode_tc takes too): scripts/gpu-check.sh's
// emulated run times it to rehearse the GPU's.
func BenchmarkDecodeAttention(b *testing.B) {
	d := New(src.BF16, Forward)
	b.Cleanup(func() { d.Close() })
	sh := kerneltest.DecodeShape{Seqs: 8, Ctx: 64, NHeads: 8, KVHeads: 2, HeadDim: 64, BlockSize: 16, SMs: 2,
		Splits: []int{0, 16, 32}}
	kerneltest.DecodeAttention(b, sh, func(f func(kerneltest.BenchMemory) error) error { return f(d) })
}

// BenchmarkPrefillAttention is kernels/cuda's benchmark of the same name
// at a tiny shape (2 prompts of 40 tokens, 4 query heads over one KV head
// of 64): scripts/gpu-check.sh's emulated run times it to rehearse the
// GPU's.
func BenchmarkPrefillAttention(b *testing.B) {
	d := New(src.BF16, Forward)
	b.Cleanup(func() { d.Close() })
	sh := kerneltest.PrefillShape{Seqs: 2, Prompt: 40, NHeads: 4, KVHeads: 1, HeadDim: 64, BlockSize: 16}
	kerneltest.PrefillAttention(b, sh, func(f func(kerneltest.BenchMemory) error) error { return f(d) })
}

// BenchmarkDeviceSampling is kernels/cuda's benchmark of the same name at
// a tiny shape (2 rows of 500 logits), for scripts/gpu-check.sh's
// emulated run.
func BenchmarkDeviceSampling(b *testing.B) {
	d := New(src.BF16, Forward)
	b.Cleanup(func() { d.Close() })
	kerneltest.DeviceSampling(b, kerneltest.SampleShape{Rows: 2, Vocab: 500}, func(f func(kerneltest.BenchMemory) error) error { return f(d) })
}
