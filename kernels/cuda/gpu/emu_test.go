//go:build cgo && amd64

package gpu

import (
	"testing"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/cuda/emu"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// emuDevice is the CPU emulator as a Device: Do runs on the caller's
// thread, the pool is an emu.KVStore, and it claims two multiprocessors so
// that contexts from 128 positions are split as on a loaded GPU.
type emuDevice struct{ d *emu.Device }

func (e emuDevice) Do(f func(Mem) error) error { return f(e.d) }
func (e emuDevice) DType() src.DType           { return e.d.DType() }
func (e emuDevice) SMs() int                   { return 2 }
func (e emuDevice) NewKV(lay launch.KVLayout) (KVPool, error) {
	return emu.NewKVStore(e.d, lay)
}

var _ Capturer = (*emu.Device)(nil)

func init() {
	emuE2E = &e2eTarget{
		open: func(b *testing.B) Device {
			d := emu.New(src.BF16, emu.Forward)
			b.Cleanup(func() { d.Close() })
			return emuDevice{d}
		},
		model: tinyModel, sizes: tinySizes,
	}
	targets = append(targets, target{name: "emu", open: func(t testing.TB, dt src.DType) (Device, func() int64) {
		d := emu.New(dt, emu.Forward)
		t.Cleanup(func() {
			if err := d.Close(); err != nil {
				t.Error(err)
			}
		})
		return emuDevice{d}, func() int64 { return int64(d.Live() + d.HostLive() + d.GraphsLive()) }
	}})
}

// TestCountedGPU checks the allocation count the GPU target relies on, on
// the emulator: a Backend's weights are counted while it holds them and
// none is left after Close.
func TestCountedGPU(t *testing.T) {
	d := emu.New(src.F32, emu.Forward)
	defer d.Close()
	c := newCountedGPU(emuGPU{emuDevice{d}})
	b := NewBackend(c)
	if _, err := b.Upload(kernels.FromF32(make([]float32, 6), 2, 3)); err != nil {
		t.Fatal(err)
	}
	if *c.live != 1 || d.Live() != 1 {
		t.Errorf("%d counted and %d live allocations holding one weight", *c.live, d.Live())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if *c.live != 0 || d.Live() != 0 {
		t.Errorf("%d counted and %d live allocations after Close", *c.live, d.Live())
	}
}

// emuGPU is the emulator as a GPU, for TestCountedGPU.
type emuGPU struct{ emuDevice }

func (emuGPU) MemInfo() (free, total int64, err error) { return 0, 0, nil }
func (emuGPU) Close() error                            { return nil }
