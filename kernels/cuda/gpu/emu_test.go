//go:build cgo && amd64

package gpu

import (
	"testing"

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

func init() {
	targets = append(targets, target{name: "emu", open: func(t testing.TB, dt src.DType) (Device, func() int64) {
		d := emu.New(dt, emu.Forward)
		t.Cleanup(func() {
			if err := d.Close(); err != nil {
				t.Error(err)
			}
		})
		return emuDevice{d}, func() int64 { return int64(d.Live()) }
	}})
}
