// Package gpu is prefixd's model.Backend on the CUDA kernels: the layer
// loop's operations launched through package launch, written once over
// Device, a small abstraction that a GPU (kernels/cuda, build tag cuda:
// OpenCUDA) and the CPU emulator (kernels/cuda/emu, which runs the same
// .cu files) both implement, so that CI runs this backend, and the whole
// model and engine on it, without a GPU.
//
// Weights are uploaded once: matrices in the device's element type (bf16
// by default; f32 for exactness tests), vectors (norm weights, biases,
// RoPE frequency factors) in float32. Activations stay on the device. A
// step costs one upload of its rows (tokens, positions, block tables) and
// one hand-over to the device's thread, which runs every op queued since
// Begin (an opcode and its operands, in a slice reused from step to step:
// a warmed-up step allocates nothing here). A row that decodes greedily
// or samples sends back its token, 4 bytes; only the other rows that ask
// for logits send them back. The K/V pool is the device's
// (Device.NewKV), whose CopyBlocks runs on the device. Nothing here
// imports gorgonia.org/cu.
package gpu

import (
	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// Mem is the device as ops see it on the device's thread: kernel
// launches, memory, and the matrix product.
type Mem interface {
	launch.Memory
	// MatMulT sets y (float32, m×n row-major) to a·wᵀ + beta·y, a being
	// m×k and w n×k in the device's element type, accumulated in float32
	// (cuBLAS GemmEx on a GPU).
	MatMulT(y, a, w launch.Ptr, m, n, k int, beta float32) error
	// HostAlloc returns n bytes of host memory that ReadAsync copies into
	// (page-locked on a GPU); HostFree releases it.
	HostAlloc(n int) ([]byte, error)
	HostFree(b []byte) error
	// ReadAsync queues a copy of len(b) bytes from device address p into
	// b, which lies in memory from HostAlloc, after the work launched
	// before it; b holds them once Synchronize returns.
	ReadAsync(b []byte, p launch.Ptr) error
	// Synchronize waits for everything queued and returns the first
	// fault.
	Synchronize() error
}

// Device is a GPU or its emulator.
type Device interface {
	// Do runs f on the device's thread with its Mem and returns f's error.
	Do(f func(m Mem) error) error
	// DType is the element type of the kernels, the K/V pool and the
	// uploaded matrices.
	DType() src.DType
	// SMs is the number of multiprocessors, which sizes attention's
	// splits (launch.ChooseSplit).
	SMs() int
	// NewKV allocates a K/V pool of lay's shape.
	NewKV(lay launch.KVLayout) (KVPool, error)
}

// KVPool is a device's K/V pool: the block pool's Storage, with the
// device address the kernels read and write.
type KVPool interface {
	blockstore.Storage
	// Pool is the pool's device address.
	Pool() launch.Ptr
	// Close frees the pool.
	Close() error
}

// GPU is an opened physical GPU (OpenCUDA): a Device that reports its
// memory and is closed when done.
type GPU interface {
	Device
	// MemInfo returns the GPU's free and total memory in bytes.
	MemInfo() (free, total int64, err error)
	// Close releases the GPU; everything allocated on it is freed.
	Close() error
}
