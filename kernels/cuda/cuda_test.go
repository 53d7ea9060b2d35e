//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels/cuda/internal/kerneltest"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
)

func open(tb testing.TB, dt src.DType) *Device {
	tb.Helper()
	d, err := Open(Config{DType: dt})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

// TestKernels runs every kernel test of the CPU emulator, and those at
// real models' sizes, on the GPU for every element type.
func TestKernels(t *testing.T) {
	var targets []kerneltest.Target
	for _, dt := range src.DTypes {
		d := open(t, dt)
		targets = append(targets, kerneltest.Target{Name: dt.String(), New: func(*testing.T) kerneltest.Memory { return d }})
	}
	kerneltest.Run(t, targets, append(slices.Clone(kerneltest.Tests), kerneltest.Large...))
}

func TestKVStore(t *testing.T) {
	for _, dt := range src.DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			lay := launch.KVLayout{Layers: 3, KVHeads: 2, HeadDim: 8, BlockSize: 5, NumBlocks: 9}
			s, err := NewKVStore(open(t, dt), lay)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			kerneltest.KVStore(t, s, lay, dt.Size())
		})
	}
}

func TestMatMulT(t *testing.T) {
	for _, dt := range src.DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			d := open(t, dt)
			kerneltest.MatMulT(t, d, func(y, a, w launch.Ptr, m, n, k int, beta float32) error {
				return d.Do(func(x *Exec) error { return x.MatMulT(y, a, w, m, n, k, beta) })
			})
			t.Logf("cuBLAS library: %s", CuBLASLibrary()) // gpu-check's report reads this line
		})
	}
}

// TestGraph checks graph capture on the GPU (a kernel and a cuBLAS
// product, captured from the device's stream), as the emulator's test
// does.
func TestGraph(t *testing.T) {
	for _, dt := range src.DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			d := open(t, dt)
			kerneltest.Graph(t, d, func(f func(kerneltest.Capturing) error) error {
				return d.Do(func(x *Exec) error { return f(x) })
			})
		})
	}
}

