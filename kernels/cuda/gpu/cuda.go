//go:build cuda

package gpu

import (
	"github.com/prefixd/prefixd/kernels/cuda"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
	"sync"
)

// Built says whether this binary has the GPU backend (the cuda build tag).
const Built = true

// A step's ops can run from CUDA graphs (Backend.UseGraphs).
var _ Capturer = (*cuda.Exec)(nil)

// gpuDevice is a kernels/cuda Device as a Device: a step's ops run in one
// hand-over to its thread, matrix products are cuBLAS GemmEx, the pool is
// a cuda.KVStore.
type gpuDevice struct {
	d    *cuda.Device
	call *call
}

// call hands Do's f to the device thread through run, a func value made
// once, so that a step's hand-over allocates nothing; mu keeps f for the
// one Do in flight.
type call struct {
	mu  sync.Mutex
	f   func(Mem) error
	run func(*cuda.Exec) error
}

// OpenCUDA opens GPU ordinal with kernels, pool and matrices of element
// type dt.
func OpenCUDA(ordinal int, dt src.DType) (GPU, error) {
	d, err := cuda.Open(cuda.Config{Ordinal: ordinal, DType: dt})
	if err != nil {
		return nil, err
	}
	c := &call{}
	c.run = func(x *cuda.Exec) error { return c.f(x) }
	return gpuDevice{d, c}, nil
}

func (g gpuDevice) Do(f func(Mem) error) error {
	c := g.call
	c.mu.Lock()
	defer c.mu.Unlock()
	c.f = f
	err := g.d.Do(c.run)
	c.f = nil
	return err
}
func (g gpuDevice) DType() src.DType { return g.d.DType() }
func (g gpuDevice) SMs() int         { return g.d.SMs() }
func (g gpuDevice) NewKV(lay launch.KVLayout) (KVPool, error) {
	return cuda.NewKVStore(g.d, lay)
}
func (g gpuDevice) MemInfo() (free, total int64, err error) { return g.d.MemInfo() }
func (g gpuDevice) Close() error                            { return g.d.Close() }
