//go:build cgo && amd64

package emu

import (
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
	kerneltest.Run(t, targets)
}

func TestKernelsRegistered(t *testing.T) {
	got, want := Kernels(), slices.Clone(src.Kernels)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("emulator has %v, src.Kernels %v", got, want)
	}
}

// TestLaunchErrors checks the launcher refuses what cuLaunchKernel would.
func TestLaunchErrors(t *testing.T) {
	d := New(src.F32, Forward)
	one, warp := launch.Dim3{X: 1, Y: 1, Z: 1}, launch.Dim3{X: 32, Y: 1, Z: 1}
	for name, err := range map[string]error{
		"unknown kernel":     d.Launch("nope", one, warp),
		"missing parameter":  d.Launch("add", one, warp, 0, 0),
		"block over 1,024":   d.Launch("add", one, launch.Dim3{X: 1025, Y: 1, Z: 1}, 0, 0, 0),
		"empty grid":         d.Launch("add", launch.Dim3{X: 0, Y: 1, Z: 1}, warp, 0, 0, 0),
		"negative dimension": d.Launch("add", launch.Dim3{X: 1, Y: -1, Z: 1}, warp, 0, 0, 0),
	} {
		if err == nil {
			t.Errorf("%s: launched", name)
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