// TestCloseFreesMemory checks that KVStore.Close frees every allocation
// the store made and Device.Close returns everything (context, module,
// cuBLAS handle) to the GPU, as a second context sees it. cuBLAS and the
// CUDA runtime keep some memory for the life of the process once loaded
// (by design, not a leak), so a first cycle of open, use and close loads
// them before the GPU's free memory is measured around a second, the
// same.
func TestCloseFreesMemory(t *testing.T) {
	probe := open(t, src.F32)
	free := func() int64 {
		t.Helper()
		f, _, err := probe.MemInfo()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	start := free()
	closeCycle(t)
	before := free()
	closeCycle(t)
	if after := free(); after != before {
		t.Errorf("GPU free memory %d after the second Device.Close, %d before its Open: %d bytes left", after, before, before-after)
	}
	t.Logf("cuBLAS %s and the runtime kept %d bytes in the first cycle", CuBLASLibrary(), start-before)
}

// closeCycle opens a bf16 Device, makes a KVStore, copies blocks, frees
// the store (checking the Device holds no allocation after), runs a
// cuBLAS product and closes the Device.
func closeCycle(t *testing.T) {
	t.Helper()
	d, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewKVStore(d, launch.KVLayout{Layers: 22, KVHeads: 4, HeadDim: 64, BlockSize: 16, NumBlocks: 2048})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CopyBlocks([]blockstore.BlockCopy{{Src: 0, Dst: 1, Slots: 16}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A product (y f32 at p, then bf16 a and w) makes the cuBLAS handle
	// and its workspace, which Device.Close must release too.
	err = d.Do(func(x *Exec) error {
		if n := x.Live(); n != 0 {
			return fmt.Errorf("%d allocations left after KVStore.Close (its pool and copy descriptors)", n)
		}
		if err := x.MatMulT(0, 0, 0, 0, 0, 0, 0); err == nil {
			return errors.New("empty product accepted")
		}
		p, err := x.Alloc(3 * 4 * 8 * 8)
		if err != nil {
			return err
		}
		if err := x.Write(p, make([]byte, 3*4*8*8)); err != nil {
			return err
		}
		return errors.Join(x.MatMulT(p, p+4*8*8, p+6*8*8, 8, 8, 8, 0), x.Synchronize(), x.Free(p))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

// TestLaunchLimits checks that the GPU's launch limits and each kernel's
// come from its attributes, and that a launch over them fails with
// launch.ErrLimits before reaching the driver.
func TestLaunchLimits(t *testing.T) {
	d := open(t, src.BF16)
	lim := d.Limits()
	if lim.MaxThreads < 1024 || lim.MaxGrid.Y < 65535 || lim.MaxRegisters < 65536 {
		t.Errorf("limits %+v", lim)
	}
	for _, name := range src.Kernels {
		k, ok := d.Kernel(name)
		if !ok || k.MaxThreads != src.MaxThreads(name) || k.Registers <= 0 || k.Registers*k.MaxThreads > lim.MaxRegisters {
			t.Errorf("%s: %+v, want %d threads (its launch bound) and registers that fit them", name, k, src.MaxThreads(name))
		}
		t.Logf("kernel %s: %d registers, %d threads", name, k.Registers, k.MaxThreads) // read by gpu-check's report
	}
	err := d.Do(func(x *Exec) error {
		return x.Launch("attn", launch.Dim3{X: 1, Y: 1, Z: 1}, launch.Dim3{X: 26 * 32, Y: 1, Z: 1}, make([]uint64, 15)...)
	})
	if !errors.Is(err, launch.ErrLimits) {
		t.Errorf("attn with 832 threads: %v, want launch.ErrLimits", err)
	}
}

// BenchmarkDecodeAttention times one decode step's attention over 64
// sequences of 1,024 cached tokens (TinyLlama's shape: 32 query heads, 4
// KV heads of 64, bf16, blocks of 16 in random order) at several splits,
// and a device-to-device copy in the same run (kerneltest.DecodeAttention;
// the emulator's runs it at a tiny shape).
func BenchmarkDecodeAttention(b *testing.B) {
	d := open(b, src.BF16)
	sh := kerneltest.DecodeShape{Seqs: 64, Ctx: 1024, NHeads: 32, KVHeads: 4, HeadDim: 64, BlockSize: 16, SMs: d.SMs(),
		Splits: []int{0, 64, 128, 256, 512}}
	kerneltest.DecodeAttention(b, sh, func(f func(kerneltest.BenchMemory) error) error {
		return d.Do(func(x *Exec) error { return f(x) })
	})
}

// BenchmarkDeviceSampling times sampling on the device for 64 rows of
// TinyLlama's 32,000 logits beside reading those logits back to the host
// (kerneltest.DeviceSampling; the emulator's runs it at a tiny shape).
func BenchmarkDeviceSampling(b *testing.B) {
	d := open(b, src.F32)
	kerneltest.DeviceSampling(b, kerneltest.SampleShape{Rows: 64, Vocab: 32000}, func(f func(kerneltest.BenchMemory) error) error {
		return d.Do(func(x *Exec) error { return f(x) })
	})
}

// BenchmarkPrefillAttention times one prefill step's attention over 8
// prompts of 1,056 tokens (8,448 rows; TinyLlama's shape: 32 query heads,
// 4 KV heads of 64, bf16, blocks of 16 in random order) through
// attn_prefill and through attn (kerneltest.PrefillAttention; the
// emulator's runs it at a tiny shape).
func BenchmarkPrefillAttention(b *testing.B) {
	d := open(b, src.BF16)
	sh := kerneltest.PrefillShape{Seqs: 8, Prompt: 1056, NHeads: 32, KVHeads: 4, HeadDim: 64, BlockSize: 16}
	kerneltest.PrefillAttention(b, sh, func(f func(kerneltest.BenchMemory) error) error {
		return d.Do(func(x *Exec) error { return f(x) })
	})
}
